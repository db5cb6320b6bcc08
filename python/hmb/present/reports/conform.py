"""conform: no figures (a verdict is not a curve); `hmb report` shows the conformance records as a
matrix with its notes (report.py, hmb.run.conform.matrix_rows)."""
from __future__ import annotations

from .common import register


register("conform", "Conformance checks")
