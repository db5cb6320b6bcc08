"""The requirement table (python/hmb/run/requirements.py): which launches a point splits into,
with which library variables and layout, and the launch line each one gets.

Pure planning tests (no MPI), plus one real MPICH launch checking that the stream settings the
table chooses let `mt --mode stream` run at T = 2.
"""
from __future__ import annotations

import pytest

from conftest import TEST_MPIS, run_bench
from hmb.run import requirements
from hmb.run.mpi import MPI

ALL_MODES = "shared,comm,tag,stream,funneled,everywhere"


def by_value(launches, option: str) -> dict:
    """option value text (e.g. "shared,comm,tag") -> Launch; every value planned exactly once."""
    out = {ln.args[option]: ln for ln in launches}
    assert len(out) == len(launches)
    planned = [v for ln in launches for v in ln.args[option].split(",")]
    assert len(planned) == len(set(planned))
    return out


def test_async_impl_split_mpich_env_openmpi_none():
    args = {"op": "pt2pt", "progress": "none,test:10,impl,thread", "sizes": "4K"}
    mpich = by_value(requirements.plan("async", args, 2, 1, "mpich"), "progress")
    assert set(mpich) == {"impl", "none,test:10,thread"}       # "test:10" matches on the text before ':'
    assert mpich["impl"].env_added == {"MPIR_CVAR_ASYNC_PROGRESS": "1"}
    assert mpich["impl"].split == "progress=impl"
    assert mpich["none,test:10,thread"].env_added == {}
    for launch in mpich.values():                               # other options travel unchanged
        assert (launch.args["op"], launch.args["sizes"], launch.ranks, launch.threads) == ("pt2pt", "4K", 2, 1)
    impi = by_value(requirements.plan("async", args, 2, 1, "impi"), "progress")
    assert impi["impl"].env_added == {"I_MPI_ASYNC_PROGRESS": "1"}
    # Open MPI has no such variable: one launch; the benchmark itself reports impl unsupported.
    (ompi,) = requirements.plan("async", args, 2, 1, "openmpi")
    assert ompi.env_added == {} and ompi.args == args and ompi.split == ""


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_mt_stream_reserves_vcis_beside_the_default_one(threads):
    launches = by_value(requirements.plan("mt", {"test": "rate", "mode": ALL_MODES}, 2, threads, "mpich"), "mode")
    stream = launches["stream"]
    assert stream.env_added == {"MPIR_CVAR_CH4_RESERVE_VCIS": str(threads),
                                "MPIR_CVAR_CH4_NUM_VCIS": str(threads + 1)}
    assert (stream.ranks, stream.threads) == (2, threads)


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_mt_shared_comm_tag_share_a_launch_with_one_vci_per_thread(threads):
    mpich = by_value(requirements.plan("mt", {"test": "rate", "mode": ALL_MODES}, 2, threads, "mpich"), "mode")
    assert set(mpich) == {"shared,comm,tag", "stream", "funneled", "everywhere"}
    assert mpich["shared,comm,tag"].env_added == {"MPIR_CVAR_CH4_NUM_VCIS": str(threads)}
    assert mpich["funneled"].env_added == {} and mpich["funneled"].threads == threads
    assert mpich["shared,comm,tag"].split == "mode=shared,comm,tag"
    # Open MPI needs no variables: every threaded mode in one launch, everywhere apart (its layout).
    ompi = by_value(requirements.plan("mt", {"test": "rate", "mode": ALL_MODES}, 2, threads, "openmpi"), "mode")
    assert set(ompi) == {"shared,comm,tag,stream,funneled", "everywhere"}
    assert all(ln.env_added == {} for ln in ompi.values())


@pytest.mark.parametrize("flavor", ["mpich", "openmpi", "impi"])
@pytest.mark.parametrize("ranks,threads,expect_ranks", [(2, 1, 2), (2, 2, 4), (2, 4, 8), (4, 2, 8)])
def test_mt_everywhere_is_2T_single_threaded_ranks(flavor, ranks, threads, expect_ranks):
    launches = by_value(requirements.plan("mt", {"mode": "comm,everywhere"}, ranks, threads, flavor), "mode")
    ev = launches["everywhere"]
    assert (ev.ranks, ev.threads, ev.env_added) == (expect_ranks, 1, {})
    assert (launches["comm"].ranks, launches["comm"].threads) == (ranks, threads)


def test_unsplit_points_stay_one_launch():
    assert requirements.plan("p2p", {"mode": "latency"}, 2, 1, "mpich")[0].split == ""
    (only,) = requirements.plan("mt", {"mode": "funneled"}, 2, 2, "mpich")
    assert (only.args, only.env_added, only.split) == ({"mode": "funneled"}, {}, "")
    (comm,) = requirements.plan("mt", {"mode": "comm"}, 2, 2, "mpich")        # one group: no split label
    assert comm.env_added == {"MPIR_CVAR_CH4_NUM_VCIS": "2"} and comm.split == ""


