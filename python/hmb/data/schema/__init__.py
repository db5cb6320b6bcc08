"""The JSON Schemas HMB ships: hmb-output.schema.json (every record HMB writes; hmb.data.validate
checks files against it, docs/output-schema.md documents it) and study.schema.json (a study
file, and the report's declared figures in its $defs.report_figures). load() reads one;
first_error() and where() name the one problem a person should see first."""
from __future__ import annotations

import json
from importlib import resources

import jsonschema


def load(name: str) -> dict:
    """The schema file `name` of this package, parsed."""
    return json.loads(resources.files(__name__).joinpath(name).read_text(encoding="utf-8"))


def _rank(err: jsonschema.ValidationError) -> tuple:
    """The error to name first: the shallowest, but never the 'unevaluated properties' one a
    figure's shared keys ($defs.drawing) raise as soon as any of them is wrong (it would name
    every key of the figure instead of the one that is wrong)."""
    return (err.validator == "unevaluatedProperties", len(list(err.absolute_path)), str(err.absolute_path))


def first_error(validator: jsonschema.Draft202012Validator, data) -> jsonschema.ValidationError | None:
    """The error of data against validator's schema to name first (None: valid)."""
    errors = sorted(validator.iter_errors(data), key=_rank)
    return errors[0] if errors else None


def where(err: jsonschema.ValidationError) -> str:
    """Where in the data an error is, as a path: "figure[2].x", "(top)"."""
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
    return path.lstrip(".") or "(top)"
