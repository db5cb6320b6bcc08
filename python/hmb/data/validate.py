"""`hmb validate FILE...`: check HMB output files against the shipped JSON Schema.

A file is JSON Lines (one record per line) or, when its first line is not a whole JSON value,
one JSON document (`hmb check --json`, `hmb advise --json`). A line left partial by a killed
writer is a bad record like any other: it is reported, never skipped.
"""
from __future__ import annotations

import json
import os
from functools import lru_cache
from importlib import resources
from pathlib import Path

import jsonschema

from .results import BLANK, decode, file_problem, lines, only_numbers

SCHEMA_FILE = "hmb-output.schema.json"


@lru_cache(maxsize=1)
def schema() -> dict:
    return json.loads(resources.files("hmb.data.schema").joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft202012Validator:
    s = schema()
    jsonschema.Draft202012Validator.check_schema(s)
    return jsonschema.Draft202012Validator(_inlined(s))


@lru_cache(maxsize=None)
def _validator_for(kind) -> jsonschema.Draft202012Validator:
    """The schema's validator for a record of this type, with only its own `if type is ...`
    branch (the others cannot apply to it): the same errors, without testing a record against
    every type's condition. Anything else: the whole schema."""
    s = _validator().schema
    branches = [c for c in s.get("allOf", [])
                if ((c.get("if") or {}).get("properties") or {}).get("type", {}).get("const") == kind]
    if not isinstance(kind, str) or len(branches) != 1:
        return _validator()
    return jsonschema.Draft202012Validator({**{k: v for k, v in s.items() if k != "allOf"}, "allOf": branches})


def _inlined(s: dict) -> dict:
    """The schema with every local reference (#/$defs/NAME) replaced by what it names: the same
    rules, without a reference lookup per key of every record (a third of the time of `hmb
    validate` on a 1 GB file went to resolving them). The schema's definitions refer to no
    definition that refers back."""
    defs = s.get("$defs", {})

    def walk(node):
        if isinstance(node, list):
            return [walk(v) for v in node]
        if not isinstance(node, dict):
            return node
        out = {k: walk(v) for k, v in node.items() if k != "$ref" and k != "$defs"}
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] in defs:
            target = walk(defs[ref[8:]])
            if not out:
                return target
            out["allOf"] = out.get("allOf", []) + [target]
        elif ref is not None:
            out["$ref"] = ref
        if "$defs" in node and node is s:
            out["$defs"] = node["$defs"]
        return out

    return walk(s)


def _why(record) -> str | None:
    """One line saying what is wrong with a record, or None when it is valid."""
    kind = record.get("type", "descriptor listing") if isinstance(record, dict) else "record"
    record, samples_problem = _samples_checked(record)
    try:
        errors = list(_validator_for(record.get("type") if isinstance(record, dict) else None)
                      .iter_errors(record))
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
    problem = None
    for name, s in samples.items():
        if isinstance(s, list) and problem is None and not only_numbers(s):
            i = next(i for i, x in enumerate(s) if not only_numbers([x]))
            problem = f"samples/{name}/{i}: {s[i]!r:.40} is not of type 'number', 'null'"
    return {**record, "samples": {k: (s[:1] if isinstance(s, list) else s) for k, s in samples.items()}}, problem


# A file read as one indented JSON document (hmb check --json, hmb advise --json) is read whole:
# at most this large. Larger files are read as JSON Lines, a line at a time.
DOC_MAX_BYTES = 64 << 20


def records(path: Path):
    """(line number, parsed value or None, problem or None) for each record of a file, read a
    line at a time (results.lines: bounded memory, a NUL run or a sparse file passed at once),
    each line decoded by results.decode, the decoder hmb.load and the reports use (so `hmb
    validate` and the reader agree on every line)."""
    with open(path, "rb") as f:
        first = next(((n, raw, why) for n, raw, why in lines(f) if why or raw.strip(b" \t\r\n")), None)
        if first is not None and first[2] is None and (decode(first[1])[0] or "").startswith("not JSON (") \
                and os.fstat(f.fileno()).st_size <= DOC_MAX_BYTES:
            f.seek(0)
            data = f.read()
            if data.startswith(b"\xef\xbb\xbf"):   # a leading byte-order mark is not a bad record
                data = data[3:]
            problem, doc = decode(data)     # one indented document
            if problem is None or not problem.startswith("not JSON ("):   # a whole document (NaN in it: said once)
                yield first[0], doc, problem
                return
        f.seek(0)
        for i, line, why in lines(f):
            if why:
                yield i, None, why
                continue
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
    total, bad, unread = 0, [], 0
    for p in paths:
        path = Path(p)
        problem = file_problem(path)
        if problem:     # a FIFO or a device is never opened (reading one would block)
            bad.append(f"{p}:0: {problem}")
            unread += 1
            continue
        n, b = validate_file(path)
        total += n
        bad += b
    for line in bad:
        out(line)
    if bad and unread == len(bad) == len(paths):   # nothing read: the one line says it all
        return 2
    if bad:
        out(f"# {len(bad)} bad of {total} records in {len(paths)} files")
        return 2
    out(f"# {total} records valid in {len(paths)} files (schema {schema()['x-schema-version']})")
    return 0
