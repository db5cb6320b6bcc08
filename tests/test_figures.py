"""The one figure engine (hmb/present/figures.py) on planted tables: what a declaration expands to, the
lines it draws and the values they hold, computed by hand here."""
from __future__ import annotations

import pytest

import hmb
from hmb.data import descriptors
from hmb.present import figures as engine
from hmb.present.reports.common import figure_instances
from hmb.study import report_figures
from _planted import metric, result, run, write

# A halo3d descriptor as --describe gives it: serial adds no ratio (it is no paired mode of single).
HALO = descriptors.Bench(
    "halo3d", "patterns", "halo", (), tuple(descriptors.Metric(n, "MB/s", "", True, False, True) for n in (
        "throughput_single_MBps", "throughput_multiple_MBps", "throughput_serial_MBps", "ratio_multiple")),
    modes=(descriptors.Mode("single", True, True, ("throughput_single_MBps",)),
           descriptors.Mode("multiple", True, True, ("throughput_multiple_MBps", "ratio_multiple")),
           descriptors.Mode("serial", True, False, ("throughput_serial_MBps",))))


@pytest.fixture
def halo(tmp_path):
    """Two launches of halo3d at 10 ms, faces 64K and 1M: throughput per mode, one launch
    oversubscribed (ranks=2 threads=4 on the planted 2 CPUs)."""
    recs = []
    for rid, scale, over in (("a", 1.0, False), ("b", 3.0, True)):
        r = run(rid, "halo3d", threads=4, oversubscribed=over)
        r["options"].update({"compute": "10ms", "comm": "on"})
        recs.append(r)
        for size in (65536, 1048576):
            recs.append(result(rid, "halo3d", {"size_bytes": size}, {
                "throughput_single_MBps": metric(100.0 * scale, unit="MB/s", higher=True),
                "throughput_multiple_MBps": metric(200.0 * scale, unit="MB/s", higher=True),
                "throughput_serial_MBps": metric(50.0 * scale, unit="MB/s", higher=True),
                "ratio_multiple": metric(2.0, unit="ratio", higher=True)}))
    return hmb.load(write(tmp_path / "h.jsonl", recs))


def test_mode_y_is_one_metric_per_mode_of_the_descriptor_in_its_order(halo):
    fig = engine.expand({"id": "t", "title": "t", "bench": "halo3d", "x": "size_bytes",
                         "y": "throughput_{mode}_MBps"}, halo, {"halo3d": HALO})
    assert fig["y"] == ["throughput_single_MBps", "throughput_multiple_MBps", "throughput_serial_MBps"]
    assert fig["labels"]["throughput_serial_MBps"] == "serial" and fig["hue"] == "metric"
    ratio = engine.expand({"id": "r", "title": "r", "bench": "halo3d", "x": "size_bytes", "y": "ratio_{mode}"},
                          halo, {"halo3d": HALO})
    assert ratio["y"] == ["ratio_multiple"]            # only the modes that add it
    # without a descriptor: the modes the table's metric names hold
    bare = engine.expand({"id": "t", "title": "t", "bench": "halo3d", "x": "size_bytes",
                          "y": "throughput_{mode}_MBps"}, halo, {})
    assert sorted(bare["y"]) == sorted(fig["y"])


def test_a_point_is_the_median_over_launches_and_no_reading_when_one_is_not(halo):
    plan = engine.plan({"id": "t", "title": "t", "bench": "halo3d", "x": "size_bytes",
                        "y": "throughput_{mode}_MBps"}, halo, {"halo3d": HALO})
    single = next(ln for ln in plan.lines() if ln.name == "single")
    p = single.points[0]
    assert (p.x, p.median, p.launches) == (65536.0, 200.0, 2)            # median of 100 and 300
    assert (p.spread_lo, p.spread_hi) == (100.0, 300.0) and not p.reading   # launch b is oversubscribed
    assert (p.lo, p.hi) == pytest.approx((90.0, 330.0))                   # lowest to highest CI bound
    assert set(p.launch_medians) == {100.0, 300.0}


def test_over_is_the_ratio_to_the_reference_at_each_x(halo):
    plan = engine.plan({"id": "t", "title": "t", "bench": "halo3d", "x": "size_bytes",
                        "y": ["throughput_multiple_MBps", "throughput_single_MBps"], "hue": "metric",
                        "over": {"metric": "throughput_single_MBps"}}, halo, {"halo3d": HALO})
    (line,) = plan.lines()                   # the reference's own line is not drawn
    assert line.hue == "throughput_multiple_MBps"
    # multiple: launches 200 and 600 (median 400, CI bounds 180..660); single: 100 and 300 (200, 90..330)
    p = line.points[0]
    assert [q.median for q in line.points] == [2.0, 2.0]
    assert (p.lo, p.hi) == pytest.approx((180 / 330, 660 / 90))           # lowest over highest, and back
    assert (p.spread_lo, p.spread_hi) == pytest.approx((200 / 300, 600 / 100))
    assert not p.reading                      # a launch of either side is oversubscribed