def test_explain_names_every_rule(built_bench):
    text = requirements.explain()
    assert "MPIR_CVAR_CH4_RESERVE_VCIS=T MPIR_CVAR_CH4_NUM_VCIS=T+1" in text
    assert "MPIR_CVAR_ASYNC_PROGRESS=1" in text and "layout everywhere" in text


def test_everywhere_launch_line_oversubscribes_explicitly(monkeypatch):
    """On 2 cores, everywhere at T = 2 is 4 single-threaded ranks: Open MPI must be told
    --oversubscribe (and not bind), MPICH must not bind either; both fit at T = 1."""
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    ompi = MPI("openmpi", "openmpi", None, "mpicc", "mpiexec")
    mpich = MPI("mpich", "mpich", None, "mpicc", "mpiexec")
    for threads, over in ((1, False), (2, True), (4, True)):
        (ev,) = [ln for ln in requirements.plan("mt", {"mode": "comm,everywhere"}, 2, threads, "openmpi")
                 if ln.args["mode"] == "everywhere"]
        o = ompi.launch_args(ev.ranks, ev.threads)
        m = mpich.launch_args(ev.ranks, ev.threads)
        assert o[:3] == ["mpiexec", "-n", str(2 * threads)]
        assert ("--oversubscribe" in o) is over
        if over:
            assert o[o.index("--bind-to") + 1] == "none" and m[m.index("-bind-to") + 1] == "none"
        else:
            assert o[o.index("--bind-to") + 1] == "core" and m[m.index("-bind-to") + 1] == "core"


@pytest.mark.skipif("mpich" not in TEST_MPIS, reason="MPICH not under test")
def test_mpich_stream_runs_with_the_planned_settings(tmp_path):
    (stream,) = requirements.plan("mt", {"mode": "stream"}, 2, 2, "mpich")
    r = run_bench("mpich", ["mt", "--mode", "stream", "--threads", "2", "--iters", "3", "--warmup", "1",
                            "--ci-target", "0", "--window", "16", "--windows-per-iter", "2"],
                  threads=2, env=stream.env_added, tmp_path=tmp_path)
    assert r.rc == 0, r.stderr
    (res,) = r.results(status=None)
    assert res["status"] == "ok", res.get("reason")
    assert res["extra"]["streams"] == 2 and res["extra"]["reserve_vcis"] == 2 and res["extra"]["vcis"] == 3
    assert res["metrics"]["msg_rate"]["median"] > 0


def test_toolkit_runs_on_the_python_the_readme_promises():
    # README: Python >= 3.9. vermin finds the minimum version the code needs. tomllib (3.11+) is
    # excluded: vermin does not see sweep.py's fallback to tomli on older Pythons.
    import shutil
    import subprocess
    import sys
    from pathlib import Path
    vermin = shutil.which("vermin") or str(Path(sys.executable).parent / "vermin")
    if not Path(vermin).exists():
        pytest.skip("vermin is not installed (pip install -e '.[test]')")
    repo = Path(__file__).resolve().parents[1]
    r = subprocess.run([vermin, "-t=3.9-", "--no-tips", "--eval-annotations",
                        "--exclude", "tomllib", str(repo / "python" / "hmb")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_binary_being_linked_is_passed_over(tmp_path, monkeypatch):
    """The rules come from the newest hmb-bench that can run. A linker writes its output without
    the execute bits and adds them when done (GNU ld: unlink, create 0644, chmod 0755), so while
    `hmb build` or a test builds another library's hmb-bench, the newest file cannot run yet: it
    and one that cannot answer --list --json are passed over, the next one read. (CI failed on
    this once: "Permission denied" on build/openmpi/hmb-bench while it was being linked.)"""
    import os

    from hmb.data import descriptors

    listing = ('{"benchmarks": [{"name": "async", "options": [], "metrics": [], '
               '"rules": [{"option": "progress", "values": ["impl"], "env": {"mpich": {"V": "1"}}}]}]}')

    def bench(name: str, body: str, mode: int, age_s: int):
        exe = tmp_path / name / "hmb-bench"
        exe.parent.mkdir()
        exe.write_text("#!/bin/sh\n" + body + "\n")
        exe.chmod(mode)
        t = 1_000_000_000 - age_s
        os.utime(exe, (t, t))
        return exe

    good = bench("mpich", f"echo '{listing}'", 0o755, 30)
    broken = bench("impi", "echo 'no listing here' >&2; exit 3", 0o755, 20)
    bench("openmpi", "exit 0", 0o644, 10)                      # newest, mid-link
    monkeypatch.setenv("HMB_BUILD_ROOT", str(tmp_path))
    monkeypatch.setattr(requirements, "_rules", None)
    assert descriptors.local_binaries() == [broken, good]
    assert descriptors.local_loaded()[0] == good
    (rule,) = requirements.rules(build=False)
    assert (rule.bench, rule.option, rule.values) == ("async", "progress", ("impl",))
    broken.chmod(0o644)
    good.chmod(0o644)
    assert descriptors.local_binaries() == [] and descriptors.local_loaded() == (None, {})
