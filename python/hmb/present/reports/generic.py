"""Figures for a benchmark with none declared (figures.toml), from its descriptor: each
summary-worthy metric (in_table) against message size, one line per MPI; the engine splits a
line wherever points of different identity would share a size, and names what differs."""
from __future__ import annotations


def generic_figures(bench: str, desc, df) -> list[dict]:
    """Declarations of the benchmark's figures (without a descriptor: one per metric it recorded)."""
    rows = df[df["bench"] == bench] if df is not None and not df.empty else None
    if rows is None or "size_bytes" not in rows.columns or rows["size_bytes"].isna().all():
        return []
    if desc:
        metrics = [(m.name, m.description) for m in desc.metrics if m.in_table]
    else:
        metrics = [(m, "") for m in dict.fromkeys(rows["metric"])]
    return [{"id": f"{bench}_{name}", "bench": bench, "title": f"{bench}: {name}",
             "question": description or f"{name} by message size", "x": "size_bytes", "y": name}
            for name, description in metrics]
