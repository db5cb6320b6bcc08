"""`hmb report`: figures (PNG + SVG), report.md and report.html from JSON Lines results.

Each figure answers a question stated above it and carries a one-line reading computed from
the data below it. The figures of each benchmark come from its module in hmb.present.reports
(or the generic one, from its descriptor); this module puts the sections together, adds the
tables every report has (environment, unsupported points, failures, all results) and renders
Markdown and HTML. Every table reads the tidy table (hmb.data.tidy.Table).
"""
from __future__ import annotations

import base64
import html
import math
from collections import defaultdict
from pathlib import Path

from .. import __version__
from ..data import tidy
from ..run.conform import matrix_rows
from .format import fmt_num, fmt_size, md_cell
from .reports import async_, conform, match, mt, p2p, part, patterns, proto, stencil3d
from .reports.common import FAMILIES, NO_READING_NOTE, figure_instances, render
from .reports.declared import report_figures
from .reports.generic import generic_figures

# The benchmarks' report modules: each registers its section (reports.common.register) when imported.
SECTIONS = (async_, conform, match, mt, p2p, part, patterns, proto, stencil3d)


def bench_sections(t: tidy.Table, outdir: Path) -> list:
    """(title, figures, tables) per benchmark in the results: registered families first, in
    registration order, then the others by name."""
    benches = set(t.df["bench"]) | (set(t.unsupported["bench"]) if not t.unsupported.empty else set())
    out = []
    for bench in list(FAMILIES) + sorted(benches - set(FAMILIES)):
        if bench not in benches:
            continue
        fam = FAMILIES.get(bench)
        desc = t.descriptors.get(bench)
        title = fam.title if fam else f"{desc.summary} ({bench})" if desc and desc.summary else bench
        figs = bench_figures(t, outdir, bench)
        tables = fam.tables(t) if fam and fam.tables else []
        if figs or tables:
            out.append((title, figs, tables))
    return out


def bench_figures(t: tidy.Table, outdir: Path, bench: str) -> list:
    """A benchmark's figures drawn into outdir/figures with their readings: those declared for it
    in figures.toml, else (a benchmark with no module here) one per summary-worthy metric."""
    decls = [d for d in report_figures().values() if d["bench"] == bench] or \
        ([] if bench in FAMILIES else generic_figures(bench, t.descriptors.get(bench), t.df))
    return [f for d in decls for inst in figure_instances(d, t.df)
            if (f := render(inst, d["id"], t.df, t.unsupported, t.descriptors, outdir)) is not None]


def environment_rows(t: tidy.Table) -> list[list[str]]:
    launches = {ln.get("tag"): ln for ln in t.launches}
    groups = defaultdict(int)
    for run in t.runs.values():
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


def unsupported_rows(t: tidy.Table) -> list[list[str]]:
    groups = defaultdict(list)
    for r, _ in t.records(t.unsupported):
        groups[(r.bench, r.mpi, r.status, r.record.get("reason", "?"))].append(r)
    rows = []
    for (bench, mpi, status, reason), rr in sorted(groups.items()):
        pts = sorted({", ".join(f"{k}={v}" for k, v in sorted(r.params.items()) if k != "size_bytes")
                      for r in rr})
        rows.append([bench, mpi, status, reason, "; ".join(pts)[:160] + f" ({len(rr)} points)"])
    return rows


def failure_rows(t: tidy.Table) -> list[list[str]]:
    rows = [[f.get("bench", "?"), f.get("kind", "?"), str(f.get("params", "")), f.get("message", "")]
            for f in t.failures]
    rows += [[ln.get("point", {}).get("bench", "?"), f"launch {ln.get('status')} (exit {ln.get('rc')})",
              ln.get("tag", ""), (ln.get("why") or " ".join(ln.get("command", [])))[:160]]
             for ln in t.launches if ln.get("status") in ("failed", "incomplete")]
    return rows


