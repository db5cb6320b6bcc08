#!/usr/bin/env python3
"""Cross-check hmb-bench p2p latency against a well-known ping-pong on the same MPI, interleaved.

References (independent, well-known):
  imb      Intel MPI Benchmarks' IMB-MPI1 PingPong, shipped in the Intel MPI wheel (PyPI
           impi-rt/impi-devel; `hmb build --mpi impi` installs it into .mpi/impi)
  netpipe  NetPIPE (Debian: netpipe-mpich2) on the system MPICH (hmb-bench built with
           `hmb build --mpi system`, MPICC=/usr/bin/mpicc.mpich)

    .venv/bin/python scripts/crosscheck_pingpong.py --ref imb --rounds 5

For each size the reference and hmb-bench run alternately, so both see the same machine. The
references report batch means (IMB: total time / 2 reps; NetPIPE: best over trials of a batch
mean / 2); hmb-bench reports the median and the mean of single round trips / 2. A batch mean
absorbs every interruption of a busy machine, so compare hmb's mean with the reference for
overhead, and run on a quiet machine.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from hmb.run import mpi as hmpi  # noqa: E402


def imb_us(impl: hmpi.MPI, env: dict, size: int) -> float:
    with tempfile.TemporaryDirectory() as d:
        lens = Path(d) / "lens"
        lens.write_text(f"{size}\n")
        iters = "20000" if size <= 4096 else "4000"
        out = subprocess.run(impl.launch_args(2) + [str(impl.prefix / "bin" / "IMB-MPI1"), "PingPong", "-msglen",
                             str(lens), "-iter", iters, "-iter_policy", "off", "-time", "600"],
                             check=True, capture_output=True, text=True, timeout=300, env=env).stdout
        row = re.search(rf"^\s+{size}\s+\d+\s+([0-9.]+)", out, re.M)
        return float(row.group(1))


def netpipe_us(impl: hmpi.MPI, env: dict, size: int) -> float:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "np.out"
        # A fixed repeat count: NetPIPE's own estimate for a lone size is a handful of repeats.
        repeats = "20000" if size <= 4096 else "2000"
        subprocess.run(impl.launch_args(2) + ["NPmpich2", "-n", repeats, "-l", str(size), "-u", str(size),
                       "-p", "0", "-o", str(out)], check=True, capture_output=True, text=True, timeout=300, env=env)
        return float(out.read_text().split()[2]) * 1e6  # bytes, Mbps, seconds (one-way)


def hmb_us(impl: hmpi.MPI, env: dict, size: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as d:
        js = Path(d) / "r.jsonl"
        subprocess.run(impl.launch_args(2) + [str(impl.bench), "p2p", "--mode", "latency", "--sizes", str(size),
                       "--iters", "4000", "--ci-target", "0", "--json", str(js)],
                       check=True, capture_output=True, text=True, timeout=300, env=env)
        rec = [json.loads(x) for x in js.read_text().splitlines() if '"result"' in x][0]
        m = rec["metrics"]["latency_us"]
        return m["median"], m["mean"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", choices=("imb", "netpipe"), default="imb")
    ap.add_argument("--sizes", default="8,1024,65536")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    try:
        if args.ref == "imb":
            impl = hmpi.find("impi")
        else:
            os.environ.setdefault("MPICC", "/usr/bin/mpicc.mpich")
            impl = hmpi.find("system")
            if not any((Path(p) / "NPmpich2").exists() for p in os.environ["PATH"].split(os.pathsep)):
                raise hmpi.MPIError("NPmpich2 not found (apt-get install netpipe-mpich2 libmpich-dev)")
        hmpi.build(impl)
    except hmpi.MPIError as e:
        print(f"crosscheck: {e}", file=sys.stderr)
        return 2
    env = impl.env()
    if impl.prefix is not None:  # IMB-MPI1 from the wheel finds its libmpi this way
        env["LD_LIBRARY_PATH"] = f"{impl.prefix / 'lib'}:{env.get('LD_LIBRARY_PATH', '')}"
    ref = imb_us if args.ref == "imb" else netpipe_us
    print(f"# {args.ref} vs hmb-bench p2p latency on {impl.name}; medians of {args.rounds} alternating rounds")
    print(f"{'size':>8} {args.ref + ' us':>10} {'hmb median':>11} {'hmb mean':>9} {'median/ref':>11} {'mean/ref':>9}")
    for size in (int(s) for s in args.sizes.split(",")):
        ref_runs, hmb_runs = [], []
        for _ in range(args.rounds):
            ref_runs.append(ref(impl, env, size))
            hmb_runs.append(hmb_us(impl, env, size))
        a = statistics.median(ref_runs)
        b = statistics.median(r[0] for r in hmb_runs)
        c = statistics.median(r[1] for r in hmb_runs)
        print(f"{size:>8} {a:>10.3f} {b:>11.3f} {c:>9.3f} {b / a:>11.3f} {c / a:>9.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
