"""Writes the synthetic result files in tests/data (run again after a schema change).

  python tests/data/make_synthetic.py            (python tests/data/make_synthetic.py report: that file only)

report_small.jsonl: part/async/mt/p2p on two libraries, two repeats, noise none/uniform:4,
    early-bird planted on "Open MPI" from 64K on (P > 1, uniform noise), none on MPICH;
    async impl unsupported on Open MPI; one failed launch;
    mt on a 4-core node at T = 1, 2, 4 (T = 4 oversubscribed: 2 ranks x 4 threads, and everywhere's
    8 ranks), rate = MT_BASE · T^MT_GAIN[mode] and
    everywhere = MT_EVERYWHERE · T, so rate / everywhere = (MT_BASE / MT_EVERYWHERE) · T^(gain − 1);
    stream unsupported on Open MPI; the thread-safety pair (T = 1, shared) runs at
    MT_SAFETY[impl] of SINGLE's rate under MULTIPLE.
compare_a.jsonl / compare_b.jsonl: 10 p2p points with raw samples; in B, exactly the sizes
    in PLANTED are 30% slower, the rest is the same distribution drawn anew.
"""
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
PLANTED = (64, 4096, 65536)
KB = 1024
MT_BASE, MT_EVERYWHERE = 2.0e6, 2.2e6
MT_GAIN = {"shared": 0.6, "comm": 1.0, "tag": 0.9, "stream": 1.1, "funneled": 0.2}
MT_SAFETY = {"MPICH": 0.8, "Open MPI": 0.9}     # msg/s at MULTIPLE / at SINGLE, one thread
MT_CPUS = 4                                      # the planted node of the mt runs


def reseed(seed: int) -> None:
    """Each file draws from its own stream, so changing one file's data leaves the others."""
    global rng
    rng = np.random.default_rng(seed)


def summary(samples, unit, higher):
    s = np.sort(np.asarray(samples, dtype=float))
    n = s.size
    lo_i, hi_i = max(0, int(n / 2 - 1.96 * np.sqrt(n) / 2)), min(n - 1, int(np.ceil(n / 2 + 1.96 * np.sqrt(n) / 2)))
    return {"unit": unit, "median": float(np.median(s)), "ci_lo": float(s[lo_i]), "ci_hi": float(s[hi_i]),
            "ci_valid": n >= 6, "min": float(s[0]), "p95": float(np.percentile(s, 95)), "max": float(s[-1]),
            "mean": float(s.mean()), "stddev": float(s.std()), "count": int(n), "higher_is_better": higher}


class Writer:
    def __init__(self):
        self.lines = []
        self.runs = 0

    def run(self, bench, impl, library, ranks, threads, noise="none", oversubscribed=False, tag=None,
            thread_level="MULTIPLE", cpus=2):
        self.runs += 1
        run_id = f"synth-{self.runs:03d}"
        self.lines.append({
            "type": "run", "schema": 1, "run_id": run_id, "bench": bench, "hmb_version": "0.1.0",
            "git_revision": "abc1234def56", "compiler": "gcc 12.2", "cflags": "-O2", "argv": ["hmb-bench", bench],
            "tag": tag, "start_time": "2024-06-01T12:00:00Z",
            "mpi": {"library": library, "library_full": library, "impl": impl, "standard": "4.0"},
            "thread_level": {"requested": thread_level, "provided": thread_level}, "ranks": ranks,
            "hosts": ["node1"], "ranks_per_node": ranks, "threads": threads, "cpus_available": cpus,
            "oversubscribed": oversubscribed,
            "placement": [{"rank": r, "host": "node1", "cpuset": str(r), "thread_cpus": [r]} for r in range(ranks)],
            "env": {"OMP_NUM_THREADS": str(threads)}, "timer": {"clock": "CLOCK_MONOTONIC", "resolution_ns": 1, "overhead_ns": 20},
            "noise": {"model": noise, "thread": "fixed", "seed": 1}, "cache": {"mode": "hot", "llc_bytes": 33554432},
            "options": {"noise": noise}, "extra": {}})
        return run_id

    def result(self, run_id, bench, params, metrics, raw=True, status="ok", reason=None, extra=None):
        rec = {"type": "result", "schema": 1, "run_id": run_id, "bench": bench, "params": params,
               "status": status, "warmup": 2, "invalid": 0, "ci_target": 0.05}
        if status != "ok":
            rec["reason"] = reason
            rec["metrics"] = {}
        else:
            rec.update({"iterations": len(next(iter(metrics.values()))[0]), "ci_target_met": True,
                        "stop_reason": "ci", "elapsed_s": 0.2,
                        "metrics": {k: summary(v, u, h) for k, (v, u, h) in metrics.items()}})
            if raw:
                rec["samples"] = {k: [round(float(x), 6) for x in v] for k, (v, _, _) in metrics.items()}
        if extra:
            rec["extra"] = extra
        self.lines.append(rec)

    def save(self, name):
        with open(HERE / name, "w") as f:
            for rec in self.lines:
                f.write(json.dumps(rec) + "\n")


