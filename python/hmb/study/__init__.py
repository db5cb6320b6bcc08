"""Seed studies: a study is data (python/hmb/studies/NAME.toml, checked against
python/hmb/data/schema/study.schema.json): the paper it comes from, the sweep grid with the paper's
parameters (sections [sweep] and [[bench]] in hmb sweep's config format, plus two study-only
keys per bench: `figures`, the figure ids it feeds, and `fit_ranks`, the ranks to use when the
published ones do not fit), the figures it draws ([[figure]], drawn by study/figures.py) and
the paper's claims ([[claim]], judged by study/claims.py). docs/studies.md describes the format.
"""
from __future__ import annotations

import dataclasses
import math
import os
import re
from importlib import resources
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:   # Python < 3.11
    import tomli as tomllib

import jsonschema

from ..data import DATA_DIR, schema
from ..data.results import file_problem
from ..present.reports.declared import DeclarationError, report_figures

STUDY_ONLY_BENCH_KEYS = ("figures", "fit_ranks", "demo_args", "note", "partition_per_thread",
                         "demo_threads", "fit_threads", "demo", "oversubscribe")


class StudyError(Exception):
    """A one-line problem with a study file or a study command (exit status 2)."""


MAX_STUDY_BYTES = 1 << 20   # the shipped studies are 10-30 KB
MAX_TEXT_CHARS = 2000       # any one string of a study (their longest: a 465-character summary)
# A study's name as part of a path (results/study-NAME): the file name's characters outside
# these become "_" (a newline in the file name left a directory named with one).
_PATH_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")
# Line separators and bidirectional overrides: they break a line, or reorder what a terminal shows.
_LINE_OR_BIDI = frozenset("\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def path_name(stem: str) -> str:
    """A study file's name fit for a path and a TOML comment: letters, digits and . _ + -,
    not starting with . or -, at most 64 characters."""
    name = _PATH_UNSAFE.sub("_", stem)[:64]
    return name if name and name[0] not in ".-" else f"_{name}"[:64]


def shown(text) -> str:
    """Text from a file (a path, a value) in a one-line message: control characters escaped."""
    text = str(text)
    if all(c.isprintable() for c in text):
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode("ascii")
                   for c in text)


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

    @property
    def missing(self) -> list:
        return self.meta.get("missing", [])

    def not_run(self, figure: str | None = None) -> list[str]:
        """What the study cannot run, one line each: the study's `missing` and each figure
        whose `needs` HMB lacks (only that figure's, with figure)."""
        out = [] if figure else [f"not run: {missing_text(m)}" for m in self.missing]
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

    def coverage(self, cores: int | None = None) -> "Coverage":
        """The study's inventory counted: the paper's statements, those declared as claims
        (a table's cells each), those a run on `cores` cores can judge, those missing, and the
        paper's figures and tables no claim or missing entry accounts for."""
        from . import claims as hclaims   # pandas: hmb's parser loads this package (hmb --help)
        needs = {f["id"]: f["needs"] for f in self.figures if f.get("needs")}
        cov = Coverage()
        for c in self.claims:
            lacks = needs.get(c.get("figure_id"), "")
            for e in hclaims.expand(c):
                cov.declared += 1
                cov.judged_here += hclaims.runnable_here(e, lacks, cores)
                cov.unreviewed += str(e.get("tolerance_from", "")).startswith("unreviewed")
                cov.breaking += bool(hclaims.lint(e))
        cov.missing = sum(m.get("cells", 1) if isinstance(m, dict) else 1 for m in self.missing)
        cov.figures = list(self.meta.get("paper_figures", []))
        cov.unaccounted = [f for f in cov.figures if f not in self.sources()]
        return cov

    def sources(self) -> set[str]:
        """The paper's figures, tables and sections the claims and missing entries name."""
        out = set()
        for c in self.claims:
            out.add(c["figure"])
            out.update(c.get("also_in", []))
            for cell in c.get("cells", []):
                out.update(cell.get("also_in", []))
        out.update(m["figure"] for m in self.missing if isinstance(m, dict))
        return out

    def citation(self) -> str:
        m = self.meta
        return f"{m['authors']}, \"{m['title']}\", {m['venue']}, {m['year']}"


