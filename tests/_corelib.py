"""libhmbcore.so for the unit tests of the pure harness modules, with ctypes signatures.

Builds only the CMake target `hmbcore` into $HMB_BUILD_ROOT/mpich (default build/mpich; hmb.core),
so the pure modules can be tested even while the rest of hmb-bench does not build.
The structures below mirror src/harness/core.h, include/hmb/bench.h and include/hmb/metrics.h;
load() checks every size and field offset against the library's own table (hmb_layout,
src/harness/layout.c), so a struct change fails loudly instead of desynchronising the tests.
"""
from __future__ import annotations

import ctypes as C
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# hmb_opt_type
FLAG, INT, DOUBLE, SIZES, INTS, DURATION, STRING, CHOICE, CHOICES, CHOICE_ARGS = range(10)
# hmb_noise_kind
NOISE_NONE, NOISE_SINGLE, NOISE_UNIFORM, NOISE_GAUSSIAN = range(4)
HMB_MAX_OPTIONS = 160


class Option(C.Structure):
    _fields_ = [("name", C.c_char_p), ("type", C.c_int), ("default_value", C.c_char_p),
                ("help", C.c_char_p), ("min", C.c_double), ("max", C.c_double),
                ("choices", C.c_char_p), ("role", C.c_int),   # role: 0 parameter, 1 run control
                # where the typed value and its given flag live (1 + offset; 0: none), names, modes, group
                ("slot", C.c_size_t), ("given_slot", C.c_size_t), ("names", C.POINTER(C.c_char_p)),
                ("modes", C.c_int), ("group", C.c_int), ("used_by", C.c_char_p)]


class Default(C.Structure):
    _fields_ = [("name", C.c_char_p), ("value", C.c_char_p)]


class OptVal(C.Structure):
    _fields_ = [("opt", C.POINTER(Option)), ("given", C.c_int), ("present", C.c_int),
                ("ival", C.c_longlong), ("dval", C.c_double), ("ns", C.c_int64),
                ("sval", C.c_char_p), ("sizes", C.POINTER(C.c_size_t)),
                ("ints", C.POINTER(C.c_longlong)), ("count", C.c_int),
                ("args", C.POINTER(C.c_double))]

    def size_list(self):
        return [self.sizes[i] for i in range(self.count)]

    def int_list(self):
        return [self.ints[i] for i in range(self.count)]

    def choice_args(self):
        return [(self.ints[i], self.args[i]) for i in range(self.count)]


class OptSet(C.Structure):
    _fields_ = [("count", C.c_int), ("vals", OptVal * HMB_MAX_OPTIONS), ("rows", Option * HMB_MAX_OPTIONS),
                ("common", C.c_ubyte * HMB_MAX_OPTIONS), ("owned", C.c_char_p * (2 * HMB_MAX_OPTIONS)),
                ("nowned", C.c_int)]


class Summary(C.Structure):
    _fields_ = [("count", C.c_long), ("median", C.c_double), ("ci_lo", C.c_double),
                ("ci_hi", C.c_double), ("ci_valid", C.c_int), ("min", C.c_double),
                ("p95", C.c_double), ("max", C.c_double), ("mean", C.c_double),
                ("stddev", C.c_double)]


class Noise(C.Structure):
    _fields_ = [("kind", C.c_int), ("percent", C.c_double), ("thread_random", C.c_int),
                ("seed", C.c_uint64)]


class Calib(C.Structure):
    _fields_ = [("iters_per_ns", C.c_double), ("calib_s", C.c_double), ("cpu", C.c_int),
                ("interrupt_lost_frac", C.c_double), ("interrupts_per_ns", C.c_double),
                ("rate_spread", C.c_double), ("verify_error", C.c_double),
                ("alone_iters_per_ns", C.c_double), ("concurrent", C.c_int)]


