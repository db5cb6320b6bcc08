"""docs/contributing.md, walked: each C recipe (a benchmark, a mode, a metric) applied to a
temporary copy of the source, built there, and the new thing found in `--describe` and in the
output of a run. Nothing here edits the repository."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import get_mpi, mpi_run

REPO = Path(__file__).resolve().parents[1]

# Add a benchmark (and a metric of it): one new folder, split by role (its header, the pattern with
# its metrics and descriptor, the set-up, the verification), its options, a point parameter, two
# metrics.
TOY_BENCH = {
    "toy.h": r"""
#ifndef TOY_H
#define TOY_H
#include "hmb/bench.h"

#define TOY_OPTIONS(X) \
    X(window, INT, .default_value = "4", .min = 1, .max = 64, .help = "messages per iteration")
HMB_OPTIONS(toy_opts, TOY_OPTIONS);

#define TOY_PARAMS(X) X(window, INT)
HMB_POINT_PARAMS(toy_point, TOY_PARAMS);

typedef struct { unsigned char *send, *recv; int window; } toy_state;

void toy_points(hmb_ctx *ctx, hmb_point_list *out);               /* setup.c */
void *toy_setup(hmb_ctx *ctx, const hmb_point *pt);
void toy_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt);
void toy_register_checks(hmb_ctx *ctx, toy_state *st, size_t bytes); /* verify.c */
#endif
""",
    "pattern.c": r"""
#include "toy.h"

enum { M_ROUND_TRIP, M_TOY_RATE };
static const hmb_metric toy_metrics[] = {
    [M_ROUND_TRIP] = {.name = "round_trip_us", .unit = "us", .in_table = 1, .description = "a window's round trip"},
    [M_TOY_RATE] = {.name = "toy_rate", .unit = "msg/s", .higher_is_better = 1, .in_table = 1,
                    .description = "messages per second (the metric the recipe adds)"},
    HMB_METRIC_END};

static int toy_iterate(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter, hmb_sample *out)
{
    toy_state *st = state;
    int peer = hmb_rank(ctx) ^ 1, n = (int)pt->size_bytes;
    double t0 = hmb_now();
    for (int k = 0; k < st->window; k++)
        MPI_Sendrecv(st->send, n, MPI_BYTE, peer, 0, st->recv, n, MPI_BYTE, peer, 0, hmb_comm(ctx), MPI_STATUS_IGNORE);
    double t = hmb_now() - t0;
    hmb_record_at(ctx, out, M_ROUND_TRIP, t / st->window * 1e6);
    hmb_record_at(ctx, out, M_TOY_RATE, st->window / t);
    return 0;
}

static const hmb_bench toy_bench = {
    .name = "toy", .group = "baseline", .summary = "the contributing guide's toy",
    HMB_BENCH_OPTIONS(toy_opts), HMB_BENCH_PARAMS(toy_point),
    .defaults = (const hmb_default[]){{"sizes", "8"}, {NULL, NULL}},
    .metrics = toy_metrics, .thread_level = MPI_THREAD_SINGLE, .min_ranks = 2, .rank_multiple = 2,
    .no_mock = "a pair of ranks exchanges: a rank alone has no partner",
    .points = toy_points, .setup = toy_setup, .iterate = toy_iterate, .teardown = toy_teardown,
};
HMB_REGISTER(toy_bench);
""",
    "setup.c": r"""
#include <stdlib.h>
#include "toy.h"

void toy_points(hmb_ctx *ctx, hmb_point_list *out)
{
    for (int i = 0; i < hmb_common(ctx)->sizes.n; i++)
        ((toy_point *)hmb_points_new(out, hmb_common(ctx)->sizes.v[i]))->window = HMB_OPTS(toy_opts, ctx)->window;
}

void *toy_setup(hmb_ctx *ctx, const hmb_point *pt)
{
    toy_state *st = calloc(1, sizeof *st);
    st->window = (int)HMB_POINT(toy_point, pt)->window;
    st->send = hmb_buffer_alloc(ctx, pt->size_bytes + 1);
    st->recv = hmb_buffer_alloc(ctx, pt->size_bytes + 1);
    toy_register_checks(ctx, st, pt->size_bytes);
    return st;
}

void toy_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    toy_state *st = state;
    free(st->send);
    free(st->recv);
    free(st);
}
""",
    "verify.c": r"""
#include "toy.h"