@dataclasses.dataclass
class Coverage:
    declared: int = 0        # claims, a table's cells each
    judged_here: int = 0     # of those, the ones this machine can give a verdict
    missing: int = 0         # statements listed in missing, with the reason
    unreviewed: int = 0      # claims whose tolerance is marked unreviewed (issue 27)
    breaking: int = 0        # claims that break a fidelity rule (claims.lint)
    figures: list = dataclasses.field(default_factory=list)       # the paper's figures and tables
    unaccounted: list = dataclasses.field(default_factory=list)   # of those, read by nothing

    @property
    def statements(self) -> int:
        return self.declared + self.missing

    def line(self) -> str:
        figs = (f"; {len(self.figures) - len(self.unaccounted)} of {len(self.figures)} figures and tables "
                f"accounted for" + (f" (not: {', '.join(self.unaccounted)})" if self.unaccounted else "")
                if self.figures else "; the paper's figures and tables are not listed (paper_figures)")
        extra = "".join(f"; {n} {what}" for n, what in ((self.unreviewed, "unreviewed"),
                                                        (self.breaking, "breaking a fidelity rule")) if n)
        return (f"{self.statements} statements: {self.declared} declared, {self.missing} missing; "
                f"{self.declared - self.judged_here} not runnable here{figs}{extra}")


def missing_text(m) -> str:
    """A `missing` entry as one line: a bare string as it is, else 'FIGURE: WHAT — WHY'."""
    if isinstance(m, str):
        return m
    return f"{m['figure']}: {m['what']} — {m['why']}"


def studies_dir() -> Path:
    return Path(str(resources.files("hmb") / "studies"))


# Keys of a report figure that a study figure starting from it (`from`) does not take.
REPORT_ONLY_KEYS = ("id", "title", "question", "per")


def resolve(fig: dict, where: str = "") -> dict:
    """A study figure with `from`: the report figure it names, its own keys winning (its `where`
    filters added to the report figure's)."""
    if "from" not in fig:
        return fig
    try:
        base = report_figures().get(fig["from"])
    except DeclarationError as e:
        raise StudyError(str(e)) from None
    if base is None:
        raise StudyError(f"{where}{': ' if where else ''}figure {fig['id']}: from: no report figure "
                         f"{fig['from']!r} (python/hmb/present/reports/figures.toml)")
    out = {**{k: v for k, v in base.items() if k not in REPORT_ONLY_KEYS}, **fig}
    if base.get("where") or fig.get("where"):
        out["where"] = {**base.get("where", {}), **fig.get("where", {})}
    return out


def _values(data, path=()):
    """(path, value) of every string and number of a study, depth first, in file order."""
    stack = [(path, data)]
    while stack:
        at, v = stack.pop()
        if isinstance(v, dict):
            stack.extend(reversed([(at + (k,), x) for k, x in v.items()]))
        elif isinstance(v, list):
            stack.extend(reversed([(at + (i,), x) for i, x in enumerate(v)]))
        else:
            yield at, v


def _path_text(at: tuple) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in at).lstrip(".") or "(top)"


def _plain_values(data: dict, where: str) -> None:
    """No number from a study is NaN or infinite (TOML's nan and inf: `tolerance = inf` made
    every reading agree), and no string holds a control character (a newline in a title became
    a line of hmb's config.toml) or runs past MAX_TEXT_CHARS."""
    for at, v in _values(data):
        if isinstance(v, float) and not math.isfinite(v):
            raise StudyError(f"{where}: {_path_text(at)}: {v} is not a finite number")
        if isinstance(v, str):
            if len(v) > MAX_TEXT_CHARS:
                raise StudyError(f"{where}: {_path_text(at)}: {len(v)} characters, more than {MAX_TEXT_CHARS} "
                                 "(a study's text is a sentence or a paragraph)")
            bad = next((c for c in v if ord(c) < 32 or 127 <= ord(c) < 160 or c in _LINE_OR_BIDI), None)
            if bad is not None:
                raise StudyError(f"{where}: {_path_text(at)}: holds a control character ({shown(bad)}): "
                                 "a study's text is one line")
        for key in at:
            if isinstance(key, str) and (len(key) > 200 or not key.isprintable()):
                raise StudyError(f"{where}: a key {shown(key[:64])!r}{'...' if len(key) > 64 else ''} is not a "
                                 "name (printable, at most 200 characters)")


