#!/usr/bin/env python3
"""Cross-check hmb-bench p2p against the OSU micro-benchmarks on the same MPI, in alternating rounds.

    .venv/bin/python scripts/crosscheck_osu.py --mpi mpich --rounds 7 /tmp/osu-mpich/c/mpi/pt2pt/standard
    .venv/bin/python scripts/crosscheck_osu.py --mpi openmpi --rounds 7 /tmp/osu-openmpi/c/mpi/pt2pt/standard

The positional argument is a directory holding OSU's osu_latency, osu_bw and osu_mbw_mr (OSU 7.x,
built OUTSIDE the repository with the same MPI's mpicc: configure CC=<mpicc> CXX=<mpicxx>, then
`make -C c/mpi/pt2pt/standard`). Without it, --osu-src (a git directory or an unpacked source tree)
is built under --workdir. OSU code is never copied into the repository.

Each round runs every OSU program and the matching hmb-bench p2p launches, in an order that flips
between rounds so neither tool always runs first (with several --variant, each variant is one more
hmb-bench launch per round, and the order rotates over all of them); both are bound to cores the same way
(python/hmb/run/mpi.py: `-bind-to core` / `--bind-to core`). OSU reports batch means (total time over
its iterations); hmb-bench reports the median of per-sample values (a latency sample is a batch of
back-to-back round trips when one round trip is short). The table shows, per metric and size, the
median over rounds of each tool's figure, their ratio HMB/OSU, and the spread (min-max) of the
per-round ratios. Quote ratios, measured on a quiet machine; absolute numbers on a shared VM are
not the truth.

    .venv/bin/python scripts/crosscheck_osu.py --mpi openmpi --rounds 5 --lat-sizes 8 --bw-sizes 8,64,512,4K,64K \
        --variant racing="--post racing" --variant ahead="--post ahead" /tmp/osu-openmpi/c/mpi/pt2pt/standard

compares two ways of posting a window's receives (hmb-bench p2p --post) against osu_bw in the
same alternating rounds.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from hmb.run import launch as hlaunch  # noqa: E402
from hmb.run import mpi as hmpi  # noqa: E402

# metric -> (OSU program, its output column after the size, hmb-bench mode, hmb metric)
METRICS = {
    "latency_us": ("osu_latency", 0, "latency", "latency_us"),
    "bandwidth_MBps": ("osu_bw", 0, "bw", "bandwidth_MBps"),
    "msg_rate": ("osu_mbw_mr", 1, "msgrate", "msg_rate"),
}
# --osu-stat p50: OSU 7.x's -z adds per-iteration percentiles after the mean columns; the P50
# column after the size per program (osu_mbw_mr's is MB/s: messages/s = MB/s * 1e6 / size)
P50_COLUMN = {"osu_latency": 1, "osu_bw": 1, "osu_mbw_mr": 2}


def parse_sizes(text: str) -> list[int]:
    units = {"": 1, "K": 1 << 10, "M": 1 << 20}
    out = []
    for item in text.split(","):
        m = re.fullmatch(r"(\d+)([KM]?)", item.strip().upper())
        if not m:
            raise SystemExit(f"crosscheck: bad size {item!r} (use 8, 64K, 1M)")
        out.append(int(m.group(1)) * units[m.group(2)])
    return out


def build_osu(impl: hmpi.MPI, src: Path, workdir: Path) -> Path:
    """Configure and build OSU's point-to-point programs under workdir; returns their directory."""
    stamp = workdir / ".built-with"
    for pt2pt in (workdir / "c" / "mpi" / "pt2pt" / "standard", workdir / "mpi" / "pt2pt"):  # OSU 7.x, 5.x
        if stamp.exists() and stamp.read_text() == impl.mpicc and all((pt2pt / p).exists() for p, *_ in METRICS.values()):
            return pt2pt
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    if (src / "HEAD").exists() or (src / ".git").exists():  # a git directory (bare mirror or checkout)
        git_dir = src if (src / "HEAD").exists() else src / ".git"
        archive = subprocess.run(["git", f"--git-dir={git_dir}", "archive", "HEAD"], check=True, capture_output=True)
        subprocess.run(["tar", "x", "-C", str(workdir)], input=archive.stdout, check=True)
    else:
        shutil.copytree(src, workdir, dirs_exist_ok=True)
    env = impl.env()
    mpicxx = str(Path(impl.mpicc).with_name("mpicxx"))
    log = workdir / "build.log"
    with log.open("w") as out:
        sub = "c/mpi/pt2pt/standard" if (workdir / "c").is_dir() else "mpi/pt2pt"  # OSU 7.x or 5.x layout
        pt2pt = workdir / sub
        for cmd in (["./configure", f"CC={impl.mpicc}", f"CXX={mpicxx}"], ["make", "-C", sub]):
            if subprocess.run(cmd, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT).returncode != 0:
                raise hmpi.MPIError(f"building OSU failed ({' '.join(cmd[:1])}); see {log}")
    stamp.write_text(impl.mpicc)
    return pt2pt


