"""HMB (Hybrid MPI Benchmarks): the Python front door to hmb-bench.

The package by layer (docs/architecture.md): data (records, the tidy table), lab (nodes on one
machine), run (build, launch, sweep), present (figures, reports, compare), study (the seed
papers), and cli on top. Here: the version and hmb.load."""

__version__ = "0.1.0"


def load(paths, warn=True):
    """Results files (a directory: its *.jsonl) → tidy pandas DataFrame, one row per point and
    metric (hmb.data.tidy)."""
    from .data.tidy import load as tidy_load   # pandas: `import hmb` (and so hmb's start-up) stays light
    return tidy_load(paths, warn=warn)