def noisy(value, rel=0.05, n=15):
    return value * (1 + rel * rng.standard_normal(n))


def part(w, impl, library, repeat):
    sizes = [4 * KB * 4 ** i for i in range(6)]     # 4K .. 4M
    for noise in ("none", "uniform:4"):
        run_id = w.run("part", impl, library, 2, 2, noise, tag=f"part-{impl}-{noise}-r{repeat}")
        for size in sizes:
            t_pt2pt = 2.0 + size / 5000.0
            for parts in (1, 2, 4):
                overhead = 1.0 + (0.0 if parts == 1 else 0.08 * parts * (64 * KB / size) ** 0.3)
                eb = 0.0
                if impl == "Open MPI" and parts > 1 and noise != "none" and size >= 64 * KB:
                    eb = min(0.8, 0.2 + 0.06 * np.log2(size / (64 * KB)) + 0.03 * parts)
                avail = 0.1 + 0.5 * eb - 0.05 * (parts > 1 and impl == "MPICH")
                bw = size / (t_pt2pt * overhead / parts) if parts > 1 else size / t_pt2pt
                metrics = {
                    "overhead": (noisy(overhead, 0.03), "ratio", False),
                    "overhead_persistent": (noisy(overhead * 1.05, 0.03), "ratio", False),
                    "t_part_us": (noisy(t_pt2pt * overhead), "us", False),
                    "t_pt2pt_us": (noisy(t_pt2pt), "us", False),
                    "perceived_bw_MBps": (noisy(bw), "MB/s", True),
                    "availability": (noisy(1.0, 0.02) * avail, "ratio", True),
                    # bytes first seen by MPI_Parrived by the join: only where planted (Open MPI)
                    "early_bird": (np.clip(noisy(max(eb, 1e-9), 0.1), 0, 1) if eb else np.zeros(15), "ratio", True),
                    "t_after_join_us": (noisy(t_pt2pt * (1 - avail)), "us", False),
                }
                w.result(run_id, "part", {"size_bytes": size, "partitions": parts, "threads": 2}, metrics,
                         raw=repeat == 0)


def async_(w, impl, library, repeat):
    run_id = w.run("async", impl, library, 2, 1, tag=f"async-{impl}-r{repeat}")
    for size in (32, 1 * KB, 32 * KB, 1024 * KB):
        t_sync = 1.0 + size / 4000.0
        for progress, e in (("none", 5.0), ("test:10", 60.0), ("thread", 85.0), ("impl", 75.0)):
            params = {"size_bytes": size, "op": "pt2pt", "progress": progress, "threads": 1}
            if progress == "impl" and impl == "Open MPI":
                w.result(run_id, "async", params, {}, status="unsupported",
                         reason="Open MPI has no asynchronous progress thread")
                continue
            e_here = e if size > KB else e * 0.3
            t_over = t_sync * (1 - e_here / 100)
            w.result(run_id, "async", params, {
                "t_total_us": (noisy(1000 + t_over), "us", False),
                "T_sync_us": (noisy(t_sync), "us", False),
                "efficiency_pct": (noisy(e_here, 0.04), "%", True)}, raw=False)


def mt_extra(impl, mode, threads, processes=1, level="MULTIPLE"):
    """The resource columns hmb-bench records (rank 0's view; Open MPI exposes no VCIs)."""
    mpich = impl == "MPICH"
    vcis = (threads + 1 if mode == "stream" else threads if mode in ("shared", "comm", "tag") else 1) if mpich else None
    extra = {"mode": mode, "threads": threads, "lanes": threads, "pairs": processes, "thread_level_provided": level,
             "vcis": vcis, "reserve_vcis": (threads if mode == "stream" else 0) if mpich else None,
             "streams": threads if mode == "stream" else 0,
             "communicators": 1 + (threads if mode in ("comm", "stream") else 0) + (mode == "everywhere"),
             "rma_windows": 0, "vmrss_kib": 20480 + (8192 * threads if mode == "stream" else 512 * threads)}
    extra["vmhwm_kib"] = extra["vmrss_kib"]
    if mode == "everywhere":
        extra["everywhere_processes"] = processes
    return extra


