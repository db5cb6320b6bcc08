"""HMB (Hybrid MPI Benchmarks): the Python front door to hmb-bench."""

__version__ = "0.1.0"
