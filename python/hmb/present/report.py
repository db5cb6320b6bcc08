"""`hmb report`: figures (PNG + SVG), report.md and report.html from JSON Lines results.

Each figure answers a question stated above it and carries a one-line reading computed from
the data below it. The figures of each benchmark come from its module in hmb.reports (or the
generic one, from its descriptor); this module adds the tables every report has
(environment, unsupported points, failures, all results) and renders Markdown and HTML.
"""
from __future__ import annotations

import base64
import html
import math
from collections import defaultdict
from pathlib import Path

from .. import __version__
from ..data.results import ResultSet, combine, point_key, varying
from .format import fmt_num, fmt_size, md_cell


def environment_rows(rs: ResultSet) -> list[list[str]]:
    launches = {ln.get("tag"): ln for ln in rs.launches}
    groups = defaultdict(int)
    for run in rs.runs.values():
        mpi = run.get("mpi") or {}
        binding = _binding(run, launches.get(run.get("tag")))
        library = " ".join(str(mpi.get("library", "?")).split(",")[0].split())
        key = (str(run.get("bench") or "?"), library, str(run.get("ranks", "?")),
               str(run.get("threads", "?")), binding, "yes" if run.get("oversubscribed") else "no",
               ", ".join(run.get("hosts") or []) or "?", str(run.get("git_revision", "?"))[:12])
        groups[key] += 1
    return [list(k) + [str(n)] for k, n in sorted(groups.items())]


def _binding(run: dict, launch: dict | None) -> str:
    cmd = (launch or {}).get("command") or []
    for flag in ("-bind-to", "--bind-to"):
        if flag in cmd and cmd.index(flag) + 1 < len(cmd):
            return f"{flag} {cmd[cmd.index(flag) + 1]}"
    for a in cmd:
        if a.startswith("--cpu-bind"):
            return a
    sets = [str(p.get("cpuset", "?")) for p in run.get("placement") or []]
    return "cpusets " + " | ".join(sets) if sets else "?"


def unsupported_rows(rs: ResultSet) -> list[list[str]]:
    groups = defaultdict(list)
    for r in rs.results:
        if r.status != "ok":
            groups[(r.bench, r.mpi, r.status, r.record.get("reason", "?"))].append(r)
    rows = []
    for (bench, mpi, status, reason), rr in sorted(groups.items()):
        pts = sorted({", ".join(f"{k}={v}" for k, v in sorted(r.params.items()) if k != "size_bytes")
                      for r in rr})
        rows.append([bench, mpi, status, reason, "; ".join(pts)[:160] + f" ({len(rr)} points)"])
    return rows


def failure_rows(rs: ResultSet) -> list[list[str]]:
    rows = [[f.get("bench", "?"), f.get("kind", "?"), str(f.get("params", "")), f.get("message", "")]
            for f in rs.failures]
    rows += [[ln.get("point", {}).get("bench", "?"), f"launch {ln.get('status')} (exit {ln.get('rc')})",
              ln.get("tag", ""), (ln.get("why") or " ".join(ln.get("command", [])))[:160]]
             for ln in rs.launches if ln.get("status") in ("failed", "incomplete")]
    return rows


def results_rows(rs: ResultSet) -> dict:
    """bench -> (header, rows): every point, first metrics' medians [CI] (repeats)."""
    by_bench = defaultdict(lambda: defaultdict(list))
    for r in rs.results:
        if r.status == "ok":
            bench, items, noise, mpi = point_key(r)
            by_bench[bench][(mpi, noise, items)].append(r)
    out = {}
    for bench, groups in sorted(by_bench.items()):
        # The point's params, and whatever else of its identity differs between rows.
        param_names = {k for rr in groups.values() for r in rr for k in r.params}
        shown = param_names | set(varying([dict(items) for _, _, items in groups]))
        metrics = []
        for rr in groups.values():
            for m, v in (rr[0].record.get("metrics") or {}).items():
                # a metric no point of this set measured (halo3d's other modes) takes no column
                if m not in metrics and isinstance(v, dict) and v.get("median") is not None:
                    metrics.append(m)
        metrics = metrics[:6]
        header = ["MPI", "noise", "parameters"] + metrics + ["repeats"]
        rows = []
        for (mpi, noise, params), rr in sorted(groups.items(), key=lambda kv: _sort_key(kv[0])):
            row = [mpi, noise, ", ".join(f"{k}={fmt_size(v) if k == 'size_bytes' else v}" for k, v in params
                                         if k in shown)]
            for m in metrics:
                c = combine(rr, m)
                row.append("" if c is None else f"{fmt_num(c.median)} (no valid CI)" if math.isnan(c.ci_lo)
                           else f"{fmt_num(c.median)} [{fmt_num(c.ci_lo)}, {fmt_num(c.ci_hi)}]")
            row.append(str(len(rr)))
            rows.append(row)
        out[bench] = (header, rows)
    return out


def _sort_key(k):
    mpi, noise, params = k
    return (mpi, noise, tuple((n, int(v)) if v.lstrip("-").isdigit() else (n, v) for n, v in params))


