"""The data layer: results files as records (results), the tidy table every reader of results
uses (tidy), the output schema and its check (schema/, validate), what hmb-bench says about its
benchmarks (descriptors), durations (units) and how hmb writes a file (outputs). Nothing here
launches anything or draws anything; every other layer may use it. docs/architecture.md.

Also the files hmb ships beside its code: pingpong.c (hmb check's minimal ping-pong) and mpip/
(the mpiP reports a study's projection reads)."""

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent   # the files shipped beside the code (pingpong.c, mpip/)
