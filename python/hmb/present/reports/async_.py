"""Readings of the asynchronous progress benchmark (async): overlap efficiency per progress mode
(figures.toml: async_efficiency, async_e_loaded), and the modes a library did not run."""
from __future__ import annotations

from .common import reading, reading_modes, register

register("async", "Asynchronous progress and overlap (async)")


def _reading(plan, unsupported, metric: str) -> str:
    text = " ".join(reading_modes(p.lines, "%", f"{metric} by progress mode, op {p.value}:") for p in plan.panels)
    if unsupported is not None and not unsupported.empty:
        un = unsupported[unsupported["bench"] == "async"]
        pairs = sorted({(str(m), str(p)) for m, p in zip(un["mpi"], un.get("progress", []))})
        if pairs:
            text += " Unsupported: " + ", ".join(f"{p} on {m}" for m, p in pairs) + "."
    return text


@reading("async_efficiency")
def efficiency(plan, unsupported=None) -> str:
    return _reading(plan, unsupported, "efficiency_pct")


@reading("async_e_loaded")
def efficiency_loaded(plan, unsupported=None) -> str:
    return _reading(plan, unsupported, "efficiency_loaded_pct")