def run_osu(impl: hmpi.MPI, env: dict, program: Path, column: int, sizes: list[int], p50: bool) -> dict[int, float]:
    """size -> value of the given column of an OSU table (sizes from the smallest to the largest
    asked, one launch); with p50 the median over OSU's iterations (-z) instead of its mean."""
    cmd = impl.launch_args(2) + [str(program), "-m", f"{min(sizes)}:{max(sizes)}"] + (["-z"] if p50 else [])
    if p50:
        column = P50_COLUMN[program.name]
    with hlaunch.machine_lock(" ".join(cmd)):   # one launch at a time with every other hmb launch
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600, env=env).stdout
    values = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) > column + 1 and fields[0].isdigit():
            values[int(fields[0])] = float(fields[column + 1])
            if p50 and program.name == "osu_mbw_mr":
                values[int(fields[0])] *= 1e6 / int(fields[0])
    return values


def run_hmb(impl: hmpi.MPI, env: dict, mode: str, metric: str, sizes: list[int], extra: list[str]) -> dict:
    """size -> (median of the metric, batch or slot count) from one hmb-bench p2p launch, and
    "library" -> the MPI library line of its run header."""
    with tempfile.TemporaryDirectory() as d:
        js = Path(d) / "r.jsonl"
        cmd = impl.launch_args(2) + [str(impl.bench), "p2p", "--mode", mode, "--sizes", ",".join(map(str, sizes)),
                                     "--json", str(js)] + extra
        with hlaunch.machine_lock(" ".join(cmd)):
            subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=900, env=env)
        out = {}
        for line in js.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("type") == "run":
                out["library"] = rec["mpi"]["library"]
            elif rec.get("type") == "result" and rec.get("status") == "ok":
                ext = rec.get("extra", {})
                out[rec["params"]["size_bytes"]] = (rec["metrics"][metric]["median"],
                                                    ext.get("batch", ext.get("slots")))
        return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mpi", default="mpich", help="mpich | openmpi | impi | system (default mpich)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("osu_dir", nargs="?", type=Path, default=None,
                    help="directory of built OSU pt2pt programs (osu_latency, osu_bw, osu_mbw_mr)")
    ap.add_argument("--lat-sizes", default="8,64,512,4K,8K,16K,64K,256K,1M,4M",
                    help="latency sizes (default 8 B-4 MB)")
    ap.add_argument("--bw-sizes", default="8,512,4K,64K,256K,1M,4M", help="bandwidth sizes (default 8 B-4 MB)")
    ap.add_argument("--rate-sizes", default="8", help="message-rate sizes (default 8)")
    ap.add_argument("--osu-src", type=Path, default=None,
                    help="OSU source to build when no OSU directory is given: git directory or source tree")
    ap.add_argument("--workdir", type=Path, default=None, help="OSU build directory (default /tmp/hmb-osu-<mpi>)")
    ap.add_argument("--osu-stat", choices=("mean", "p50"), default="mean",
                    help="OSU's figure: its mean over the timed loop (what it prints by default), or the median "
                         "of its per-iteration values (OSU 7.x -z), which a loaded machine's preemptions "
                         "move far less (osu_bw 8 B here: mean 1.6 MB/s, P50 11.9 MB/s in one launch)")
    ap.add_argument("--hmb-args", default="", help="extra hmb-bench options, e.g. \"--data fresh\"")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=ARGS",
                    help="an hmb-bench variant with its own options (after --hmb-args), repeatable: each is "
                         "launched in every round and gets its own rows, e.g. ahead=\"--post ahead\"")
    args = ap.parse_args()
    if args.rounds < 1:
        print("crosscheck: --rounds must be at least 1", file=sys.stderr)
        return 2
    sizes = {"latency_us": parse_sizes(args.lat_sizes), "bandwidth_MBps": parse_sizes(args.bw_sizes),
             "msg_rate": parse_sizes(args.rate_sizes)}
    workdir = args.workdir or Path(tempfile.gettempdir()) / f"hmb-osu-{args.mpi}"
    try:
        if Path(hmpi.REPO) in workdir.resolve().parents:
            raise hmpi.MPIError(f"--workdir {workdir} is inside the repository; OSU is built outside it")
        impl = hmpi.find(args.mpi)
        hmpi.build(impl)
        if args.osu_dir is not None:
            missing = [p for p, *_ in METRICS.values() if not (args.osu_dir / p).is_file()]
            if missing:
                raise hmpi.MPIError(f"{args.osu_dir} has no {', '.join(missing)} (build OSU's c/mpi/pt2pt/standard)")
            osu_dir = args.osu_dir
        elif args.osu_src is not None:
            osu_dir = build_osu(impl, args.osu_src, workdir)
        else:
            raise hmpi.MPIError("give the directory of built OSU pt2pt programs (or --osu-src to build one)")
    except (hmpi.MPIError, subprocess.CalledProcessError, OSError) as e:
        print(f"crosscheck: {e}", file=sys.stderr)
        return 2
    env = impl.env()
    if impl.prefix is not None:  # OSU built with a wheel's mpicc finds that wheel's libmpi this way
        env["LD_LIBRARY_PATH"] = f"{impl.prefix / 'lib'}:{env.get('LD_LIBRARY_PATH', '')}"
    variants = {"hmb": []}
    for item in args.variant:
        name, eq, extra = item.partition("=")
        if not eq or not name:
            print(f"crosscheck: --variant {item!r}: give NAME=ARGS", file=sys.stderr)
            return 2
        variants[name] = extra.split()
    if args.variant:
        del variants["hmb"]
    hmb_extra = args.hmb_args.split()

    osu_runs = {m: [] for m in METRICS}   # metric -> per round {size: value}
    hmb_runs = {v: {m: [] for m in METRICS} for v in variants}  # variant -> metric -> per round {size: ...}
    tools = ["osu"] + list(variants)
    for rnd in range(args.rounds):
        order = tools[rnd % len(tools):] + tools[:rnd % len(tools)]   # rotate: no tool always first
        if rnd % 2:
            order.reverse()
        for metric, (program, column, mode, hmb_metric) in METRICS.items():
            for tool in order:
                if tool == "osu":
                    osu_runs[metric].append(run_osu(impl, env, osu_dir / program, column, sizes[metric],
                                                    args.osu_stat == "p50"))
                else:
                    hmb_runs[tool][metric].append(run_hmb(impl, env, mode, hmb_metric, sizes[metric],
                                                          hmb_extra + variants[tool]))
        print(f"# round {rnd + 1}/{args.rounds} done", file=sys.stderr, flush=True)

    first = next(iter(variants))
    library = " ".join(hmb_runs[first]["latency_us"][0]["library"].split())
    print(f"# OSU ({args.osu_dir or args.osu_src}) vs hmb-bench p2p on {impl.name} ({library})")
    print(f"# {args.rounds} alternating rounds; figures are medians over rounds; spread = min-max of "
          f"per-round HMB/OSU; OSU's {'median over its iterations (-z P50)' if args.osu_stat == 'p50' else 'mean'}; "
          f"hmb options: {args.hmb_args or '(defaults)'}"
          + "".join(f"; {v}: {' '.join(a) or '(none)'}" for v, a in variants.items() if args.variant))
    print(f"{'metric':<15} {'size':>8} {'variant':>10} {'OSU':>11} {'HMB':>11} {'HMB/OSU':>8} {'spread':>13} "
          f"{'batch/slots':>11}")
    for metric in METRICS:
        for size in sizes[metric]:
            for variant in variants:
                osu = [r.get(size) for r in osu_runs[metric]]
                hmb = [r.get(size) for r in hmb_runs[variant][metric]]
                pairs = [(h, o) for h, o in zip(hmb, osu) if h is not None and o is not None]
                if not pairs:
                    print(f"{metric:<15} {size:>8} {variant:>10} {'(missing)':>11}")
                    continue
                ratios = [h[0] / o for h, o in pairs]
                a, b = statistics.median(o for _, o in pairs), statistics.median(h[0] for h, _ in pairs)
                counts = sorted({h[1] for h, _ in pairs})
                print(f"{metric:<15} {size:>8} {variant:>10} {a:>11.4g} {b:>11.4g} {b / a:>8.3f} "
                      f"{min(ratios):>6.3f}-{max(ratios):<6.3f} {'/'.join(map(str, counts)):>11}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
