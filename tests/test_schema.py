"""The output schema (python/hmb/schema), `hmb validate`, and the generated docs/output-schema.md."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from hmb.run import sweep
from hmb.data import validate

from conftest import hmb_cli

ROOT = Path(__file__).resolve().parent.parent
RUN = {"type": "run", "schema": 1, "run_id": "h-1-2", "bench": "p2p", "ranks": 2, "threads": 1,
       "mpi": {"library": "MPICH Version: 4.2", "impl": "MPICH"}, "thread_level": {"requested": "SINGLE", "provided": "SINGLE"}}
RESULT = {"type": "result", "schema": 1, "run_id": "h-1-2", "bench": "p2p", "status": "ok",
          "params": {"size_bytes": 8, "mode": "latency", "threads": 1},
          "metrics": {"latency_us": {"unit": "us", "median": 1.5, "ci_lo": 1.4, "ci_hi": 1.6, "count": 30,
                                     "higher_is_better": False}}}
CONFORMANCE = {"type": "conformance", "schema": 1, "library": "MPICH 4.2", "check": "pready-before-start",
               "verdict": "UNSUPPORTED", "reason": "no MPI_Psend_init", "time": "2026-01-01T00:00:00Z",
               "reproducer": "mpiexec -n 2 hmb-bench conform --check pready-before-start"}


def hmb_validate(*paths):
    return hmb_cli(["validate", *paths], cwd=ROOT)


def test_schema_is_valid_draft_2020_12_and_versioned_with_the_writers():
    s = validate.schema()
    jsonschema.Draft202012Validator.check_schema(s)
    header = (ROOT / "include/hmb/hmb.h").read_text()
    c_version = int(re.search(r"#define HMB_SCHEMA_VERSION (\d+)", header).group(1))
    assert s["x-schema-version"] == c_version == sweep.SCHEMA
    assert s["$defs"]["schema"]["const"] == c_version


def test_good_records_pass_with_a_count(tmp_path):
    f = tmp_path / "good.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in (RUN, RESULT, CONFORMANCE)))
    p = hmb_validate(f, ROOT / "tests/data/compare_a.jsonl")
    assert p.returncode == 0, p.stdout
    n_data = sum(1 for line in (ROOT / "tests/data/compare_a.jsonl").read_text().splitlines() if line.strip())
    assert p.stdout.strip() == f"# {3 + n_data} records valid in 2 files (schema 1)"


PLANTED = [   # (record or raw line, what the one line must say)
    ({**RESULT, "params": [8]}, "params: [8] is not of type 'object'"),
    ({**RESULT, "status": "fine"}, "status: 'fine' is not one of"),
    ({**RESULT, "metrics": {"latency_us": {"unit": "us", "median": "1.5"}}}, "metrics/latency_us/median: '1.5' is not of type"),
    ({**RUN, "ranks": 0}, "ranks: 0 is less than the minimum of 1"),
    ({**RUN, "schema": 2}, "schema: 1 was expected"),
    ({**CONFORMANCE, "verdict": "MAYBE"}, "verdict: 'MAYBE' is not one of ['PASS', 'FAIL', 'UNSUPPORTED']"),
    ({**CONFORMANCE, "verdict": "FAIL", "reason": ""}, "reason: '' should be non-empty"),
    ({k: v for k, v in CONFORMANCE.items() if k != "library"}, "'library' is a required property"),
    ({"type": "failure", "schema": 1, "run_id": "x", "kind": "crash", "bench": "p2p"}, "kind: 'crash' is not one of"),
    ({"type": "launch", "schema": 1, "tag": "t", "status": "done", "rc": "0"}, "rc: '0' is not of type 'integer'"),
    ({"type": "resultz", "bench": "p2p"}, "type: 'resultz' is not one of"),
    ({"benchmarks": []}, "'schema_version' is a required property"),
    ('{"type": "result", "bench": "p2p", "par', "not JSON"),
]


@pytest.mark.planted_json("bad.jsonl")
def test_each_planted_bad_record_is_one_line_naming_file_and_line(tmp_path):
    f = tmp_path / "bad.jsonl"
    lines = [json.dumps(RUN)] + [r if isinstance(r, str) else json.dumps(r) for r, _ in PLANTED] + [json.dumps(RESULT)]
    f.write_text("\n".join(lines) + "\n")
    p = hmb_validate(f)
    assert p.returncode == 2
    out = p.stdout.splitlines()
    assert out[-1] == f"# {len(PLANTED)} bad of {len(PLANTED) + 2} records in 1 files"
    bad = out[:-1]
    assert len(bad) == len(PLANTED), p.stdout
    for i, (line, (_, why)) in enumerate(zip(bad, PLANTED)):
        assert line.startswith(f"{f}:{i + 2}: ") and why in line, (line, why)
    assert "Traceback" not in p.stderr


def test_indented_document_and_missing_file(tmp_path):
    doc = tmp_path / "machine.json"
    doc.write_text(json.dumps({**CONFORMANCE}, indent=1))
    assert hmb_validate(doc).returncode == 0
    p = hmb_validate(doc, tmp_path / "absent.jsonl")
    assert p.returncode == 2 and p.stdout.splitlines()[0] == f"{tmp_path / 'absent.jsonl'}:0: no such file"


def test_real_hmb_bench_descriptors_are_valid(tmp_path):
    from conftest import get_mpi
    exe = get_mpi("mpich").build_dir / "hmb-bench"
    f = tmp_path / "list.json"
    f.write_text(subprocess.run([str(exe), "--list", "--json"], capture_output=True, text=True, check=True).stdout)
    count, bad = validate.validate_file(f)
    assert count == 1 and bad == []


def test_conftest_hook_reports_an_unplanted_bad_file(tmp_path):
    import conftest
    f = tmp_path / "sub" / "stray.jsonl"
    f.parent.mkdir()
    f.write_text('{"type": "result", "bench": "p2p", "params": 3}\n')
    bad = conftest._bad_json_under(tmp_path)
    assert bad == [f"{f}:1: result: params: 3 is not of type 'object'"]


def test_output_schema_doc_is_generated_from_the_schema():
    p = subprocess.run([sys.executable, str(ROOT / "scripts/gen_output_schema_doc.py"), "--check"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
