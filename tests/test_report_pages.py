"""The report pages opened in a real headless Chromium (Debian's, driven by playwright): real
searches, a real eval, and a compare directory around real run directories."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from eval_fixtures import calc_repo, eval_config, write_jsonl
from report_fixtures import browser, graph_nodes, open_page, run_search

from treesearch.app import SearchOutcome
from treesearch.eval import run_eval
from treesearch.report import write_report
from treesearch.report.batch_page import curve, first_plausible


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SearchOutcome]:
    """Two real searches of the two-bug project: breadth-first (it meets a state by two paths,
    a transposition) and best-first."""
    tmp = tmp_path_factory.mktemp("report-runs")
    return {
        "bfs": run_search(tmp, "bfs", policy="bfs"),
        "best_first": run_search(tmp, "best_first", policy="best_first"),
    }


def _best_patch_lines(run_dir: Path) -> list[str]:
    patch = (run_dir / "best.patch").read_text()
    return [x for x in patch.splitlines() if x.startswith(("+", "-")) and x[1:2] == " "]


def test_run_page_draws_every_node_and_click_on_best_node_shows_its_diffs(
    runs: dict[str, SearchOutcome],
) -> None:
    out = runs["bfs"]
    page_path = out.run_dir / "report.html"
    assert page_path.is_file(), "treesearch run writes report.html at the end"
    nodes = graph_nodes(out.run_dir)
    with browser() as b, open_page(b, page_path) as (page, problems):
        assert page.locator("[data-node]").count() == len(nodes)
        drawn = set(page.locator("[data-node]").evaluate_all("els => els.map(e => e.dataset.node)"))
        assert drawn == {n["id"] for n in nodes}
        # The transposition (the fixed state reached from both one-fix states) is drawn, and the
        # no-ops too.
        assert page.locator("#tree-svg path.edge.transposition").count() == 1
        assert page.locator("#tree-svg path.edge.noop").count() >= 1
        assert page.locator("#tree-svg path.edge.on-best-path").count() == len(
            out.summary["best"]["path"]
        )
        # Nothing is shown before a click; the click on the best node shows its diffs.
        assert page.locator("#node-panel .diff-root").count() == 0
        page.locator(f'[data-node="{out.best}"] circle').first.click()
        panel = page.locator("#node-panel")
        assert panel.get_attribute("data-selected") == out.best
        root_diff = panel.locator(".diff-root pre").inner_text()
        for line in _best_patch_lines(out.run_dir):
            assert line in root_diff
        parent_diff = panel.locator(".diff-parent pre").first.inner_text()
        assert "+    return a" in parent_diff
        assert "passed" in panel.locator(".tests-summary").inner_text()
        # The transcript of the edge into it: the scripted step's replacement.
        panel.locator("details.transcript summary").first.click()
        assert "replace" in panel.locator(".transcript-text pre").first.inner_text()
        # The summary box: budget used and the time per phase.
        assert "expansions" in page.locator("#budget-table").inner_text()
        assert "score" in page.locator("#phase-table").inner_text()
        assert problems == []


def _compare_dir(tmp: Path, runs: dict[str, SearchOutcome]) -> Path:
    """A compare directory following ``compare.json``'s schema around the real run directories
    (copied without their pages: ``treesearch report`` writes the missing ones)."""
    cmp_dir = tmp / "cmp"
    outcomes: list[dict[str, Any]] = []
    curves: dict[str, list[list[float]]] = {}
    contenders = []
    for name, out in runs.items():
        rel = f"runs/{name}/maths/seed-0"
        shutil.copytree(out.run_dir, cmp_dir / rel, ignore=shutil.ignore_patterns("report.html"))
        fp = first_plausible(cmp_dir / rel)
        plausible = fp["test_runs"] is not None
        outcomes.append(
            {
                "contender": name,
                "instance_id": "maths",
                "seed": 0,
                "status": "resolved" if plausible else "unresolved",
                "resolved": plausible,
                "plausible": plausible,
                "test_runs": out.usage.test_runs,
                "test_runs_to_first_plausible": fp["test_runs"],
                "tokens": 0,
                "wall_seconds": out.summary["seconds"],
                "run_dir": rel,
            }
        )
        curves[name] = curve([fp["test_runs"]], 1, out.usage.test_runs)
        contenders.append(
            {
                "name": name,
                "n": 1,
                "resolved": int(plausible),
                "resolved_rate": float(plausible),
                "resolved_ci": [float(plausible), float(plausible)],
                "plausible": int(plausible),
                "plausible_rate": float(plausible),
                "plausible_ci": [float(plausible), float(plausible)],
                "errors": 0,
                "mean_test_runs_to_first_plausible": fp["test_runs"],
                "mean_tokens_to_first_plausible": 0,
                "mean_cost_usd_to_first_plausible": 0.0,
                "mean_wall_seconds": out.summary["seconds"],
            }
        )
    data = {
        "spec": {"contenders": [{"name": n} for n in runs]},
        "budget": {"expansions": 12},
        "seeds": [0],
        "instances": ["maths"],
        "contenders": contenders,
        "pairs": [
            {
                "a": "bfs",
                "b": "best_first",
                "wins": 0,
                "losses": 0,
                "ties": 1,
                "p_value": 1.0,
                "test": "sign",
            }
        ],
        "curves": {"test_runs": curves, "tokens": {}},
        "outcomes": outcomes,
        "extra_key": "tolerated",
    }
    (cmp_dir / "compare.json").write_text(json.dumps(data))
    return cmp_dir


def test_compare_page_has_one_curve_per_contender_and_links_to_run_pages(
    tmp_path: Path, runs: dict[str, SearchOutcome]
) -> None:
    cmp_dir = _compare_dir(tmp_path, runs)
    written = write_report(cmp_dir)
    assert written.kind == "compare" and written.path == cmp_dir / "report.html"
    for name in runs:  # the run pages that were missing are written too
        assert (cmp_dir / f"runs/{name}/maths/seed-0/report.html").is_file()
    with browser() as b, open_page(b, written.path) as (page, problems):
        curves = page.locator('svg[data-x-label="test runs"] path[data-contender]')
        assert curves.count() == 2
        names = curves.evaluate_all("els => els.map(e => e.dataset.contender)")
        assert sorted(names) == sorted(runs)
        assert page.locator("#table-contenders tbody tr").count() == 2
        assert page.locator("#table-pairs tbody tr").count() == 1
        assert problems == []
        # The link to a run's page is relative and opens the run's tree.
        link = page.locator('#table-outcomes a:text("maths")').first
        assert link.get_attribute("href") == "runs/bfs/maths/seed-0/report.html"
        link.click()
        page.wait_for_load_state("load")
        expected = graph_nodes(cmp_dir / "runs/bfs/maths/seed-0")
        assert page.locator("[data-node]").count() == len(expected)
        assert problems == []


def test_eval_page_shows_results_curve_and_links_to_run_pages_with_diffs(tmp_path: Path) -> None:
    inst = calc_repo(tmp_path)
    instances = write_jsonl(tmp_path / "inst.jsonl", [inst])
    ev = tmp_path / "ev"
    out = run_eval(eval_config(tmp_path), instances, repos=tmp_path / "repos", out=ev, workers=1)
    (row,) = out.rows
    assert row["status"] == "resolved", row
    written = write_report(ev)
    assert written.kind == "eval"
    run_dir = ev / row["run_dir"]
    with browser() as b, open_page(b, written.path) as (page, problems):
        assert page.locator("#table-instances tbody tr").count() == 1
        assert "resolved" in page.locator("#table-instances").inner_text()
        assert page.locator("path[data-contender]").count() == 1
        assert problems == []
        page.locator(f'#table-instances a:text("{inst["instance_id"]}")').click()
        page.wait_for_load_state("load")
        assert page.locator("[data-node]").count() == len(graph_nodes(run_dir))
        # The instance's store lived in a scratch folder removed since: its diffs were embedded
        # when the search wrote the page.
        best = json.loads((run_dir / "summary.json").read_text())["best"]["tree"]
        page.locator(f'[data-node="{best}"] circle').first.click()
        assert "+    return a + b" in page.locator("#node-panel .diff-root pre").inner_text()
        assert problems == []