def build(rs: ResultSet, outdir: Path, embed: bool = False) -> dict:
    """Write figures, report.md and report.html into outdir; returns their paths."""
    from . import reports            # matplotlib: only once there are results to draw
    from .reports.common import NO_READING_NOTE
    outdir.mkdir(parents=True, exist_ok=True)
    sections = reports.sections(rs, outdir)   # (title, figures, section tables)
    for _, figs, _ in sections:
        for f in figs:
            if f.no_reading:
                f.reading += NO_READING_NOTE
    tables = [
        ("Environment", ["bench", "library", "ranks", "threads", "binding", "oversubscribed",
                         "hosts", "git", "runs"], environment_rows(rs)),
        ("Unsupported", ["bench", "MPI", "status", "reason", "points"], unsupported_rows(rs)),
        ("Failures", ["bench", "kind", "where", "message"], failure_rows(rs)),
    ]
    if rs.conformance:   # hmb conform records: the matrix and its notes (docs/conformance.md)
        from ..run.conform import matrix_rows
        header, rows, notes = matrix_rows(rs.conformance)
        tables += [("Conformance", header, rows),
                   ("Conformance notes", ["#", "check", "library", "reason", "reproducer"], notes)]
    per_bench = results_rows(rs)
    md = _markdown(rs, sections, tables, per_bench)
    page = _html(rs, sections, tables, per_bench, outdir, embed)
    (outdir / "report.md").write_text(md)
    (outdir / "report.html").write_text(page)
    return {"md": outdir / "report.md", "html": outdir / "report.html",
            "figures": [outdir / f.png for _, figs, _ in sections for f in figs],
            "readings": [(f.title, f.question, f.reading) for _, figs, _ in sections for f in figs]}


def _summary_line(rs: ResultSet) -> str:
    ok = sum(r.status == "ok" for r in rs.results)
    return (f"{len(rs.results)} results ({ok} ok) from {len(rs.runs)} runs in "
            f"{', '.join(Path(s).name for s in rs.sources)}; generated by hmb {__version__}.")


def _md_table(header, rows) -> str:
    if not rows:
        return "_none_\n"
    esc = md_cell   # results' text (a param value "[x](http://..)") stays text
    lines = ["| " + " | ".join(map(esc, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(esc, row)) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _markdown(rs, sections, tables, per_bench) -> str:
    out = ["# HMB report", "", _summary_line(rs), ""]
    for title, figs, section_tables in sections:
        out += [f"## {title}", ""]
        for f in figs:
            out += [f"### {f.title}", "", f"**Question:** {f.question}", "",
                    f"![{f.title}]({f.png})", "", f"**Reading:** {f.reading}", "",
                    f"([SVG]({f.svg}))", ""]
        for table_title, header, rows, note in section_tables:
            out += [f"### {table_title}", "", _md_table(header, rows), note, ""]
    for title, header, rows in tables:
        out += [f"## {title}", "", _md_table(header, rows)]
    out += ["## All results (median [95% CI])", ""]
    for bench, (header, rows) in per_bench.items():
        out += [f"### {bench}", "", _md_table(header, rows)]
    return "\n".join(out)


CSS = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
h1,h2{border-bottom:1px solid #ddd}.q{font-weight:600}.reading{background:#f3f6fa;padding:.5em;border-left:4px solid #4a7}
img{max-width:100%}table{border-collapse:collapse;font-size:85%;margin-bottom:1em}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}th{background:#eee}"""


def _html_table(header, rows) -> str:
    if not rows:
        return "<p><em>none</em></p>"
    h = "".join(f"<th>{html.escape(str(c))}</th>" for c in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{h}</tr>{body}</table>"


def _html(rs, sections, tables, per_bench, outdir: Path, embed: bool) -> str:
    e = html.escape
    out = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>HMB report</title>",
           f"<style>{CSS}</style></head><body><h1>HMB report</h1><p>{e(_summary_line(rs))}</p>"]
    for title, figs, section_tables in sections:
        out.append(f"<h2>{e(title)}</h2>")
        for f in figs:
            src = f.png
            if embed:
                src = "data:image/png;base64," + base64.b64encode((outdir / f.png).read_bytes()).decode()
            out.append(f"<h3>{e(f.title)}</h3><p class='q'>Question: {e(f.question)}</p>"
                       f"<img src='{src}' alt='{e(f.title)}'>"
                       f"<p class='reading'>Reading: {e(f.reading)}</p>"
                       f"<p><a href='{f.svg}'>SVG</a></p>")
        for table_title, header, rows, note in section_tables:
            out.append(f"<h3>{e(table_title)}</h3>{_html_table(header, rows)}<p>{e(note)}</p>")
    for title, header, rows in tables:
        out.append(f"<h2>{e(title)}</h2>{_html_table(header, rows)}")
    out.append("<h2>All results (median [95% CI])</h2>")
    for bench, (header, rows) in per_bench.items():
        out.append(f"<h3>{e(bench)}</h3>{_html_table(header, rows)}")
    out.append("</body></html>")
    return "\n".join(out)