void toy_register_checks(hmb_ctx *ctx, toy_state *st, size_t bytes)
{
    int peer = hmb_rank(ctx) ^ 1;
    hmb_check_register(ctx, HMB_SEND, st->send, bytes, hmb_rank(ctx), 0, 1, HMB_AFTER_ITERATION, "send");
    hmb_check_register(ctx, HMB_RECEIVE, st->recv, bytes, peer, 0, 1, HMB_AFTER_ITERATION, "from %d", peer);
}
""",
}

# Add a mode to halo3d: its enum entry in halo3d.h (before the hidden threadcomm), its iterate and its
# row in pattern.c.
TOY_MODE_ENUM = ("MODE_SERIAL, MODE_THREADCOMM, NMODES", "MODE_SERIAL, MODE_TOY, MODE_THREADCOMM, NMODES")
TOY_MODE_ITERATE = r'''
/* toy: fork-join, then one thread exchanges, as single (the guide's example) */
static void iterate_toy(hmb_ctx *ctx, void *state, int mode, long iter, double *times)
{
    halo_state *st = mode_begin(ctx, state, iter);
#pragma omp parallel num_threads(st->threads)
    halo_compute(ctx, st, omp_get_thread_num(), iter);
    hmb_phase(ctx, "toy exchange");
    mode_end(st, mode, times, exchange_joined(st, mode, 0));
}

static const hmb_mode halo_modes[NMODES + 1] = {
    [MODE_TOY] = {.name = "toy", .iterate = iterate_toy, .verify = halo_mode_verify, .metrics = EXCHANGE_METRICS,
                  .flags = HMB_MODE_OPT_IN},'''


@pytest.fixture(scope="module")
def toy_build(tmp_path_factory):
    impl = get_mpi("mpich")
    root = tmp_path_factory.mktemp("contributing")
    for part in ("CMakeLists.txt", "cmake", "include", "src", "tests/data/pvar_selftest.c"):
        src = REPO / part
        (root / part).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy)(src, root / part)
    (root / "src/bench/toy").mkdir()
    for name, text in TOY_BENCH.items():
        (root / "src/bench/toy" / name).write_text(text)
    header, pattern = root / "src/bench/halo3d/halo3d.h", root / "src/bench/halo3d/pattern.c"
    text = header.read_text()
    assert TOY_MODE_ENUM[0] in text
    header.write_text(text.replace(*TOY_MODE_ENUM))
    text = pattern.read_text()
    assert "static const hmb_mode halo_modes[NMODES + 1] = {" in text
    pattern.write_text(text.replace("static const hmb_mode halo_modes[NMODES + 1] = {", TOY_MODE_ITERATE, 1))
    build = root / "build"
    # Built unoptimised (-O0, no -g): the recipes are checked by what the toy's descriptor says and
    # that its launches run and validate, not by its speed; -O2 made this build 13-16 s of make
    # test's MPI tests, which run one after another.
    for cmd in (["cmake", "-S", str(root), "-B", str(build), f"-DMPI_C_COMPILER={impl.mpicc}",
                 "-DCMAKE_BUILD_TYPE=Debug", "-DCMAKE_C_FLAGS_DEBUG=-O0"],
                ["cmake", "--build", str(build), "--target", "hmb-bench", "-j", "2"]):
        p = subprocess.run(cmd, capture_output=True, text=True, env=impl.env())
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return impl, build / "hmb-bench", root


def describe(exe, bench):
    p = subprocess.run([str(exe), bench, "--describe", "--json"], capture_output=True, text=True, check=True)
    return json.loads(p.stdout)["benchmarks"][0]


def launch(impl, exe, args, tmp_path, ranks=2):
    out = tmp_path / "out.jsonl"
    env = impl.env()
    env["OMP_NUM_THREADS"] = "1"
    p = mpi_run(impl, impl.launch_args(ranks, 1) + [str(exe)] + args + ["--json", str(out)], capture_output=True,
                text=True, env=env, timeout=240)
    assert p.returncode == 0, p.stderr[-3000:]
    return [json.loads(line) for line in out.read_text().splitlines() if '"result"' in line]


def test_the_recipes_touch_only_what_they_say(toy_build):
    """The toy mode changed halo3d's header and pattern alone; the toy benchmark is one new folder."""
    _, _, root = toy_build
    changed = [p.relative_to(root) for p in (root / "src").rglob("*")
               if p.is_file() and (not (REPO / p.relative_to(root)).exists()
                                   or (REPO / p.relative_to(root)).read_bytes() != p.read_bytes())]
    assert sorted(map(str, changed)) == ["src/bench/halo3d/halo3d.h", "src/bench/halo3d/pattern.c",
                                         "src/bench/toy/pattern.c", "src/bench/toy/setup.c", "src/bench/toy/toy.h",
                                         "src/bench/toy/verify.c"]


def test_a_new_benchmark_and_its_metric_appear(toy_build, tmp_path):
    impl, exe, _ = toy_build
    d = describe(exe, "toy")
    assert [o for o in d["options"] if o["name"] == "window"][0]["default"] == "4"
    assert [m["name"] for m in d["metrics"]] == ["round_trip_us", "toy_rate"]
    assert d["comm_off"] == "a pair of ranks exchanges: a rank alone has no partner"
    (rec,) = launch(impl, exe, ["toy", "--window", "3", "--iters", "3", "--warmup", "0", "--ci-target", "0"], tmp_path)
    assert rec["params"]["window"] == 3 and rec["metrics"]["toy_rate"]["count"] == 3
    assert rec["metrics"]["toy_rate"]["median"] > 0


def test_a_new_mode_appears_with_its_metrics(toy_build, tmp_path):
    impl, exe, _ = toy_build
    d = describe(exe, "halo3d")
    mode = [o for o in d["options"] if o["name"] == "mode"][0]
    assert "toy" in mode["choices"] and "toy" not in mode["default"].split(",")   # opt-in
    toy = [m for m in d["modes"] if m["name"] == "toy"][0]
    assert toy["metrics"] == ["t_iter_toy_us", "t_comm_toy_us", "throughput_toy_MBps"]
    assert {"t_iter_toy_us", "throughput_toy_MBps"} <= {m["name"] for m in d["metrics"]}
    (rec,) = launch(impl, exe, ["halo3d", "--mode", "single,toy", "--sizes", "4K", "--compute", "10us", "--iters",
                                "3", "--warmup", "0", "--ci-target", "0"], tmp_path)
    assert rec["metrics"]["throughput_toy_MBps"]["count"] == 3
    assert rec["metrics"]["throughput_single_MBps"]["count"] == 3