class ComputeSummary(C.Structure):
    _fields_ = [("present", C.c_int), ("kinds", C.c_int), ("threads", C.c_int),
                ("requested_ns", C.c_double), ("measured_ns", C.c_double), ("error", C.c_double),
                ("worst_rank", C.c_int), ("worst_thread", C.c_int),
                ("worst_requested_ns", C.c_double), ("worst_measured_ns", C.c_double), ("worst_error", C.c_double)]


class PartMetrics(C.Structure):
    _fields_ = [(n, C.c_double) for n in ("t_part_s", "t_pt2pt_s", "t_persist_s", "t_polled_s", "overhead",
                                          "overhead_persistent", "overhead_polled", "polled_over_blocking",
                                          "perceived_bw_Bps", "t_after_join_s", "availability", "early_bird")]


class Changepoint(C.Structure):
    _fields_ = ([("index", C.c_int)] + [(n, C.c_double) for n in ("lo", "hi", "a_left", "b_left", "a_right", "b_right",
                                                               "jump", "rss", "rss_line", "sigma")]
                + [("step", C.c_int)])


_P = C.POINTER

class TopoDir(C.Structure):
    _fields_ = [("off", C.c_int * 3), ("to", C.c_int), ("from_", C.c_int)]


class Topo(C.Structure):
    _fields_ = [("ndims", C.c_int), ("dims", C.c_int * 3), ("periodic", C.c_int), ("coords", C.c_int * 3),
                ("rank", C.c_int), ("size", C.c_int), ("tdims", C.c_int * 3), ("nthreads", C.c_int),
                ("ndirs", C.c_int), ("dir", TopoDir * 26)]


class ClockModel(C.Structure):
    _fields_ = [("offset_s", C.c_double), ("drift", C.c_double), ("t_ref_s", C.c_double),
                ("residual_max_s", C.c_double)]


class Cpus(C.Structure):
    _fields_ = [("bits", C.c_uint64 * 16)]


# hmb_size_predicate (metrics.h): int (*)(size_t size_bytes, void *arg)
SIZE_PREDICATE = C.CFUNCTYPE(C.c_int, C.c_size_t, C.c_void_p)

# C type of each mirror (hmb_layout's names); a Python field named "from_" is C's "from".
MIRRORS = {"hmb_option": Option, "hmb_default": Default, "hmb_optval": OptVal, "hmb_optset": OptSet,
           "hmb_summary": Summary, "hmb_noise": Noise, "hmb_calib": Calib, "hmb_compute_summary": ComputeSummary, "hmb_part_metrics": PartMetrics,
           "hmb_topo_dir": TopoDir, "hmb_topo": Topo, "hmb_changepoint": Changepoint,
           "hmb_clock_model": ClockModel, "hmb_cpus": Cpus}


def layout_mismatches(lib) -> list:
    """Every difference between the mirrors and the library's layouts, one line each."""
    fn = lib.hmb_layout
    fn.restype = C.c_int
    fn.argtypes = [C.c_int, _P(C.c_char_p), _P(C.c_char_p), _P(C.c_size_t), _P(C.c_size_t)]
    bad, seen = [], {}
    t, f, off, size = C.c_char_p(), C.c_char_p(), C.c_size_t(), C.c_size_t()
    i = 0
    while fn(i, C.byref(t), C.byref(f), C.byref(off), C.byref(size)):
        i += 1
        ctype, field = t.value.decode(), f.value and f.value.decode()
        cls = MIRRORS.get(ctype)
        if cls is None:
            bad.append(f"{ctype}: no mirror in tests/_corelib.py")
            continue
        if field is None:
            if C.sizeof(cls) != size.value:
                bad.append(f"{ctype}: {C.sizeof(cls)} bytes in the mirror, {size.value} in the library")
            continue
        py = field + "_" if field in ("from",) else field
        seen.setdefault(ctype, set()).add(py)
        desc = getattr(cls, py, None)
        if desc is None:
            bad.append(f"{ctype}.{field}: missing from the mirror")
        elif (desc.offset, desc.size) != (off.value, size.value):
            bad.append(f"{ctype}.{field}: offset/size {desc.offset}/{desc.size} in the mirror, "
                       f"{off.value}/{size.value} in the library")
    for ctype, cls in MIRRORS.items():
        extra = {name for name, _ in cls._fields_} - seen.get(ctype, set())
        if extra:
            bad.append(f"{ctype}: mirror fields {sorted(extra)} not in the library's table")
    return bad


