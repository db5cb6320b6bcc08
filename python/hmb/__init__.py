"""HMB (Hybrid MPI Benchmarks): the Python front door to hmb-bench."""

__version__ = "0.1.0"


def load(paths, warn=True):
    """Results files (a directory: its *.jsonl) → tidy pandas DataFrame, one row per point and
    metric (hmb.tidy)."""
    from .data.tidy import load as _load
    return _load(paths, warn=warn)
