"""`cmake --install` into a temporary prefix, then the installed hmb-bench runs from there
(docs/toolkit.md, "Installing"). Built with the MPICH wheel's compiler, as `hmb build` does."""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import get_mpi

ROOT = Path(__file__).resolve().parent.parent


def test_cmake_install_into_a_prefix_and_run_the_installed_binary(tmp_path):
    """The documented steps: configure with the MPI compiler wrapper (Release), build, then
    `cmake --install BUILD --prefix DIR`. The first two are what `hmb build` does (hmb.run.mpi.build:
    the same cmake command lines), so the session's MPICH build tree is the BUILD here; the
    install step, the one this test is about, runs on its own (a configure and build of a tree
    of its own cost 15 s of the suite for nothing the session's build does not already check)."""
    impl = get_mpi("mpich")
    env = impl.env()
    prefix = tmp_path / "prefix"
    cache = (impl.build_dir / "CMakeCache.txt").read_text()
    assert "CMAKE_BUILD_TYPE:STRING=Release" in cache.splitlines() and \
        re.search(rf"^MPI_C_COMPILER:\w+={re.escape(str(impl.mpicc))}$", cache, re.M), \
        "the session's build tree was not configured as docs/toolkit.md says"
    cmd = ["cmake", "--install", str(impl.build_dir), "--prefix", str(prefix)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, errors="replace")
    assert r.returncode == 0, (cmd, r.stderr[-2000:])
    exe = prefix / "bin" / "hmb-bench"
    assert exe.is_file() and os.access(exe, os.X_OK)
    assert [p.name for p in prefix.glob("lib*/libhmbprof.so")] == ["libhmbprof.so"]
    # run from outside the source and build trees, with no LD_LIBRARY_PATH
    run_env = {k: v for k, v in env.items() if k != "LD_LIBRARY_PATH"}
    listed = subprocess.run([str(exe), "--list"], capture_output=True, text=True, cwd=tmp_path, env=run_env)
    assert listed.returncode == 0 and any(line.split()[:1] == ["p2p"] for line in listed.stdout.splitlines()), listed
    out = tmp_path / "p2p.jsonl"
    p = subprocess.run(impl.launch_args(2) + [str(exe), "p2p", "--mode", "latency", "--sizes", "8,1K", "--iters", "20", "--ci-target", "0",
                                             "--json", str(out)],
                       capture_output=True, text=True, cwd=tmp_path, env=run_env, timeout=240)
    assert p.returncode == 0, p.stderr[-2000:]
    results = [r for r in map(json.loads, out.read_text().splitlines()) if r["type"] == "result"]
    assert {r["params"]["size_bytes"] for r in results} == {8, 1024}
    assert all(r["status"] == "ok" and r["iterations"] > 0 for r in results)


def _assigned(tree: ast.Module) -> dict:
    return {t.id: n.value for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}