def check(data: dict, where: str) -> None:
    """The study's data against its schema and its own cross-references; one-line StudyError."""
    where = shown(where)
    _plain_values(data, where)
    e = schema.first_error(jsonschema.Draft202012Validator(schema.load("study.schema.json")), data)
    if e is not None:
        raise StudyError(f"{where}: {schema.where(e)}: {shown(e.message[:300])}")
    ids = [f["id"] for f in data.get("figure", []) + data.get("table", [])]
    if len(set(ids)) != len(ids):
        raise StudyError(f"{where}: figure and table ids repeat ({', '.join(ids)})")
    for i, b in enumerate(data["bench"]):
        for fid in b.get("figures", []):
            if fid not in ids:
                raise StudyError(f"{where}: bench[{i}].figures: no figure or table {fid!r}")
    for i, f in enumerate(data.get("figure", [])):
        for j, name in enumerate(f.get("mpip", [])):
            if not _inside_data(name):
                raise StudyError(f"{where}: figure[{i}].mpip[{j}]: {name!r} is not a report under the bundled "
                                 "data folder (python/hmb/data/)")
    if data["study"].get("headline") and data["study"]["headline"] not in ids:
        raise StudyError(f"{where}: study.headline: no figure {data['study']['headline']!r}")
    claim_ids = [c["id"] for c in data.get("claim", []) if c.get("id")]
    if len(set(claim_ids)) != len(claim_ids):
        raise StudyError(f"{where}: claim ids repeat ({', '.join(claim_ids)})")
    for i, c in enumerate(data.get("claim", [])):
        if c.get("figure_id") and c["figure_id"] not in ids:
            raise StudyError(f"{where}: claim[{i}].figure_id: no figure {c['figure_id']!r}")
        if c.get("contradicts") and c["contradicts"] not in claim_ids:
            raise StudyError(f"{where}: claim[{i}].contradicts: no claim with id {c['contradicts']!r}")


def _inside_data(name: str) -> bool:
    """An mpiP report named relative to python/hmb/data/ stays inside it (no .., no link out)."""
    try:
        return (DATA_DIR / name).resolve().is_relative_to(DATA_DIR.resolve())
    except (OSError, RuntimeError, ValueError):
        return False


def load_file(path) -> Study:
    """A study file, checked (schema, cross-references, finite numbers, one-line text); its
    name is the file's, made fit for a path (path_name)."""
    p = Path(path)
    problem = file_problem(p)
    if problem:
        raise StudyError(f"study file not found: {shown(path)}" if problem == "no such file"
                         else f"{shown(path)}: {problem}")
    size = p.stat().st_size
    if size > MAX_STUDY_BYTES:
        raise StudyError(f"{shown(path)}: {size} bytes; a study file is at most {MAX_STUDY_BYTES >> 20} MiB")
    try:
        data = tomllib.loads(p.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as e:
        raise StudyError(f"{shown(path)}: not UTF-8 text (byte {e.start + 1})") from None
    except tomllib.TOMLDecodeError as e:
        raise StudyError(f"{shown(path)}: bad TOML: {shown(str(e).splitlines()[0])}") from None
    except RecursionError:
        raise StudyError(f"{shown(path)}: bad TOML: nested too deeply") from None
    try:
        check(data, str(p))
    except RecursionError:
        raise StudyError(f"{shown(path)}: nested too deeply for a study") from None
    data["figure"] = [resolve(f, str(p)) for f in data.get("figure", [])]
    return Study(path_name(p.stem), p, data)


def names() -> list[str]:
    return sorted(p.stem for p in studies_dir().glob("*.toml"))


def load(name: str) -> Study:
    """A shipped study by name, or a study file by path."""
    if name.endswith(".toml") or os.sep in name:
        return load_file(name)
    if name not in names():
        raise StudyError(f"no study '{shown(name[:100])}' (hmb study list names them: {', '.join(names())})")
    return load_file(studies_dir() / f"{name}.toml")