def results_rows(t: tidy.Table) -> dict:
    """bench -> (header, rows): every point, first metrics' medians [CI] (repeats)."""
    df = t.df
    by_bench = defaultdict(lambda: defaultdict(list))    # bench -> point -> positions of its rows
    for at, (bench, items, noise, mpi) in enumerate(t.keys(df)):
        by_bench[bench][(mpi, noise, items)].append(at)
    detail = t.detail_of(df)
    result, order, record = detail["result"].tolist(), detail["order"].tolist(), detail["record"].tolist()
    metric, median = df["metric"].tolist(), df["median"].tolist()
    lo, hi, unread = df["ci_lo"].tolist(), df["ci_hi"].tolist(), tidy.no_reading(df).tolist()
    out = {}
    for bench, groups in sorted(by_bench.items()):
        # The point's params, and whatever else of its identity differs between rows.
        param_names = {k for ats in groups.values() for at in ats for k in (record[at].get("params") or {})}
        shown = param_names | set(tidy.varying([dict(items) for _, _, items in groups]))
        metrics = []
        for ats in groups.values():
            first = sorted((order[at], at) for at in ats if result[at] == result[ats[0]])   # in its record's order
            # a metric no point of this set measured (halo3d's other modes) takes no column
            for _, at in first:
                if metric[at] not in metrics and not math.isnan(median[at]):
                    metrics.append(metric[at])
        metrics = metrics[:6]
        header = ["MPI", "noise", "parameters"] + metrics + ["repeats"]
        rows = []
        for (mpi, noise, params), ats in sorted(groups.items(), key=lambda kv: _sort_key(kv[0])):
            row = [mpi, noise, ", ".join(f"{k}={fmt_size(v) if k == 'size_bytes' else v}" for k, v in params
                                         if k in shown)]
            for m in metrics:
                on = [at for at in ats if metric[at] == m]
                c = tidy.Launches.of([median[at] for at in on], [lo[at] for at in on], [hi[at] for at in on],
                                     [unread[at] for at in on])
                row.append("" if not c.launches else f"{fmt_num(c.median)} (no valid CI)" if math.isnan(c.lo)
                           else f"{fmt_num(c.median)} [{fmt_num(c.lo)}, {fmt_num(c.hi)}]")
            row.append(str(len({result[at] for at in ats})))
            rows.append(row)
        out[bench] = (header, rows)
    return out


def _sort_key(k):
    mpi, noise, params = k
    return (mpi, noise, tuple((n, int(v)) if v.lstrip("-").isdigit() else (n, v) for n, v in params))


def build(t: tidy.Table, outdir: Path, embed: bool = False) -> dict:
    """Write figures, report.md and report.html into outdir; returns their paths."""
    outdir.mkdir(parents=True, exist_ok=True)
    sections = bench_sections(t, outdir)   # (title, figures, section tables)
    for _, figs, _ in sections:
        for f in figs:
            if f.no_reading:
                f.reading += NO_READING_NOTE
    tables = [
        ("Environment", ["bench", "library", "ranks", "threads", "binding", "oversubscribed",
                         "hosts", "git", "runs"], environment_rows(t)),
        ("Unsupported", ["bench", "MPI", "status", "reason", "points"], unsupported_rows(t)),
        ("Failures", ["bench", "kind", "where", "message"], failure_rows(t)),
    ]
    if t.conformance:   # hmb conform records: the matrix and its notes (docs/conformance.md)
        header, rows, notes = matrix_rows(t.conformance)
        tables += [("Conformance", header, rows),
                   ("Conformance notes", ["#", "check", "library", "reason", "reproducer"], notes)]
    per_bench = results_rows(t)
    md = _markdown(t, sections, tables, per_bench)
    page = _html(t, sections, tables, per_bench, outdir, embed)
    (outdir / "report.md").write_text(md)
    (outdir / "report.html").write_text(page)
    return {"md": outdir / "report.md", "html": outdir / "report.html",
            "figures": [outdir / f.png for _, figs, _ in sections for f in figs],
            "readings": [(f.title, f.question, f.reading) for _, figs, _ in sections for f in figs]}


def _summary_line(t: tidy.Table) -> str:
    return (f"{t.results} results ({t.ok} ok) from {len(t.runs)} runs in "
            f"{', '.join(Path(s).name for s in t.sources)}; generated by hmb {__version__}.")


def _md_table(header, rows) -> str:
    if not rows:
        return "_none_\n"
    esc = md_cell   # results' text (a param value "[x](http://..)") stays text
    lines = ["| " + " | ".join(map(esc, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(esc, row)) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _markdown(t, sections, tables, per_bench) -> str:
    out = ["# HMB report", "", _summary_line(t), ""]
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


def _html(t, sections, tables, per_bench, outdir: Path, embed: bool) -> str:
    e = html.escape
    out = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>HMB report</title>",
           f"<style>{CSS}</style></head><body><h1>HMB report</h1><p>{e(_summary_line(t))}</p>"]
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

