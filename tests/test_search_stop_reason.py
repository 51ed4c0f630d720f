"""Which reason a search gives when several hold at once: a perfect score found by the last
expansion the budget allowed says ``perfect_score`` (with ``stop_on_perfect``), not the budget.
Controller doubles, and real searches (store, scripted agents, pytest, worker processes)."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from treesearch.app import run_from_config
from treesearch.search.budget import Budget
from treesearch.search.controller import Controller, Strategy
from treesearch.search.params import make_policy
from treesearch.testing import FunctionScorer, MemorySink, MemoryStore, ScriptedAgent

# ------------------------------------------------------------------ the controller, with doubles


def _value(files: Mapping[str, str]) -> float:
    m = re.search(r"x = (\d+)", files.get("a.py", ""))
    return int(m.group(1)) / 3 if m else 0.0


def _search(tmp_path: Path, budget: Budget, *, stop_on_perfect: bool) -> Any:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("x = 0\n")
    agent = ScriptedAgent([{"write": "a.py", "content": "x = 3\n"}])  # perfect at once
    ctl = Controller(
        store=MemoryStore(ws),
        strategies={"fix": Strategy("fix", {})},
        make_agent=lambda st: agent,
        scorer=FunctionScorer(_value),
        policy=make_policy("bfs"),
        budget=budget,
        stop_on_perfect=stop_on_perfect,
        sink=MemorySink(),
    )
    ctl.start()
    return ctl.run()


@pytest.mark.parametrize(
    "budget,spent",
    [(Budget(expansions=1), "expansions"), (Budget(expansions=None, test_runs=2), "test_runs")],
)
def test_perfect_score_on_the_last_expansion_the_budget_allows_is_the_stop_reason(
    tmp_path: Path, budget: Budget, spent: str
) -> None:
    out = _search(tmp_path, budget, stop_on_perfect=True)
    assert out.best_score == 1.0 and out.usage.expansions == 1
    assert out.stop_reason == "perfect_score"


@pytest.mark.parametrize(
    "budget,spent",
    [(Budget(expansions=1), "expansions"), (Budget(expansions=None, test_runs=2), "test_runs")],
)
def test_without_stop_on_perfect_the_spent_budget_is_the_stop_reason(
    tmp_path: Path, budget: Budget, spent: str
) -> None:
    out = _search(tmp_path, budget, stop_on_perfect=False)
    assert out.best_score == 1.0 and out.usage.expansions == 1
    assert out.stop_reason == spent


# ------------------------------------------------------------------ real searches, 1 and 2 workers


def _project(root: Path) -> Path:
    proj = root / "proj"
    proj.mkdir(parents=True)
    (proj / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (proj / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    (proj / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    return proj


def _config(tmp_path: Path, budget: dict[str, Any], workers: int) -> dict[str, Any]:
    fix = {"replace": "calc.py", "old": "return a - b", "new": "return a + b"}
    return {
        "workspace": {"path": str(_project(tmp_path))},
        "store": {"home": str(tmp_path / "home")},
        "strategies": {"fix": {"kind": "scripted", "steps": [fix]}},
        "scoring": {
            "search_tests": {
                "command": f"{sys.executable} -m pytest -q",
                "timeout": 60,
                "env": {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
            }
        },
        "search": {"policy": "bfs", "seed": 0, "workers": workers, "budget": budget},
        "output": {"runs_dir": str(tmp_path / "runs")},
    }


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize(
    "budget", [{"expansions": 1}, {"expansions": None, "test_runs": 2}], ids=["expansions", "runs"]
)
def test_real_search_whose_only_expansion_is_perfect_stops_on_perfect_score(
    tmp_path: Path, budget: dict[str, Any], workers: int
) -> None:
    out = run_from_config(_config(tmp_path, budget, workers), base_dir=tmp_path)
    assert out.best_score == 1.0 and out.usage.expansions == 1
    assert out.stop_reason == "perfect_score"
    assert out.summary["stop_reason"] == "perfect_score"
