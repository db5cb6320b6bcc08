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
    errors = list(_validator().iter_errors(record))
    if not errors:
        return None
    # the deepest error names the offending key; the best_match heuristic prefers it
    e = jsonschema.exceptions.best_match(errors)
    where = "/".join(str(p) for p in e.absolute_path)
    kind = record.get("type", "descriptor listing") if isinstance(record, dict) else "record"
    return f"{kind}: {where + ': ' if where else ''}{e.message}"


def records(path: Path):
    """(line number, parsed value or None, parse error or None) for each record of a file."""
    text = path.read_text(encoding="utf-8-sig", errors="replace")   # a leading byte-order mark is not a bad record (as results.py reads it)
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None:
        try:
            json.loads(lines[first])
        except json.JSONDecodeError:
            try:   # one indented document
                yield first + 1, json.loads(text), None
                return
            except json.JSONDecodeError:
                pass
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield i, json.loads(line), None
        except json.JSONDecodeError as e:
            yield i, None, f"not JSON ({e.msg} at column {e.colno})"


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
    total, bad = 0, []
    for p in paths:
        path = Path(p)
        if not path.is_file():
            bad.append(f"{p}:0: {'not a file' if path.exists() else 'no such file'}")
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