def mt(w, impl, library, repeat):
    for threads in (1, 2, 4):
        over = threads * 2 > MT_CPUS
        slow = 1.5 if over else 1.0
        run_id = w.run("mt", impl, library, 2, threads, oversubscribed=over, tag=f"mt-{impl}-{threads}-r{repeat}",
                       cpus=MT_CPUS)
        for mode, gain in MT_GAIN.items():
            params = {"size_bytes": 8, "test": "rate", "mode": mode, "threads": threads}
            if mode == "stream" and impl == "Open MPI":
                w.result(run_id, "mt", params, {}, status="unsupported", reason="MPIX streams are MPICH-only")
                continue
            rate = MT_BASE * threads ** gain / slow
            w.result(run_id, "mt", params, {"msg_rate": (noisy(rate), "msg/s", True)}, raw=False,
                     extra=mt_extra(impl, mode, threads))
        run_id = w.run("mt", impl, library, 2 * threads, 1, oversubscribed=over, tag=f"mt-ev-{impl}-{threads}-r{repeat}",
                       cpus=MT_CPUS)
        w.result(run_id, "mt", {"size_bytes": 8, "test": "rate", "mode": "everywhere", "threads": 1},
                 {"msg_rate": (noisy(MT_EVERYWHERE * threads / slow), "msg/s", True)}, raw=False,
                 extra=mt_extra(impl, "everywhere", 1, processes=threads))
    # Cost of thread safety: one thread at SINGLE (MULTIPLE is the T = 1 shared point above).
    run_id = w.run("mt", impl, library, 2, 1, tag=f"mt-single-{impl}-r{repeat}", thread_level="SINGLE", cpus=MT_CPUS)
    w.result(run_id, "mt", {"size_bytes": 8, "test": "rate", "mode": "shared", "threads": 1},
             {"msg_rate": (noisy(MT_BASE / MT_SAFETY[impl]), "msg/s", True)}, raw=False,
             extra=mt_extra(impl, "shared", 1, level="SINGLE"))


def p2p(w, impl, library, repeat):
    run_id = w.run("p2p", impl, library, 2, 1, tag=f"p2p-{impl}-r{repeat}")
    for size in [8 * 4 ** i for i in range(7)]:
        base = 0.4 if impl == "MPICH" else 0.3
        w.result(run_id, "p2p", {"size_bytes": size, "mode": "latency", "threads": 1},
                 {"latency_us": (noisy(base + size / 8000), "us", False)}, raw=False)
        for mode, f in (("bw", 1.0), ("bibw", 1.7)):
            w.result(run_id, "p2p", {"size_bytes": size, "mode": mode, "threads": 1},
                     {"bandwidth_MBps": (noisy(f * size / (base + size / 9000)), "MB/s", True)}, raw=False)


def report_file():
    reseed(20240601)
    w = Writer()
    for impl, library in (("MPICH", "MPICH Version: 5.0.2"), ("Open MPI", "Open MPI v5.0.11")):
        for repeat in (0, 1):
            part(w, impl, library, repeat)
            async_(w, impl, library, repeat)
            mt(w, impl, library, repeat)
            if repeat == 0:
                p2p(w, impl, library, repeat)
    w.lines.append({"type": "launch", "schema": 1, "tag": "mt-bad-r0", "rc": 3, "status": "failed", "mpi": "openmpi",
                    "point": {"bench": "mt", "mpi": "openmpi", "ranks": 2, "threads": 8, "args": {}, "repeat": 0},
                    "env_added": {}, "command": ["mpiexec", "-n", "2", "hmb-bench", "mt"], "elapsed_s": 1.0})
    w.save("report_small.jsonl")


def compare_files():
    reseed(20240602)
    sizes = [8, 64, 512, 1024, 4096, 8192, 16384, 65536, 262144, 1048576]
    truth = {s: 0.5 + s / 5000 for s in sizes}
    for name, slow in (("compare_a.jsonl", False), ("compare_b.jsonl", True)):
        w = Writer()
        run_id = w.run("p2p", "MPICH", "MPICH Version: 5.0.2", 2, 1, tag=None)
        for s in sizes:
            v = truth[s] * (1.3 if slow and s in PLANTED else 1.0)
            samples = v * np.exp(0.05 * rng.standard_normal(60))   # 5% log-normal noise
            w.result(run_id, "p2p", {"size_bytes": s, "mode": "latency", "threads": 1},
                     {"latency_us": (samples, "us", False)})
        if slow:  # a point only in B
            w.result(run_id, "p2p", {"size_bytes": 4194304, "mode": "latency", "threads": 1},
                     {"latency_us": (noisy(900.0, n=60), "us", False)})
        w.save(name)


if __name__ == "__main__":
    report_file() if sys.argv[1:] == ["report"] else (report_file(), compare_files())
