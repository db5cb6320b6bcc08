"""The report's figures as declared in figures.toml beside this module (the studies' format,
checked against study.schema.json's $defs.report_figures): the figures `hmb report` draws, which
a study figure may start from (`from`). Read without drawing anything: the studies load it when
they load a study file."""
from __future__ import annotations

from importlib import resources

try:
    import tomllib
except ModuleNotFoundError:   # Python < 3.11
    import tomli as tomllib

import jsonschema

from ...data import schema

WHERE = "hmb/present/reports/figures.toml"


class DeclarationError(Exception):
    """figures.toml is not what the schema allows (one line)."""


def report_figures() -> dict:
    """id -> declaration of each figure of figures.toml."""
    data = tomllib.loads(resources.files(__package__).joinpath("figures.toml").read_text(encoding="utf-8"))
    defs = schema.load("study.schema.json")["$defs"]
    err = schema.first_error(jsonschema.Draft202012Validator({"$defs": defs, "$ref": "#/$defs/report_figures"}),
                             data)
    if err is not None:
        raise DeclarationError(f"{WHERE}: {schema.where(err)}: {err.message}")
    out = {}
    for f in data["figure"]:
        if f["id"] in out:
            raise DeclarationError(f"{WHERE}: figure id {f['id']!r} repeats")
        out[f["id"]] = f
    return out