def test_ymin_keeps_the_readings_and_puts_what_is_beyond_at_the_edge(tmp_path):
    recs = [run("a", "async")]
    for size, e in ((1024, 40.0), (65536, 20.0), (1048576, -1300.0)):
        recs.append(result("a", "async", {"size_bytes": size, "progress": "none"},
                           {"efficiency_pct": metric(e, lo=e - 1, hi=e + 1, unit="%", higher=True)}))
    df = hmb.load(write(tmp_path / "a.jsonl", recs))
    f, _ = engine.render({"id": "e", "title": "E", "bench": "async", "x": "size_bytes", "y": "efficiency_pct",
                          "ymin": -200.0, "ymax": 110.0}, df)
    ax = f.axes[0]
    lo, hi = ax.get_ylim()
    assert -200.0 <= lo < 20.0 and 40.0 < hi <= 110.0
    edge = [ln for ln in ax.get_lines() if ln.get_marker() == "v"]
    assert len(edge) == 1 and list(edge[0].get_xdata()) == [1048576] and list(edge[0].get_ydata()) == [lo]
    assert "-1300" in [t.get_text() for t in ax.texts]


def test_a_report_figure_per_value_of_its_per_column(halo):
    decl = report_figures()["halo3d_throughput"]
    (one,) = figure_instances(decl, halo)
    assert one["id"] == "halo3d_throughput_10ms" and one["title"].endswith("compute 10ms")
    assert one["where"] == {"comm": "on", "compute": "10ms"}


def test_panels_by_several_columns_one_per_combination_in_numeric_order_over_included(tmp_path):
    """seed004's figures and tables panel by scale and progress mode (`panels` a list): one panel per
    combination, 28 ranks before 224 (as text '224' < '28'), and `over` read within each panel."""
    recs = []
    for rid, ranks in (("a", 28), ("b", 224)):
        recs.append(run(rid, "async", ranks=ranks))
        for prog, e in (("none", 10.0), ("test:10", 20.0)):
            for size in (32, 1024):
                recs.append(result(rid, "async", {"size_bytes": size, "progress": prog},
                                   {"efficiency_mean_pct": metric(e + ranks + size / 1024, unit="%")}))
    df = hmb.load(write(tmp_path / "a.jsonl", recs))
    fig = {"id": "t", "title": "t", "bench": "async", "x": "size_bytes", "y": "efficiency_mean_pct",
           "panels": ["ranks", "progress"], "labels": {"none": "E_0"}}
    plan = engine.plan(fig, df)
    assert [p.title for p in plan.panels] == ["ranks=28, E_0", "ranks=28, progress=test:10",
                                              "ranks=224, E_0", "ranks=224, progress=test:10"]
    assert [[pt.median for pt in p.lines[0].points] for p in plan.panels][2] == [234.03125, 235.0]
    # over: test:10 over none at each size, within each panel (224 ranks: 244.03/234.03, 245/235)
    ref = engine.plan({**fig, "panels": ["ranks"], "hue": "progress", "over": {"progress": "none"}}, df)
    assert [p.title for p in ref.panels] == ["ranks=28", "ranks=224"]
    (line,) = ref.panels[1].lines
    assert [pt.median for pt in line.points] == pytest.approx([244.03125 / 234.03125, 245 / 235])


@pytest.mark.parametrize("logy", [True, False])
def test_a_median_beyond_any_axis_is_drawn_at_the_edge_not_a_traceback(tmp_path, logy):
    """hmb report on a result whose median is 1e308 ended in matplotlib's "Axis limits cannot be
    NaN or Inf": the axis spans the drawable readings, the far point sits at its edge."""
    import matplotlib
    matplotlib.use("Agg")
    recs = [run("a", "p2p")]
    for size, lat in ((8, 1.5), (1024, 1e308), (65536, 12.0)):
        recs.append(result("a", "p2p", {"size_bytes": size}, {"latency_us": metric(lat, unit="us")}))
    df = hmb.load(write(tmp_path / "big.jsonl", recs))
    decl = {"id": "f", "number": "Fig. 1", "title": "latency", "bench": "p2p", "x": "size_bytes", "y": "latency_us",
            "logy": logy}
    f, note = engine.render(decl, df)
    lo, hi = f.axes[0].get_ylim()
    assert 0 < hi < 1e100 and lo < 1.5 and hi > 12.0
    f.savefig(tmp_path / "f.png")         # draws, no error
    only = hmb.load(write(tmp_path / "only.jsonl", [recs[0], recs[2]]))
    f, _ = engine.render(decl, only)       # nothing the axis can span: a neutral range
    assert all(abs(v) < 1e100 for v in f.axes[0].get_ylim())
    f.savefig(tmp_path / "g.png")


def test_a_ci_band_as_wide_as_the_panel_is_drawn_as_its_edges(tmp_path):
    """seed000 Fig. 4 in the demo: a 95 % CI over few samples filled the panel and hid the lines;
    such a band is drawn as two dotted edges, and the legend says so."""
    import matplotlib
    matplotlib.use("Agg")
    recs = [run("a", "p2p")]
    for size, lat in ((8, 1.0), (1024, 1.2), (65536, 1.1)):
        m = metric(lat, unit="us")
        m["ci_lo"], m["ci_hi"] = lat / 1000.0, lat * 1000.0
        recs.append(result("a", "p2p", {"size_bytes": size}, {"latency_us": m}))
    df = hmb.load(write(tmp_path / "w.jsonl", recs))
    decl = {"id": "f", "number": "Fig. 1", "title": "latency", "bench": "p2p", "x": "size_bytes", "y": "latency_us",
            "logy": True}
    f, _ = engine.render(decl, df)
    ax = f.axes[0]
    assert not ax.collections, "a band as wide as the panel was filled"
    assert sum(ln.get_linestyle() == ":" for ln in ax.get_lines()) == 2
    assert any("as wide as the panel" in t.get_text() for t in f.legends[0].get_texts())
