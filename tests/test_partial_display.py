"""A node scored by a failing-first screen alone (a partial result: a lower bound, tests not run)
as `treesearch show`, `graph.json` and the run page show it: a real failing-first search whose
one child passes two tests, still fails one and leaves one not run."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from report_fixtures import browser, open_page

from treesearch.app import SearchOutcome, run_from_config
from treesearch.cli import main
from treesearch.report.html import read_page_data
from treesearch.search import graph as G
from treesearch.search import render

ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
TESTS = "".join(
    f"from m import {n}\n\n\ndef test_{n}():\n    assert {n}() == {v}\n\n\n"
    for n, v in zip("abcd", (1, 2, 3, 4), strict=True)
)


def module(a: int = 0, b: int = 0, c: int = 0, d: int = 4) -> str:
    return "".join(
        f"def {n}():\n    return {v}\n\n\n" for n, v in zip("abcd", (a, b, c, d), strict=True)
    )


@pytest.fixture(scope="module")
def partial_run(tmp_path_factory: pytest.TempPathFactory) -> SearchOutcome:
    """The root fails test_a, test_b, test_c; ``fix-ab`` fixes a and b: its screen runs the
    parent's three failures, stops at test_c (still failing) and leaves test_d not run."""
    tmp = tmp_path_factory.mktemp("partial")
    ws = tmp / "ws"
    (ws / "tests").mkdir(parents=True)
    (ws / "m.py").write_text(module())
    (ws / "tests" / "test_m.py").write_text(TESTS)
    (ws / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    cfg: dict[str, Any] = {
        "workspace": {"path": str(ws)},
        "store": {"home": str(tmp / "home")},
        "strategies": {
            "fix-ab": {
                "kind": "scripted",
                "steps": [{"write": "m.py", "content": module(a=1, b=2)}],
            }
        },
        "scoring": {
            "search_tests": {
                "command": f"{sys.executable} -m pytest -q -p no:cacheprovider tests",
                "timeout": 120,
                "env": ENV,
            },
            "order": "failing_first",
            "warm": "off",
        },
        "search": {"policy": "best_first", "seed": 1, "budget": {"expansions": 1}},
        "sandbox": {"writable": [str(tmp)]},
        "output": {"runs_dir": str(tmp / "runs"), "instance_id": "suite"},
    }
    out = run_from_config(cfg, base_dir=tmp)
    [child] = list(out.graph.successors(G.root_of(out.graph)))
    assert out.graph.nodes[child].get("partial") is True, "the search must leave a partial node"
    return out


def _child(out: SearchOutcome) -> str:
    [child] = list(out.graph.successors(G.root_of(out.graph)))
    return str(child)


def test_show_prints_a_partial_score_as_a_lower_bound_with_what_is_known(
    partial_run: SearchOutcome, capsys: pytest.CaptureFixture[str]
) -> None:
    child = _child(partial_run)
    assert main(["show", str(partial_run.run_dir)]) == 0
    text = capsys.readouterr().out
    [line] = [x for x in text.splitlines() if child[:10] in x]
    # Known: 0.500 (the test not run counted as failed); at most 0.750 (counted as passed).
    assert "score 0.500..0.750 (partial: 2 passed, 1 failed known, 1 not run)" in line
    assert "score 0.500 " not in line
    root_line = text.splitlines()[0]
    assert G.root_of(partial_run.graph)[:10] in root_line
    assert "score 0.250 " in root_line and ".." not in root_line  # the root ran fully
    assert "(a..b marks a partial score" in text
    # The dot export labels it too.
    assert '\\nscore 0.500..0.750 (partial)"' in render.export(partial_run.graph, "dot")

    # graph.json keeps the mark and the known counts, and stays the same bytes when rebuilt.
    raw = (partial_run.run_dir / "graph.json").read_text()
    nodes = {n["id"]: n for n in json.loads(raw)["nodes"]}
    node = nodes[child]
    assert node["partial"] is True and node["score"] == pytest.approx(0.5)
    assert node["bound"] == pytest.approx(0.75) and node["tests"]["upper"] == pytest.approx(0.75)
    known = {k: node["tests"][k] for k in ("partial", "known_passed", "known_failed", "not_run")}
    assert known == {"partial": True, "known_passed": 2, "known_failed": 1, "not_run": 1}
    assert "partial" not in nodes[G.root_of(partial_run.graph)]
    assert raw == G.to_json(partial_run.graph)


def test_run_page_draws_a_partial_node_as_an_open_circle_with_its_known_counts(
    partial_run: SearchOutcome,
) -> None:
    child = _child(partial_run)
    page_path = partial_run.run_dir / "report.html"
    data = read_page_data(page_path)
    assert data is not None
    by_id = {n["id"]: n for n in data["nodes"]}
    assert by_id[child]["partial"] == {
        "known_passed": 2,
        "known_failed": 1,
        "not_run": 1,
        "reason": "tests/test_m.py::test_c failed in the parent and still fails",
        "upper": 0.75,
    }
    assert by_id[G.root_of(partial_run.graph)]["partial"] is None

    with browser() as b, open_page(b, page_path) as (page, problems):
        node = page.locator(f'g.node[data-node="{child}"]')
        assert "partial" in (node.get_attribute("class") or "").split()
        assert node.locator("circle").first.get_attribute("fill") == "#ffffff"
        assert node.locator("circle.partial-ring").count() == 1
        root = page.locator(f'g.node[data-node="{partial_run.best}"]')
        assert "partial" not in (root.get_attribute("class") or "").split()
        assert root.locator("circle").first.get_attribute("fill") != "#ffffff"
        tip = node.locator("title").first.text_content() or ""
        assert "score 0.500..0.750" in tip
        assert "partial: 2 passed, 1 failed known, 1 not run" in tip
        node.locator("circle").first.click()
        panel = page.locator("#node-panel")
        assert panel.get_attribute("data-selected") == child
        detail = panel.locator(".partial-detail").inner_text()
        assert "partial: 2 passed, 1 failed known, 1 not run" in detail
        assert "test_c failed in the parent and still fails" in detail
        assert "0.500..0.750" in panel.locator("table").first.inner_text()
        assert "partial: score lower..upper" in page.locator(".legend").inner_text()
        assert problems == []