def test_spack_recipe_follows_the_osu_and_imb_conventions():
    """Spack cannot run here: check the recipe's shape (parses; CMakePackage; depends on the
    virtual mpi; an openmp variant; stand-alone test_* methods, one launching 2 ranks)."""
    tree = ast.parse((ROOT / "packaging/spack/package.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    assert cls.name == "Hmb" and [b.id for b in cls.bases] == ["CMakePackage"]
    calls = {(c.func.id, c.args[0].value) for c in ast.walk(cls) if isinstance(c, ast.Call)
             and isinstance(c.func, ast.Name) and c.args and isinstance(c.args[0], ast.Constant)}
    assert ("depends_on", "mpi") in calls and ("variant", "openmp") in calls
    tests = {f.name: ast.unparse(f) for f in cls.body if isinstance(f, ast.FunctionDef) and f.name.startswith("test_")}
    assert "test_list" in tests and any("'-n', '2'" in body for body in tests.values()), tests


def test_easyconfig_parses_and_names_what_it_installs():
    tree = ast.parse((ROOT / "packaging/easybuild/HMB-0.1.0-foss-2023a.eb").read_text())
    v = _assigned(tree)
    assert ast.literal_eval(v["name"]) == "HMB" and ast.literal_eval(v["version"]) == "0.1.0"
    assert ast.literal_eval(v["toolchain"]) == {"name": "foss", "version": "2023a"}
    assert ast.literal_eval(v["easyblock"]) == "CMakeMake"
    assert ast.literal_eval(v["toolchainopts"])["openmp"] is True
    assert "bin/hmb-bench" in ast.unparse(v["sanity_check_paths"]) and "libhmbprof" in ast.unparse(v["sanity_check_paths"])


# EasyBuild's constants an easyconfig may name, as EasyBuild's parser provides them.
_EB_CONSTANTS = {"SOURCE_TAR_GZ": "%(name)s-%(version)s.tar.gz", "SHLIB_EXT": "so",
                 "SYSTEM": {"name": "system", "version": "system"}, "EXTERNAL_MODULE": "EXTERNAL_MODULE"}
# What the package is, whatever builds it: the same in every easyconfig of HMB.
_EB_DESCRIPTION = ("easyblock", "name", "version", "homepage", "description", "sources", "sanity_check_paths",
                   "sanity_check_commands", "moduleclass")


def _easyconfig(name: str) -> dict:
    """An easyconfig's parameters (it is Python: evaluated with EasyBuild's constants)."""
    path = ROOT / "packaging" / "easybuild" / name
    params = dict(_EB_CONSTANTS)
    exec(compile(path.read_text(), str(path), "exec"), {}, params)
    return {k: v for k, v in params.items() if k not in _EB_CONSTANTS}


def test_easyconfigs_for_foss_and_system_describe_one_package():
    """The foss-2023a easyconfig (for sites with foss) and the SYSTEM one (a site's own compiler
    and MPI module; the one built here, tests/test_packaging.py) share one description: name,
    version, text, sources, what is installed and checked. They differ only in how it is built."""
    foss, system = _easyconfig("HMB-0.1.0-foss-2023a.eb"), _easyconfig("HMB-0.1.0.eb")
    for key in _EB_DESCRIPTION:
        assert foss[key] == system[key], f"{key} differs: {foss[key]!r} / {system[key]!r}"
    assert system["toolchain"] == _EB_CONSTANTS["SYSTEM"] and foss["toolchain"] == {"name": "foss", "version": "2023a"}
    # SYSTEM: the site's MPI is an external module (not built by EasyBuild), found through its mpicc
    (mpi,) = system["dependencies"]
    assert mpi[1] == "EXTERNAL_MODULE" and mpi[0].startswith("mpich/")
    assert "-DMPI_C_COMPILER=mpicc" in system["configopts"] and "-DMPI_C_COMPILER=" in foss["configopts"]
    # each names the files installed: hmb-bench and the PMPI profiler
    assert "bin/hmb-bench" in system["sanity_check_paths"]["files"]
    assert any("libhmbprof.so" in str(f) for f in system["sanity_check_paths"]["files"])


@pytest.mark.mpi   # two builds with the MPI compiler wrapper: 4-12 s of compiling, not for make test-fast
def test_two_processes_building_one_fresh_tree_both_succeed(tmp_path):
    """CI's clean clone: make test's two workers both found build/mpich missing and configured it
    at once; CMake broke ("CMAKE_C_COMPILER not set", then "No rule to make target 'Makefile'") and
    59 tests errored. Builds of a tree are serialised by a lock beside it (hmb.run.mpi.tree_lock): two
    processes started together on a fresh tree both end with the library built, and the one that
    waited finds the tree configured."""
    code = "from hmb.run import core; print(core.build_library(fresh=True))"
    env = {**os.environ, "HMB_BUILD_ROOT": str(tmp_path / "trees")}
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
        assert out.strip() == str(tmp_path / "trees" / "mpich" / "libhmbcore.so")
    assert (tmp_path / "trees" / "mpich" / "libhmbcore.so").is_file()
    assert (tmp_path / "trees" / ".mpich.lock").exists()
