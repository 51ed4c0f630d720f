"""Repair searches without waste: a search stops choosing a (node, strategy) pair whose agent said
nothing is left to try there, and a parallel search runs attempts of one node at once when the
agent chooses by node and attempt alone (ranked mutation). Real mutation agent, real pytest
runs, real git store, real worker processes."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest

from treesearch.agents import attempts_independent
from treesearch.app import resume, run_from_config
from treesearch.search import parallel
from treesearch.search.batch import next_to_send
from treesearch.search.graph import root_of, to_json
from treesearch.search.policies import Choice

ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
FLAG = "def on(x):\n    return x > 1\n"
# No single edit of `x > 1` (comparison swaps, new constants) makes on(1) return "yes".
FLAG_TESTS = "from flag import on\n\n\ndef test_on():\n    assert on(1) == 'yes'\n"


def config(tmp_path: Path, order: str = "ranked", **search: Any) -> dict[str, Any]:
    project = tmp_path / "bug"
    if not project.exists():
        for rel, text in {
            "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["."]\n',
            "flag.py": FLAG,
            "tests/test_flag.py": FLAG_TESTS,
        }.items():
            (project / rel).parent.mkdir(parents=True, exist_ok=True)
            (project / rel).write_text(textwrap.dedent(text))
    return {
        "workspace": {"path": str(project), "copy": True},
        "store": {"home": str(tmp_path / "home"), "excludes": ["__pycache__/", ".coverage*"]},
        "task": "Make the failing tests pass.",
        "strategies": {
            "mutate": {
                "kind": "mutation",
                "samples": 50,
                "order": order,
                "operators": ["compare", "constant"],
            }
        },
        "scoring": {
            "search_tests": {"command": "python -m pytest -q tests", "timeout": 30, "env": ENV},
            "score": "pass_fraction",
            "order": "all",
        },
        "search": {
            "policy": "best_first",
            "seed": 0,
            "budget": {"test_runs": 40, "expansions": 60, "max_depth": 1},
            **search,
        },
        "output": {"runs_dir": str(tmp_path / "runs")},
    }


def expansions(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e.get("event") == "expansion"]


def cleanup(workspace: Path) -> None:
    if workspace.parent.name.startswith("treesearch-"):  # the search's own copy
        shutil.rmtree(workspace.parent, ignore_errors=True)


@pytest.mark.parametrize("workers", [1, 2])
def test_stuck_search_never_expands_a_node_again_after_its_agent_said_it_is_exhausted(
    tmp_path: Path, workers: int
) -> None:
    # Regression: best_first kept choosing the root's `mutate` (50 samples) after the mutation
    # agent had tried its 7 edits: 43 no-op expansions, each a localisation lookup and a capture.
    out = run_from_config(config(tmp_path, workers=workers), base_dir=tmp_path)
    cleanup(Path(out.workspace))
    events = expansions(out.run_dir)
    outcomes = [e["outcome"] for e in events]
    assert outcomes.count("new") == 7 and out.usage.test_runs == 8  # the root and 7 mutants
    noops = [e for e in events if e["outcome"] == "noop"]
    assert noops and all(e["edge"].get("exhausted") for e in noops)
    # Sequentially the first no-op is the last; with workers, expansions are chosen up to
    # ``parallel.WINDOW`` per worker ahead (``run_window``), before the first no-op is recorded.
    assert len(noops) <= (1 if workers == 1 else parallel.WINDOW * workers)
    assert out.stop_reason == "search_space_exhausted"


def test_resumed_search_keeps_an_exhausted_pair_exhausted(tmp_path: Path) -> None:
    first = config(tmp_path)
    first["search"]["budget"]["expansions"] = 8  # the 7 edits and the no-op that ends them
    out = run_from_config(first, base_dir=tmp_path)
    before = len(expansions(out.run_dir))
    assert before == 8 and expansions(out.run_dir)[-1]["edge"].get("exhausted")
    again = resume(out.run_dir, ["search.budget.expansions=100"])
    cleanup(Path(again.workspace))
    assert len(expansions(out.run_dir)) == before  # replayed: nothing left to choose
    assert again.stop_reason == "search_space_exhausted"


def test_next_to_send_sends_a_later_attempt_at_once_for_an_independent_strategy() -> None:
    a0, a1 = Choice("r", "mut", 0, ("r",)), Choice("r", "mut", 1, ("r",))
    assert next_to_send([1], {0: a0, 1: a1}) is None  # waits for attempt 0 by default
    assert next_to_send([1], {0: a0, 1: a1}, {"mut"}) == 1
    assert next_to_send([1], {0: a0, 1: a1}, {"other"}) is None


@pytest.mark.parametrize(
    ("config", "independent"),
    [
        ({"kind": "mutation", "order": "ranked"}, True),
        ({"kind": "mutation", "order": "ranked", "edits": 2}, False),
        ({"kind": "mutation"}, False),  # sampled: a seeded draw against the node's log
        ({"kind": "scripted", "steps": []}, False),
        ({"kind": "no-such-kind"}, False),
    ],
)
def test_attempts_independent_only_for_agents_that_choose_by_node_and_attempt(
    config: dict[str, Any], independent: bool
) -> None:
    assert attempts_independent(config) is independent


def test_parallel_ranked_repair_search_runs_attempts_of_a_node_at_once_and_stays_reproducible(
    tmp_path: Path,
) -> None:
    # Regression (issue 15, repair throughput): best_first chooses the best node's `mutate`
    # for every worker, and attempts of one node ran one after another: two workers, one busy.
    # Ranked attempts now choose by attempt number, so they run at once and choose as before.
    graphs, children = [], []
    for name, workers in (("w1", 1), ("w2a", 2), ("w2b", 2)):
        out = run_from_config(config(tmp_path / name, workers=workers), base_dir=tmp_path / name)
        cleanup(Path(out.workspace))
        g = out.graph
        children.append(sorted(g.successors(root_of(g))))
        graphs.append(to_json(g, stable=True))
        assert out.usage.test_runs == 8
    assert children[0] == children[1] == children[2] and len(children[0]) == 7
    assert graphs[1] == graphs[2]
