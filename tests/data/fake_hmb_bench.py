"""A stand-in for hmb-bench used through HMB_BENCH_OVERRIDE in the toolkit tests.

Writes schema-1 records (a run header carrying HMB_TAG, then one result per size, each
flushed) to --json FILE, sleeping FAKE_SLEEP_S between points so a test can kill a sweep
mid-launch. Appends "start TAG" / "end TAG" to $FAKE_LOG. `--list --json` describes the benchmarks
in $FAKE_BENCHES (default: p2p part async mt). $FAKE_FAIL_TAG_SUBSTR makes matching
launches exit 2 ($FAKE_FAIL_AS_HYDRA_KILL: print a rank's MPI_Abort(3) as hydra does, and exit 9;
$FAKE_FAIL_STDERR: print that instead of the planted failure, e.g. what srun says).
$FAKE_MACHINE_TAG_SUBSTR makes the first launch of matching tags fail as the machine does
($FAKE_MACHINE: "srun", a step refused before anything ran, exit 1; "daemon", Open MPI's mpiexec
returning 0 after "A daemon failed to report back" with 1 point of the plan's; "watchdog", exit 4
after one point; "hang", no end until the sweep's timeout); a tag's later launches run normally. A write that fails (a full disk,
RLIMIT_FSIZE) is handled as hmb-bench handles it: the half-written line cut off, one line naming
the file, exit 1.
"""
import json
import os
import sys
import time


def opts(argv):
    out, i = {}, 0
    while i < len(argv):
        if argv[i].startswith("--"):
            if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                out[argv[i][2:]] = argv[i + 1]
                i += 1
            else:
                out[argv[i][2:]] = True
        i += 1
    return out


