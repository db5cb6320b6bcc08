"""libhmbcore.so, the pure harness modules (formulas, size parsing), for the toolkit: one
definition of each formula, in C, shared by hmb-bench and Python. Built on demand with the
default MPICH build (the library links no MPI, so its copy serves every MPI)."""
from __future__ import annotations

import ctypes

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


def load():
    """The library with the signatures above set (built first if missing)."""
    global _lib
    if _lib is None:
        impl = mpi.find("mpich")
        path = impl.build_dir / "libhmbcore.so"
        if not path.exists():
            mpi.build(impl)
        lib = ctypes.CDLL(str(path))
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
