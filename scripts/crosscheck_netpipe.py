#!/usr/bin/env python3
"""Cross-check hmb-bench p2p latency against NetPIPE on the same MPI, interleaved.

NetPIPE (Debian: netpipe-mpich2, built against the system MPICH) is an independent, well-known
ping-pong. This script builds hmb-bench against that same system MPI (hmb build --mpi system,
MPICC=/usr/bin/mpicc.mpich), then alternates NetPIPE and hmb-bench runs for each size, so both
see the same machine conditions, and prints the median one-way latency of each and their ratio.

    apt-get install netpipe-mpich2 libmpich-dev
    .venv/bin/python scripts/crosscheck_netpipe.py --rounds 7

NetPIPE reports, per size, the best over its trials of (round-trip time averaged over a batch)/2;
hmb-bench reports the median (and mean) of single round trips / 2. Both are one-way latencies.
A batch average, like NetPIPE's, absorbs every interruption of a busy machine; run this on a
quiet machine.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def netpipe_us(npmpi: str, mpiexec: str, size: int) -> float:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "np.out"
        # A fixed repeat count: NetPIPE's own estimate for a lone size is a handful of repeats,
        # which on a noisy VM swings its answer by 2-3x.
        repeats = "20000" if size <= 4096 else "2000"
        subprocess.run([mpiexec, "-n", "2", "-bind-to", "core", npmpi, "-n", repeats, "-l", str(size),
                        "-u", str(size), "-p", "0", "-o", str(out)], check=True, capture_output=True, text=True, timeout=300)
        cols = out.read_text().split()
        return float(cols[2]) * 1e6  # bytes, Mbps, seconds (one-way)


def hmb_us(bench: Path, mpiexec: str, size: int) -> float:
    with tempfile.TemporaryDirectory() as d:
        js = Path(d) / "r.jsonl"
        subprocess.run([mpiexec, "-n", "2", "-bind-to", "core", str(bench), "p2p", "--mode", "latency",
                        "--sizes", str(size), "--iters", "2000", "--ci-target", "1", "--json", str(js)],
                       check=True, capture_output=True, text=True, timeout=300)
        rec = [json.loads(x) for x in js.read_text().splitlines() if '"result"' in x][0]
        m = rec["metrics"]["latency_us"]
        return m["median"], m["mean"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,1024,65536")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--netpipe", default="NPmpich2")
    ap.add_argument("--mpiexec", default="mpiexec.hydra")
    args = ap.parse_args()
    for tool in (args.netpipe, args.mpiexec):
        if not any((Path(p) / tool).exists() for p in os.environ["PATH"].split(os.pathsep)):
            print(f"crosscheck: {tool} not found (apt-get install netpipe-mpich2 libmpich-dev)", file=sys.stderr)
            return 2
    env = dict(os.environ, MPICC=os.environ.get("MPICC", "/usr/bin/mpicc.mpich"))
    subprocess.run([sys.executable, "-m", "hmb.cli", "build", "--mpi", "system"], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    bench = REPO / os.environ.get("HMB_BUILD_ROOT", "build") / "system" / "hmb-bench"
    print(f"{'size':>8} {'NetPIPE us':>11} {'hmb median':>11} {'hmb mean':>9} {'median/NP':>10} {'mean/NP':>8}"
          f"   (medians of {args.rounds} alternating rounds)")
    worst = 0.0
    for size in (int(s) for s in args.sizes.split(",")):
        np_runs, hmb_runs = [], []
        for _ in range(args.rounds):
            np_runs.append(netpipe_us(args.netpipe, args.mpiexec, size))
            hmb_runs.append(hmb_us(bench, args.mpiexec, size))
        a = statistics.median(np_runs)
        b = statistics.median(r[0] for r in hmb_runs)
        c = statistics.median(r[1] for r in hmb_runs)
        worst = max(worst, abs(b / a - 1))
        print(f"{size:>8} {a:>11.3f} {b:>11.3f} {c:>9.3f} {b / a:>10.3f} {c / a:>8.3f}")
    print(f"largest difference: {100 * worst:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