def size_list(text):
    """'8,64K' and ranges '8:64K[:x4]' (endpoints only; good enough for a stand-in)."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    out = []
    for item in text.split(","):
        for part in item.split(":")[:2]:
            part = part.strip().upper()
            out.append(int(part[:-1]) * units[part[-1]] if part[-1] in units else int(part))
    return out


def log(line):
    path = os.environ.get("FAKE_LOG")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def emit(path, rec):
    good = os.path.getsize(path) if os.path.exists(path) else 0
    try:
        with open(path, "a") as f:
            f.write(json.dumps(rec) + "\n")
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        try:
            os.truncate(path, good)
        except OSError:
            pass
        print(f"hmb-bench: cannot write results to '{path}': {e.strerror}", file=sys.stderr)
        sys.exit(1)


def first_start(tag):
    """Whether this is the first launch of the tag ($FAKE_LOG's start lines)."""
    path = os.environ.get("FAKE_LOG")
    if not path or not os.path.exists(path):
        return True
    with open(path) as f:
        return sum(1 for line in f if line.split() == ["start", str(tag)]) <= 1


def launch_scale():
    """$FAKE_VARY: launch k (counted in $FAKE_LOG) reads 1 + 0.1 k times the base value, so
    repeated launches differ by a known amount."""
    if not os.environ.get("FAKE_VARY") or not os.environ.get("FAKE_LOG"):
        return 1.0
    with open(os.environ["FAKE_LOG"]) as f:
        starts = sum(1 for line in f if line.startswith("start"))
    return 1.0 + 0.1 * (starts - 1)


def main():
    if sys.argv[1:] == ["--list", "--json"]:
        names = os.environ.get("FAKE_BENCHES", "p2p part async mt").split()
        print(json.dumps({"schema_version": 1, "benchmarks": [
            {"name": n, "group": "fake", "summary": "stand-in", "min_ranks": 2,
             "options": [{"name": "iters", "type": "int", "default": "20", "role": "run-control"},
                         {"name": "json", "type": "string", "default": None, "role": "run-control"},
                         {"name": "raw", "type": "flag", "default": None, "role": "run-control"},
                         {"name": "threads", "type": "int", "default": "1", "role": "parameter",
                          "range": [1, 256]}]
             # what the tests' configs pass (sweep checks every launch's options before the first)
             + [{"name": k, "type": "string", "default": None, "role": "parameter"}
                for k in ("sizes", "mode", "op", "progress", "partitions", "compute", "noise", "budget",
                          "test", "window")],
             "metrics": [{"name": "latency_us", "unit": "us", "higher_is_better": False, "in_table": True}]}
            for n in names]}))
        return 0
    bench, o = sys.argv[1], opts(sys.argv[2:])
    tag = os.environ.get("HMB_TAG")
    log(f"start {tag}")
    if os.environ.get("FAKE_FAIL_TAG_SUBSTR") and os.environ["FAKE_FAIL_TAG_SUBSTR"] in (tag or ""):
        if os.environ.get("FAKE_FAIL_AS_HYDRA_KILL"):    # a rank's MPI_Abort(3), hydra returning 9
            print("hmb-bench: validation failed: bench=p2p size=8 iteration=2 rank=1: planted\n"
                  "Abort(3) on node 1 (rank 1 in comm 496): application called MPI_Abort(comm=0x84000001, 3) - "
                  "process 1", file=sys.stderr)
            log(f"end {tag}")
            return 9
        print(os.environ.get("FAKE_FAIL_STDERR", "hmb-bench fake: --sizes: planted failure"), file=sys.stderr)
        log(f"end {tag}")
        return 2
    machine = os.environ.get("FAKE_MACHINE", "") if os.environ.get("FAKE_MACHINE_TAG_SUBSTR") and \
        os.environ["FAKE_MACHINE_TAG_SUBSTR"] in (tag or "") and first_start(tag) else ""
    if machine == "srun":
        print("srun: error: Unable to create step for job 4242: Job/step already completing or completed",
              file=sys.stderr)
        log(f"end {tag}")
        return 1
    run_id = f"fake-{os.getpid()}-{time.time_ns()}"
    jpath = o.get("json")
    threads = int(o.get("threads", 1))
    common = {"schema": 1, "run_id": run_id, "bench": bench}
    sizes = size_list(str(o.get("sizes", "8")))
    if jpath:
        emit(jpath, {"type": "run", **common, "tag": tag, "argv": sys.argv, "ranks": 2,
                     "threads": threads, "hosts": ["fakehost"], "oversubscribed": False,
                     "mpi": {"library": "FakeMPI 1.0", "impl": "FakeMPI", "standard": "4.0"},
                     "noise": {"model": o.get("noise", "none"), "thread": "fixed", "seed": 1},
                     "git_revision": "0000000", "env": {k: v for k, v in os.environ.items()
                                                        if k.startswith(("OMP_", "HMB_", "MPIR_CVAR_"))}})
        emit(jpath, {"type": "plan", **common, "points": len(sizes)})
    sleep_s = float(os.environ.get("FAKE_SLEEP_S", "0"))
    if machine in ("daemon", "watchdog"):
        sizes = sizes[:1]
    if machine == "hang":
        time.sleep(600)
    for size in sizes:
        time.sleep(sleep_s)
        value = (1.0 + int(size) / 1000.0) * launch_scale()
        if jpath:
            emit(jpath, {"type": "result", **common, "params": {"size_bytes": int(size), "threads": threads},
                         "status": "ok", "warmup": 1, "iterations": 3, "invalid": 0,
                         "metrics": {"latency_us": {"unit": "us", "median": value, "ci_lo": value * 0.9,
                                                    "ci_hi": value * 1.1, "ci_valid": True, "count": 3,
                                                    "higher_is_better": False}},
                         "samples": {"latency_us": [value * 0.95, value, value * 1.05]}})
        print(f"{size:>8} {value:.2f}", flush=True)
    log(f"end {tag}")
    if machine == "daemon":
        print("--------------------------------------------------------------------------\n"
              "A daemon failed to report back that it was alive. This could be caused by a\n"
              "node failure.\n"
              "--------------------------------------------------------------------------", file=sys.stderr)
    if machine == "watchdog":
        print(f"hmb-bench: watchdog: {bench} size=64 rank 1 phase iterate did not finish in 1s", file=sys.stderr)
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