_SIGNATURES = {
    # validate.c
    "hmb_poison_pages": (None, [C.c_void_p, C.c_size_t]),
    "hmb_poison_why": (None, [C.c_char_p, C.c_char_p, C.c_size_t, C.c_char_p, C.c_size_t]),
    # units.c
    "hmb_parse_size": (C.c_int, [C.c_char_p, _P(C.c_size_t), C.c_char_p, C.c_size_t]),
    "hmb_parse_size_list": (C.c_int, [C.c_char_p, _P(_P(C.c_size_t)), _P(C.c_int), C.c_char_p, C.c_size_t]),
    "hmb_parse_int_list": (C.c_int, [C.c_char_p, _P(_P(C.c_longlong)), _P(C.c_int), C.c_char_p, C.c_size_t]),
    "hmb_parse_duration_ns": (C.c_int, [C.c_char_p, _P(C.c_int64), C.c_char_p, C.c_size_t]),
    "hmb_format_size": (None, [C.c_size_t, C.c_char_p, C.c_size_t]),
    # options.c
    "hmb_options_parse": (C.c_int, [_P(OptSet), _P(Option), _P(Default), C.c_int, _P(C.c_char_p),
                                    C.c_char_p, C.c_size_t]),
    "hmb_options_find": (_P(OptVal), [_P(OptSet), C.c_char_p]),
    "hmb_options_free": (None, [_P(OptSet)]),
    "hmb_options_store": (None, [_P(OptSet), C.c_void_p, C.c_void_p]),
    "hmb_options_help": (None, [C.c_void_p, _P(Option), _P(Default), C.c_int]),
    # stats.c
    "hmb_median_ci_ranks": (C.c_int, [C.c_long, C.c_double, _P(C.c_long), _P(C.c_long)]),
    "hmb_quantile_sorted": (C.c_double, [_P(C.c_double), C.c_long, C.c_double]),
    "hmb_summarize": (None, [_P(C.c_double), C.c_long, C.c_double, _P(Summary)]),
    "hmb_ci_target_met": (C.c_int, [_P(Summary), C.c_double]),
    # noise.c
    "hmb_noise_parse": (C.c_int, [C.c_char_p, _P(Noise), C.c_char_p, C.c_size_t]),
    "hmb_noise_draw": (C.c_int64, [_P(Noise), C.c_int, C.c_int, C.c_int, C.c_long, C.c_int64]),
    "hmb_noise_single_thread": (C.c_int, [_P(Noise), C.c_int, C.c_int, C.c_long]),
    "hmb_noise_max_draw": (C.c_int64, [_P(Noise), C.c_int64]),
    # compute.c
    "hmb_compute_kernel": (C.c_double, [C.c_uint64]),
    "hmb_compute_calibrate": (C.c_int, [_P(Calib), C.c_double]),
    "hmb_compute_for": (C.c_int64, [_P(Calib), C.c_int64]),
    "hmb_compute_work": (C.c_int64, [_P(Calib), C.c_int64]),
    "hmb_compute_iters": (C.c_uint64, [_P(Calib), C.c_int64]),
    "hmb_compute_run_iters": (C.c_int64, [C.c_uint64]),
    "hmb_compute_rate_error": (C.c_double, [C.c_double, C.c_uint64, C.c_int64]),
    "hmb_compute_sustained_rate": (C.c_double, [_P(Calib), C.c_int]),
    "hmb_compute_calibrate_verified": (C.c_int, [_P(Calib), C.c_double, C.c_int]),
    "hmb_compute_calibrate_rate": (C.c_int, [_P(Calib), C.c_double]),
    "hmb_compute_probe": (C.c_double, [_P(Calib), C.c_int64, C.c_int, C.c_double, _P(C.c_int)]),
    "hmb_compute_allowed_error_ns": (C.c_double, [C.c_int64]),
    "hmb_compute_thread_medians": (None, [C.c_long, _P(C.c_double), _P(C.c_double), _P(C.c_double)]),
    "hmb_compute_summarize": (None, [C.c_int, C.c_int, _P(C.c_double), _P(ComputeSummary)]),
    "hmb_compute_test_core": (C.c_int, [C.c_double, C.c_double, C.c_int, _P(C.c_double), _P(C.c_double), C.c_int]),
    # timer.c
    "hmb_now": (C.c_double, []),
    "hmb_now_ns": (C.c_int64, []),
    "hmb_timer_measure": (None, [_P(C.c_double), _P(C.c_double)]),
    # metrics.c
    "hmb_part_metrics_compute": (C.c_int, [C.c_int, _P(C.c_double), _P(C.c_double), C.c_double,
                                           C.c_double, C.c_double, C.c_double, C.c_size_t, _P(PartMetrics)]),
    "hmb_async_overhead": (C.c_double, [C.c_double, C.c_double]),
    "hmb_async_efficiency_pct": (C.c_double, [C.c_double, C.c_double, C.c_double]),
    "hmb_overlap_pct": (C.c_double, [C.c_double, C.c_double, C.c_double]),
    "hmb_overlap_unclamped_pct": (C.c_double, [C.c_double, C.c_double, C.c_double]),
    "hmb_projected_speedup": (C.c_double, [C.c_double, C.c_double]),
    "hmb_eager_threshold_rule": (C.c_size_t, [C.c_double, C.c_size_t]),
    "hmb_async_compute_tolerance": (C.c_double, [C.c_double, C.c_double]),
    "hmb_async_compute_too_fast": (C.c_int, [C.c_double, C.c_double, C.c_double]),
    "hmb_async_efficiency_ranks": (C.c_int, [C.c_int] + [_P(C.c_double)] * 5),
    "hmb_kba_ideal_idle_share": (C.c_double, [C.c_int, C.c_int, C.c_int]),
    "hmb_idle_share": (C.c_double, [C.c_double, C.c_double]),
    "hmb_pattern_rates": (None, [C.c_int] + [_P(C.c_double)] * 4),
    "hmb_throughput_Bps": (C.c_double, [C.c_double, C.c_double]),
    "hmb_probe_outstanding": (C.c_double, [C.c_double] * 3),
    "hmb_probe_outstanding_share": (C.c_double, [C.c_double, C.c_double]),
    "hmb_match_times_compute": (C.c_int, [C.c_int] + [_P(C.c_double)] * 4 + [C.c_int, _P(C.c_double)]),
    "hmb_match_queue_depth": (None, [C.c_int] + [_P(C.c_double)] * 3),
    "hmb_changepoint_fit": (C.c_int, [C.c_int, _P(C.c_double), _P(C.c_double), C.c_double, _P(Changepoint)]),
    "hmb_changepoint_steps": (C.c_int, [C.c_int, _P(C.c_double), _P(C.c_double), _P(Changepoint), C.c_int]),
    "hmb_cost_noise": (C.c_double, [C.c_int, _P(C.c_double)]),
    "hmb_changepoint_side": (C.c_int, [_P(Changepoint), C.c_double, C.c_double]),
    "hmb_clearest_step": (C.c_int, [C.c_int, _P(C.c_double), _P(C.c_double), C.c_int, _P(Changepoint)]),
    "hmb_running_median3": (None, [C.c_int, _P(C.c_double), _P(C.c_double)]),
    "hmb_find_switches": (C.c_int, [_P(C.c_size_t), C.c_int, C.c_size_t, SIZE_PREDICATE, C.c_void_p,
                                    _P(C.c_size_t), _P(C.c_int), C.c_int]),
    "hmb_probe_majority": (C.c_int, [C.c_int, C.c_int]),
    "hmb_probe_verdict": (C.c_int, [C.c_double] * 3),
    "hmb_memory_per_peer_kB": (C.c_double, [C.c_double, C.c_double, C.c_int]),
    "hmb_memory_projected_kB": (C.c_double, [C.c_double, C.c_double, C.c_int]),
    # clockfit.c
    "hmb_clock_exchange_offset": (C.c_double, [C.c_double, C.c_double, C.c_double]),
    "hmb_clock_fit": (C.c_int, [C.c_int, _P(C.c_double), _P(C.c_double), C.c_double, _P(ClockModel)]),
    "hmb_clock_model_offset": (C.c_double, [_P(ClockModel), C.c_double]),
    # affinity.c
    "hmb_cpulist_parse": (C.c_int, [C.c_char_p, _P(Cpus)]),
    "hmb_cpulist_format": (None, [_P(Cpus), C.c_char_p, C.c_size_t]),
    "hmb_cpus_count": (C.c_int, [_P(Cpus)]),
    "hmb_spare_cpulist": (C.c_int, [C.c_char_p, C.c_char_p, C.c_char_p, C.c_size_t]),
    "hmb_cpus_oversubscribed": (C.c_int, [C.c_int, _P(Cpus)]),
    "hmb_spare_rule_option": (C.c_int, [C.c_char_p, C.c_char_p, C.c_size_t]),
    "hmb_spare_rule_matches": (C.c_int, [C.c_char_p, C.c_char_p]),
    # design.c
    "hmb_phase_orders": (C.c_int, [C.c_int]),
    "hmb_phase_order": (C.c_int, [C.c_int, C.c_long, _P(C.c_int)]),
    # topology.c
    "hmb_dims_balanced": (C.c_int, [C.c_int, C.c_int, _P(C.c_int)]),
    "hmb_topo_directions": (C.c_int, [C.c_int, C.c_int, _P(C.c_int * 3)]),
    "hmb_topo_build": (C.c_char_p, [_P(Topo), C.c_int, C.c_int, _P(C.c_int), C.c_int, C.c_int, _P(C.c_int),
                                    C.c_int, C.c_int]),
    "hmb_topo_rank_of": (C.c_int, [_P(Topo), _P(C.c_int)]),
    "hmb_topo_pieces": (C.c_int, [_P(Topo), C.c_int]),
    "hmb_topo_piece_thread": (C.c_int, [_P(Topo), C.c_int, C.c_int]),
    "hmb_topo_thread_piece": (C.c_int, [_P(Topo), C.c_int, C.c_int]),
    "hmb_topo_tile": (None, [_P(Topo), _P(C.c_int), C.c_int, _P(C.c_int), _P(C.c_int)]),
    "hmb_topo_send_box": (None, [_P(Topo), _P(C.c_int), C.c_int, C.c_int, _P(C.c_int), _P(C.c_int)]),
    "hmb_topo_recv_box": (None, [_P(Topo), _P(C.c_int), C.c_int, C.c_int, _P(C.c_int), _P(C.c_int)]),
}


_lib = None


def load():
    """Build target hmbcore (once per process, incrementally: hmb.run.core.build_library) and return the
    library with signatures set."""
    global _lib
    if _lib is not None:
        return _lib
    from hmb.run import core
    lib = C.CDLL(str(core.build_library(fresh=True)))
    bad = layout_mismatches(lib)
    if bad:
        raise RuntimeError("tests/_corelib.py mirrors out of date:\n" + "\n".join(bad))
    for name, (res, args) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    _lib = lib
    return lib


def doubles(values):
    arr = (C.c_double * max(1, len(values)))(*values)
    return arr
