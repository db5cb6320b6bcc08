"""libhmbcore.so, the pure harness modules (formulas, size parsing), for the toolkit: one
definition of each formula, in C, shared by hmb-bench and Python. Built on demand as the CMake
target hmbcore of the MPICH build tree (the library links no MPI, so its copy serves every MPI;
the tree is configured with the MPICH wheel's compiler wrapper, installed by `make setup`)."""
from __future__ import annotations

import ctypes
import os
import subprocess
from pathlib import Path

from . import mpi

_SIGNATURES = {
    "hmb_projected_speedup": (ctypes.c_double, [ctypes.c_double, ctypes.c_double]),
    "hmb_eager_threshold_rule": (ctypes.c_size_t, [ctypes.c_double, ctypes.c_size_t]),
    "hmb_parse_size": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t), ctypes.c_char_p,
                                      ctypes.c_size_t]),
    "hmb_parse_size_list": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(ctypes.POINTER(ctypes.c_size_t)),
                                           ctypes.POINTER(ctypes.c_int), ctypes.c_char_p, ctypes.c_size_t]),
}
_lib = None


def build_library(fresh: bool = False) -> Path:
    """libhmbcore.so, building the target hmbcore first when it is missing, or always with fresh
    (an incremental build: the tests of the formulas test the sources as they are). No hmb-bench,
    no MPI library run: a formula's caller needs none. A tree not yet configured is configured with
    the MPICH wheel's mpicc (mpi.find installs it when even that is missing)."""
    bdir = mpi.REPO / os.environ.get("HMB_BUILD_ROOT", "build") / "mpich"
    path = bdir / "libhmbcore.so"
    if path.exists() and not fresh:
        return path
    steps = []
    if not (bdir / "CMakeCache.txt").exists():
        mpicc = mpi.VENV / "bin" / "mpicc"
        mpicc = mpicc if mpicc.exists() else Path(mpi.find("mpich").mpicc)
        steps.append(["cmake", "-S", str(mpi.REPO), "-B", str(bdir), "-DCMAKE_BUILD_TYPE=Release",
                      f"-DMPI_C_COMPILER={mpicc}"])
    steps.append(["cmake", "--build", str(bdir), "--target", "hmbcore", "-j", str(os.cpu_count() or 2)])
    with mpi.tree_lock(mpi.build_lock_path(bdir)):    # the tree hmb-bench's MPICH build shares
        for cmd in steps:
            if cmd[1] == "-S" and (bdir / "CMakeCache.txt").exists():
                continue                    # configured by another process while this one waited
            r = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
            if r.returncode != 0:
                raise mpi.MPIError(f"building libhmbcore failed: {' '.join(cmd[:2])}: "
                                   f"{(r.stderr.strip().splitlines() or r.stdout.strip().splitlines() or ['?'])[-1]}")
    return path


def load():
    """The library with the signatures above set (built first if missing)."""
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(str(build_library()))
        for name, (res, args) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        _lib = lib
    return _lib


def size_list(text: str) -> list[int]:
    """The sizes of a SIZES option ("4K:16M:x4", "1K,64K"), as hmb-bench expands them
    (hmb_parse_size_list, units.c); ValueError with hmb-bench's words if it is not one."""
    out, count = ctypes.POINTER(ctypes.c_size_t)(), ctypes.c_int()
    err = ctypes.create_string_buffer(256)
    if load().hmb_parse_size_list(str(text).encode(), ctypes.byref(out), ctypes.byref(count), err, len(err)) != 0:
        raise ValueError(err.value.decode(errors="replace"))
    try:
        return [out[i] for i in range(count.value)]
    finally:
        _libc().free(ctypes.cast(out, ctypes.c_void_p))


def _libc():
    libc = ctypes.CDLL(None)
    libc.free.argtypes, libc.free.restype = [ctypes.c_void_p], None
    return libc
