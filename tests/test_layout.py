"""The layout of src/bench/ (docs/contributing.md, "Add a benchmark"): a folder per benchmark, its
files split by role (pattern.c: the exchanges, the mode table, the metrics, the descriptor;
setup.c: checks, points, state, memory; verify.c: data patterns and checks; a private header),
each including only hmb/bench.h and that header, and calls between them going one way only.

The calls are read from the compiled code, not from the sources: the CMake target hmbbench (the
benchmarks' object files) is built into the MPICH tree that libhmbcore is built in (no MPI library
runs), and `nm` lists what each object defines and what it uses. A file that uses a symbol another
file of its benchmark defines depends on it; two files that depend on each other, or a longer
cycle, fail the test, naming the symbols each way."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from hmb.run import core, mpi

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "src/bench"
ROLES = ("pattern.c", "setup.c", "verify.c")


def benchmark_dirs() -> list[Path]:
    return sorted(p for p in BENCH.iterdir() if p.is_dir())


def symbols(obj: Path) -> tuple[set[str], set[str]]:
    """The global symbols obj defines and those it uses without defining (nm)."""
    out = subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] == "U":
            used.add(fields[1])
        elif len(fields) == 3 and fields[1] in "TDRBCGSVW":   # upper case: global
            defined.add(fields[2])
    return defined, used


def dependencies(objects: dict[str, Path]) -> dict[tuple[str, str], set[str]]:
    """(a, b) -> the symbols file a uses that file b (of the same benchmark) defines."""
    table = {name: symbols(obj) for name, obj in objects.items()}
    owner = {sym: name for name, (defined, _) in table.items() for sym in defined}
    edges: dict[tuple[str, str], set[str]] = {}
    for name, (_, used) in table.items():
        for sym in used:
            if sym in owner and owner[sym] != name:
                edges.setdefault((name, owner[sym]), set()).add(sym)
    return edges


def role_problems(bench: str, edges: dict[tuple[str, str], set[str]]) -> list[str]:
    """What breaks the one-way rule in one benchmark's dependencies: a pair of files using each
    other, a longer cycle, or a file using the pattern file (whose descriptor names the others)."""
    problems = []
    for (a, b), syms in sorted(edges.items()):
        if a < b and (b, a) in edges:
            problems.append(f"{bench}: {a} and {b} call each other: {a} uses {sorted(syms)}, "
                            f"{b} uses {sorted(edges[(b, a)])}")
        if b == "pattern.c":
            problems.append(f"{bench}: {a} uses {sorted(syms)} of pattern.c (the top: its descriptor names "
                            f"the other files, never the other way)")
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        if (b, a) not in edges:
            graph.setdefault(a, set()).add(b)
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                problems.append(f"{bench}: a cycle of calls: {' -> '.join(path[path.index(nxt):] + [node, nxt])}")
            elif nxt not in state:
                visit(nxt, path + [node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return problems


@pytest.fixture(scope="module")
def bench_objects() -> dict[str, dict[str, Path]]:
    """Every benchmark's object files, built now from the sources as they are: {bench: {file: .o}}."""
    bdir = core.build_library().parent            # the MPICH tree, configured (as for libhmbcore)
    with mpi.tree_lock(mpi.build_lock_path(bdir)):
        r = subprocess.run(["cmake", "--build", str(bdir), "--target", "hmbbench", "-j", "2"],
                           capture_output=True, text=True, errors="replace")
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    objdir = bdir / "CMakeFiles/hmbbench.dir/src/bench"
    out = {}
    for d in benchmark_dirs():
        out[d.name] = {c.name: objdir / d.name / (c.name + ".o") for c in sorted(d.glob("*.c"))}
        for name, obj in out[d.name].items():
            assert obj.exists(), f"{d.name}/{name}: no object {obj} after building hmbbench"
    return out


def test_every_benchmark_is_a_folder_of_roles():
    loose = sorted(p.name for p in BENCH.iterdir() if p.is_file())
    assert loose == [], f"files outside a benchmark's folder: {loose}"
    dirs = benchmark_dirs()
    assert len(dirs) >= 10, [d.name for d in dirs]
    for d in dirs:
        missing = [f for f in (*ROLES, d.name + ".h") if not (d / f).exists()]
        assert not missing, f"src/bench/{d.name}/ lacks {missing}"
        registered = [f.name for f in d.glob("*.c") if "HMB_REGISTER(" in f.read_text()]
        assert registered == ["pattern.c"], f"{d.name}: the descriptor is registered in {registered}"


def test_benchmarks_include_only_bench_h_and_their_header():
    for d in benchmark_dirs():
        for f in sorted(d.iterdir()):
            quoted = re.findall(r'^\s*#\s*include\s+"([^"]+)"', f.read_text(), re.M)
            allowed = {"hmb/bench.h"} if f.name == d.name + ".h" else {d.name + ".h"}
            assert set(quoted) <= allowed, f"src/bench/{d.name}/{f.name} includes {sorted(set(quoted) - allowed)}"


def test_files_of_a_benchmark_call_each_other_one_way(bench_objects):
    problems = []
    for bench, objects in bench_objects.items():
        problems += role_problems(bench, dependencies(objects))
    assert not problems, "\n".join(problems)


def test_the_check_catches_files_calling_each_other(tmp_path):
    """The rule above, on planted objects: pattern.c uses setup.c's function, which calls back into
    pattern.c; verify.c is used by setup.c only (one way: allowed)."""
    planted = {
        "pattern.c": "int setup_points(void); int pattern_step(void) { return 1; } int run(void) { return setup_points(); }",
        "setup.c": "int pattern_step(void); int check_buffer(void); int setup_points(void) "
                   "{ return pattern_step() + check_buffer(); }",
        "verify.c": "int check_buffer(void) { return 0; }",
    }
    objects = {}
    for name, text in planted.items():
        (tmp_path / name).write_text(text + "\n")
        objects[name] = tmp_path / (name + ".o")
        subprocess.run(["cc", "-c", str(tmp_path / name), "-o", str(objects[name])], check=True)
    edges = dependencies(objects)
    assert edges == {("pattern.c", "setup.c"): {"setup_points"}, ("setup.c", "pattern.c"): {"pattern_step"},
                     ("setup.c", "verify.c"): {"check_buffer"}}
    problems = role_problems("toy", edges)
    assert problems == ["toy: pattern.c and setup.c call each other: pattern.c uses ['setup_points'], "
                        "setup.c uses ['pattern_step']",
                        "toy: setup.c uses ['pattern_step'] of pattern.c (the top: its descriptor names the "
                        "other files, never the other way)"]
    assert role_problems("toy", {k: v for k, v in edges.items() if k != ("setup.c", "pattern.c")}) == []
