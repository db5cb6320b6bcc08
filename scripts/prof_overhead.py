#!/usr/bin/env python3
"""Overhead of libhmbprof.so: the same hmb-bench launch unprofiled and profiled, paired, in rounds.

    .venv/bin/python scripts/prof_overhead.py --mpi mpich --rounds 7
    .venv/bin/python scripts/prof_overhead.py --mpi openmpi --rounds 7 --lib old=/tmp/old/libhmbprof.so

Every round runs each variant once ("none", "profiled" = build/MPI/libhmbprof.so, and each extra
--lib LABEL=PATH); the order rotates from round to round so no variant always runs first. Per
round and metric, ratio = variant's median / unprofiled median; the table gives, per variant,
the median of the rounds' ratios and their range (min-max). A latency or time ratio above 1 and
a rate ratio below 1 is a cost. Ratios only: absolute times on a shared machine are not the truth.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from hmb.run import mpi as hmpi  # noqa: E402

# name -> (hmb-bench arguments, metrics to compare)
CASES = {
    "stencil3d": (["stencil3d", "--sizes", "16K,256K", "--compute", "100us", "--iters", "300", "--ci-target", "0"],
                  ["t_overall_us", "t_comm_us"]),
    "p2p": (["p2p", "--mode", "latency,msgrate", "--sizes", "8,64K", "--budget", "0.3s", "--ci-target", "0"],
            ["latency_us", "msg_rate"]),
}


def launch(impl, args: list[str], preload: str | None, out: Path) -> list[dict]:
    out.unlink(missing_ok=True)
    env = impl.env()
    if preload:
        env = {**env, "LD_PRELOAD": preload, "HMB_PROF_OUT": str(out.with_suffix(".prof.json")),
               "HMB_PROF_QUIET": "1"}
    cmd = impl.launch_args(2) + [str(impl.build_dir / "hmb-bench")] + args + ["--json", str(out)]
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, timeout=600)
    return [r for r in map(json.loads, out.read_text().splitlines()) if r.get("type") == "result"]


def medians(records: list[dict], metrics: list[str]) -> dict:
    """(metric, size, mode) -> median, for the metrics a record has."""
    got = {}
    for r in records:
        for m in metrics:
            if m in r.get("metrics", {}):
                got[(m, r["params"]["size_bytes"], r["params"].get("mode", ""))] = r["metrics"][m]["median"]
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mpi", default="mpich")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--case", choices=sorted(CASES), action="append", help="default: all")
    ap.add_argument("--lib", action="append", default=[], metavar="LABEL=PATH", help="another profiler build to compare")
    a = ap.parse_args()
    impl = hmpi.find(a.mpi, install=False)
    variants = {"none": None, "profiled": str(impl.build_dir / "libhmbprof.so")}
    for spec in a.lib:
        label, _, path = spec.partition("=")
        if not path or not Path(path).exists():
            ap.error(f"--lib {spec}: expected LABEL=PATH of an existing library")
        variants[label] = path
    names = list(variants)
    tmp = Path(tempfile.mkdtemp(prefix="hmb-prof-overhead-"))
    for case in a.case or sorted(CASES):
        args, metrics = CASES[case]
        ratios = {}   # (variant, key) -> [per-round ratio]
        for k in range(a.rounds):
            order = names[k % len(names):] + names[:k % len(names)]
            got = {v: medians(launch(impl, args, variants[v], tmp / f"{v}.jsonl"), metrics) for v in order}
            for v in names[1:]:
                for key, base in got["none"].items():
                    if key in got[v] and base:
                        ratios.setdefault((v, key), []).append(got[v][key] / base)
            print(f"# {case} round {k + 1}/{a.rounds} done ({' '.join(order)})", file=sys.stderr)
        print(f"# {case}, {a.mpi}, 2 ranks, {a.rounds} rounds: hmb-bench {' '.join(args)}")
        print(f"{'variant':>10} {'metric':>14} {'mode':>8} {'size':>8} {'median ratio':>13} {'range':>15}")
        for (v, (m, size, mode)), rs in sorted(ratios.items()):
            print(f"{v:>10} {m:>14} {mode:>8} {size:>8} {statistics.median(rs):>13.3f} "
                  f"{min(rs):>7.3f}-{max(rs):<7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
