"""A study's figures and tables: each [[figure]] drawn by the one figure engine (hmb.present.figures)
into the study's figures/ID.png, each [[table]] as markdown from the same tidy table."""
from __future__ import annotations

from pathlib import Path

from ..data import tidy
from ..present.figures import as_number, context_line, panelled, render, save, sort_key, value_format, value_label
from ..present.format import clip_text, fmt_num, md_text
from ..data.tidy import select


def draw(fig: dict, df, outdir: Path, title_prefix: str = "") -> tuple[Path | None, str]:
    """Draw one declared figure from the tidy table into outdir/ID.png; returns (the path, or
    None when no row matches, and a one-line note)."""
    f, note = render(fig, df, title_prefix)
    if f is None:
        return None, note
    return save(f, outdir, fig["id"])[0], note


def table(decl: dict, df) -> str:
    """A declared table ([[table]]: `rows` metrics × `columns` values, one block per `panels`
    value and MPI) as markdown; each cell the median over launches, marked † where the point is
    oversubscribed or its progress thread shares a compute core (not a reading). `resources`:
    recorded fields of the same points (communicators, vmrss_kib: no timing) as further rows."""
    rows = select(df, decl.get("bench"), decl["rows"], decl.get("where"))
    head = f"**{md_text(decl['number'])}: {md_text(decl['title'])}**"
    if rows is None or rows.empty or decl["columns"] not in rows.columns:
        return f"{head}\n\n{md_text(decl['number'])}: no results for this table\n"
    col, labels = decl["columns"], decl.get("labels") or {}
    rows, panel_col, panel_vals = panelled(rows, decl.get("panels"), labels)
    cols = sorted({v for v in rows[col].dropna().unique()}, key=sort_key)
    fmt = value_format(col)
    colname = md_text(decl.get("column_label", col))
    out, any_bad = [head, "", md_text(context_line(rows)), ""], False
    if panel_vals is None:
        panel_vals = sorted(rows[panel_col].dropna().astype(str).unique(), key=sort_key) if panel_col else [None]
    for m in sorted(rows["mpi"].unique()):
        for pv in panel_vals:
            sub = rows[rows["mpi"] == m]
            if pv is not None:
                sub = sub[sub[panel_col].astype(str) == pv]
            if sub.empty:
                continue
            title = md_text(f"{m}" + (f", {value_label(panel_col, pv, labels)}" if pv is not None else ""))
            out += [f"*{title}*", "", f"| {colname} | " + " | ".join(
                fmt(as_number(c)) if as_number(c) is not None else md_text(clip_text(c)) for c in cols) + " |",
                "|---|" + "---|" * len(cols)]
            for metric in decl["rows"]:
                cells = []
                for c in cols:
                    g = sub[(sub["metric"] == metric) & (sub[col] == c)]
                    if g.empty:
                        cells.append("–")
                        continue
                    bad = bool(tidy.no_reading(g).any())
                    any_bad |= bad
                    cells.append(fmt_num(float(g["median"].astype(float).median())) + ("†" if bad else ""))
                unit = sub[sub["metric"] == metric]["unit"]
                name = md_text(labels.get(metric, metric) + (f" ({unit.iloc[0]})" if len(unit) else ""))
                out.append(f"| {name} | " + " | ".join(cells) + " |")
            for field in decl.get("resources", []):
                vals = [sub[sub[col] == c][field].astype(float).dropna() if field in sub.columns else () for c in cols]
                out.append(f"| {md_text(labels.get(field, field))} | " + " | ".join(
                    "–" if not len(v) else f"{v.median():.0f}" if float(v.median()).is_integer()
                    else fmt_num(float(v.median())) for v in vals) + " |")
            out.append("")
    if any_bad:
        out.append("† oversubscribed, or the progress thread shares a compute core: not a reading.")
    return "\n".join(out) + "\n"
