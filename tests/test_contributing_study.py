"""docs/contributing.md, walked: its TOML blocks are added, as its steps say, to a temporary copy
of a shipped study, and the toy figure and the toy claim must appear in that study's report
(`hmb study report`'s study.md and figures/) drawn and judged from planted results: the figure
with the lines and medians planted, the claim agreeing on one table and differing on another."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import hmb
from hmb.present import figures as engine
from hmb import study as hstudy
from hmb.study import claims
from hmb.study import cli as study_cli
from _planted import metric, result, run, write

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "contributing.md"


def guide_block(section: str) -> str:
    """The first ```toml block under the guide's heading `section`."""
    text = GUIDE.read_text()
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```toml\n(.*?)```", body, re.S)
    assert block, f"no TOML block under '## {section}' in {GUIDE}"
    return "\n".join(line.strip() for line in block.group(1).splitlines()) + "\n"


FIGURE, CLAIM = guide_block("Adding a study figure"), guide_block("Adding a claim")
FIG_ID = re.search(r'^id = "([^"]+)"', FIGURE, re.M).group(1)


def toy_study(tmp_path: Path) -> Path:
    """seed000 with the guide's figure and claim, the figure's id added to the part bench's figures."""
    text = (hstudy.studies_dir() / "seed000-partitioned.toml").read_text()
    first = 'figures = ["fig4"]'
    assert first in text
    text = text.replace(first, f'figures = ["fig4", "{FIG_ID}"]', 1)
    path = tmp_path / "toy.toml"
    path.write_text(text + "\n" + FIGURE + "\n" + CLAIM)
    return path


# availability planted per (partitions, size) in each of two launches; agree: 4 partitions over 1
# reads 0.8 / 0.4 = 2.0 >= 1.5 x 0.9; differ: 0.42 / 0.4 = 1.05.
AGREE = {(1, 65536): (0.38, 0.42, 0.40), (4, 65536): (0.78, 0.82, 0.80), (1, 1048576): (0.40, 0.40, 0.40),
         (4, 1048576): (0.8, 0.8, 0.8)}
DIFFER = {(1, 65536): (0.38, 0.42, 0.40), (4, 65536): (0.40, 0.44, 0.42), (1, 1048576): (0.40, 0.40, 0.40),
          (4, 1048576): (0.42, 0.42, 0.42)}


def planted(path: Path, values: dict) -> Path:
    recs = []
    for launch in (0, 1, 2):        # a verdict rests on three launches
        rid = f"r{launch}"
        r = run(rid, "part")
        r["options"].update({"compute": "10ms", "cache": "hot"})
        recs.append(r)
        for (p, size), by_launch in values.items():
            recs.append(result(rid, "part", {"size_bytes": size, "partitions": p},
                               {"availability": metric(by_launch[launch], unit="ratio", higher=True)}))
    return write(path, recs)


def test_the_guide_s_figure_appears_drawn_in_the_study_report(tmp_path):
    study = hstudy.load_file(toy_study(tmp_path))          # schema and cross-references hold
    fig = study.figure(FIG_ID)
    assert FIG_ID in study.benches[0]["figures"]
    results = planted(tmp_path / "results.jsonl", AGREE)
    text, _ = study_cli.report(study, [results], tmp_path, figures_only=[FIG_ID])
    png = tmp_path / "figures" / f"{FIG_ID}.png"
    assert png.is_file() and png.read_bytes()[:4] == b"\x89PNG"
    assert f"![{fig['number']}](figures/{FIG_ID}.png)" in text and "3 launches" in text
    # what it drew: one line per size, the partitions along x, each point the median of 3 launches
    plan = engine.plan(fig, hmb.load(results))
    got = {ln.name: [(p.x, round(p.median, 3), p.launches) for p in ln.points] for ln in plan.lines()}
    assert got == {"64K": [(1.0, 0.4, 3), (4.0, 0.8, 3)], "1M": [(1.0, 0.4, 3), (4.0, 0.8, 3)]}


@pytest.mark.parametrize("values, verdict", [(AGREE, claims.AGREES), (DIFFER, claims.DIFFERS)])
def test_the_guide_s_claim_is_judged_in_the_study_report(tmp_path, values, verdict):
    study = hstudy.load_file(toy_study(tmp_path))
    text, verdicts = study_cli.report(study, [planted(tmp_path / "results.jsonl", values)], tmp_path,
                                      figures_only=[FIG_ID])
    (v,) = [v for v in verdicts if v.claim.get("figure_id") == FIG_ID]
    assert v.verdict == verdict, v
    row = next(line for line in text.splitlines() if v.claim["quote"] in line)
    assert f"| {verdict} |" in row and "| MPICH |" in row
