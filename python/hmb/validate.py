"""`hmb validate FILE...`: check HMB output files against the shipped JSON Schema.

A file is JSON Lines (one record per line) or, when its first line is not a whole JSON value,
one JSON document (`hmb check --json`, `hmb advise --json`). A line left partial by a killed
writer is a bad record like any other: it is reported, never skipped.
"""
from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path

import jsonschema

SCHEMA_FILE = "hmb-output.schema.json"


@lru_cache(maxsize=1)
def schema() -> dict:
    return json.loads(resources.files("hmb.schema").joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft202012Validator:
    s = schema()
    jsonschema.Draft202012Validator.check_schema(s)
    return jsonschema.Draft202012Validator(s)


def _why(record) -> str | None:
    """One line saying what is wrong with a record, or None when it is valid."""
    kind = record.get("type", "descriptor listing") if isinstance(record, dict) else "record"
    record, samples_problem = _samples_checked(record)
    try:
        errors = list(_validator().iter_errors(record))
    except RecursionError:
        return f"{kind}: nested too deeply"
    if not errors:
        return f"{kind}: {samples_problem}" if samples_problem else None
    # the deepest error names the offending key; the best_match heuristic prefers it
    e = jsonschema.exceptions.best_match(errors)
    where = "/".join(str(p) for p in e.absolute_path)
    return f"{kind}: {where + ': ' if where else ''}{e.message}"


def _samples_checked(record):
    """(the record with each `samples` list cut to its first item, what is wrong with the
    lists or None): --raw keeps every iteration (up to --max-iters, 10^5 by default, per
    metric), and the schema's validator takes seconds per million items; each item is
    checked here instead, as the schema says: a number or null."""
    samples = record.get("samples") if isinstance(record, dict) else None
    if not isinstance(samples, dict) or not any(isinstance(s, list) and len(s) > 1 for s in samples.values()):
        return record, None
    from .results import only_numbers
    problem = None
    for name, s in samples.items():
        if isinstance(s, list) and problem is None and not only_numbers(s):
            i = next(i for i, x in enumerate(s) if not only_numbers([x]))
            problem = f"samples/{name}/{i}: {s[i]!r:.40} is not of type 'number', 'null'"
    return {**record, "samples": {k: (s[:1] if isinstance(s, list) else s) for k, s in samples.items()}}, problem


def records(path: Path):
    """(line number, parsed value or None, problem or None) for each record of a file, each
    line read by results.decode, the decoder hmb.load and the reports use (so `hmb validate`
    and the reader agree on every line)."""
    from .results import BLANK, decode
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):   # a leading byte-order mark is not a bad record (as results.py reads it)
        data = data[3:]
    lines = data.split(b"\n")
    first = next((i for i, line in enumerate(lines) if line.strip(b" \t\r\n")), None)
    if first is not None and (decode(lines[first])[0] or "").startswith("not JSON ("):
        problem, doc = decode(data)     # one indented document
        if problem is None or not problem.startswith("not JSON ("):   # a whole document (NaN in it: said once)
            yield first + 1, doc, problem
            return
    for i, line in enumerate(lines, 1):
        problem, value = decode(line)
        if value is not BLANK:
            yield i, value, problem


def validate_file(path: Path) -> tuple[int, list[str]]:
    """(records seen, one 'FILE:LINE: why' per bad record). An empty file has no bad record
    (hmb-bench opens its --json file before a usage error can stop it)."""
    count, bad = 0, []
    for line, rec, err in records(path):
        count += 1
        why = err or _why(rec)
        if why:
            bad.append(f"{path}:{line}: {why}")
    return count, bad


def main(paths: list[str], out=print) -> int:
    from .results import file_problem
    total, bad = 0, []
    for p in paths:
        path = Path(p)
        problem = file_problem(path)
        if problem:
            bad.append(f"{p}:0: {problem}")
            continue
        n, b = validate_file(path)
        total += n
        bad += b
    for line in bad:
        out(line)
    if bad:
        out(f"# {len(bad)} bad of {total} records in {len(paths)} files")
        return 2
    out(f"# {total} records valid in {len(paths)} files (schema {schema()['x-schema-version']})")
    return 0
