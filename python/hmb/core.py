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
