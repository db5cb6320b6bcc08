"""Seed studies: a study is data (python/hmb/studies/NAME.toml, checked against
python/hmb/schema/study.schema.json): the paper it comes from, the sweep grid with the paper's
parameters (sections [sweep] and [[bench]] in hmb sweep's config format, plus two study-only
keys per bench: `figures`, the figure ids it feeds, and `fit_ranks`, the ranks to use when the
published ones do not fit), the figures it draws ([[figure]], drawn by study/figures.py) and
the paper's claims ([[claim]], judged by study/claims.py). docs/studies.md describes the format.
"""
from __future__ import annotations

import dataclasses
import json
import os
from importlib import resources
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:   # Python < 3.11
    import tomli as tomllib

import jsonschema

STUDY_ONLY_BENCH_KEYS = ("figures", "fit_ranks", "demo_args", "note", "partition_per_thread",
                         "demo_threads", "fit_threads", "demo")


class StudyError(Exception):
    """A one-line problem with a study file or a study command (exit status 2)."""


@dataclasses.dataclass
class Study:
    name: str
    path: Path
    data: dict

    @property
    def meta(self) -> dict:
        return self.data["study"]

    @property
    def figures(self) -> list:
        return self.data.get("figure", [])

    @property
    def tables(self) -> list:
        return self.data.get("table", [])

    def not_run(self, figure: str | None = None) -> list[str]:
        """What the study cannot run, one line each: the study's `missing` and each figure
        whose `needs` HMB lacks (only that figure's, with figure)."""
        out = [] if figure else [f"not run: {m}" for m in self.meta.get("missing", [])]
        out += [f"not run: {f['number']} ({f['title']}): needs {f['needs']}" for f in self.figures
                if f.get("needs") and (figure is None or f["id"] == figure)]
        return out

    @property
    def claims(self) -> list:
        return self.data.get("claim", [])

    @property
    def benches(self) -> list:
        return self.data["bench"]

    def figure(self, fid: str) -> dict:
        for f in self.figures:
            if f["id"] == fid:
                return f
        raise StudyError(f"study {self.name}: no figure {fid!r} (has: {', '.join(f['id'] for f in self.figures)})")

    def citation(self) -> str:
        m = self.meta
        return f"{m['authors']}, \"{m['title']}\", {m['venue']}, {m['year']}"


def studies_dir() -> Path:
    return Path(str(resources.files("hmb") / "studies"))


def _schema() -> dict:
    return json.loads((resources.files("hmb") / "schema" / "study.schema.json").read_text())


# Keys of a report figure that a study figure starting from it (`from`) does not take.
REPORT_ONLY_KEYS = ("id", "title", "question", "per")


def report_figures() -> dict:
    """id -> declaration of the report's figures (python/hmb/reports/figures.toml, checked
    against the schema's $defs.report_figures): the figures `hmb report` draws, which a study
    figure may start from (`from`)."""
    path = resources.files("hmb") / "reports" / "figures.toml"
    where = "hmb/reports/figures.toml"
    data = tomllib.loads(path.read_text())
    schema = _schema()
    v = jsonschema.Draft202012Validator({"$defs": schema["$defs"], "$ref": "#/$defs/report_figures"})
    errors = sorted(v.iter_errors(data), key=lambda e: (len(list(e.absolute_path)), str(e.absolute_path)))
    if errors:
        raise StudyError(f"{where}: {_where(errors[0])}: {errors[0].message}")
    out = {}
    for f in data["figure"]:
        if f["id"] in out:
            raise StudyError(f"{where}: figure id {f['id']!r} repeats")
        out[f["id"]] = f
    return out


def resolve(fig: dict, where: str = "") -> dict:
    """A study figure with `from`: the report figure it names, its own keys winning (its `where`
    filters added to the report figure's)."""
    if "from" not in fig:
        return fig
    base = report_figures().get(fig["from"])
    if base is None:
        raise StudyError(f"{where}{': ' if where else ''}figure {fig['id']}: from: no report figure "
                         f"{fig['from']!r} (python/hmb/reports/figures.toml)")
    out = {**{k: v for k, v in base.items() if k not in REPORT_ONLY_KEYS}, **fig}
    if base.get("where") or fig.get("where"):
        out["where"] = {**base.get("where", {}), **fig.get("where", {})}
    return out


def _where(err: jsonschema.ValidationError) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
    return path.lstrip(".") or "(top)"


def check(data: dict, where: str) -> None:
    """The study's data against its schema and its own cross-references; one-line StudyError."""
    v = jsonschema.Draft202012Validator(_schema())
    errors = sorted(v.iter_errors(data), key=lambda e: (len(list(e.absolute_path)), str(e.absolute_path)))
    if errors:
        e = errors[0]
        raise StudyError(f"{where}: {_where(e)}: {e.message}")
    ids = [f["id"] for f in data.get("figure", []) + data.get("table", [])]
    if len(set(ids)) != len(ids):
        raise StudyError(f"{where}: figure and table ids repeat ({', '.join(ids)})")
    for i, b in enumerate(data["bench"]):
        for fid in b.get("figures", []):
            if fid not in ids:
                raise StudyError(f"{where}: bench[{i}].figures: no figure or table {fid!r}")
    if data["study"].get("headline") and data["study"]["headline"] not in ids:
        raise StudyError(f"{where}: study.headline: no figure {data['study']['headline']!r}")
    for i, c in enumerate(data.get("claim", [])):
        if c.get("figure_id") and c["figure_id"] not in ids:
            raise StudyError(f"{where}: claim[{i}].figure_id: no figure {c['figure_id']!r}")


def load_file(path) -> Study:
    p = Path(path)
    if not p.is_file():
        raise StudyError(f"study file not found: {path}")
    try:
        data = tomllib.loads(p.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise StudyError(f"{path}: bad TOML: {str(e).splitlines()[0]}") from None
    check(data, str(p))
    data["figure"] = [resolve(f, str(p)) for f in data.get("figure", [])]
    return Study(p.stem, p, data)


def names() -> list[str]:
    return sorted(p.stem for p in studies_dir().glob("*.toml"))


def load(name: str) -> Study:
    """A shipped study by name, or a study file by path."""
    if name.endswith(".toml") or os.sep in name:
        return load_file(name)
    p = studies_dir() / f"{name}.toml"
    if not p.is_file():
        raise StudyError(f"no study {name!r} (hmb study list names them: {', '.join(names())})")
    return load_file(p)
