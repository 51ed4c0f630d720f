"""A search stops choosing a (node, strategy) pair whose agent said nothing is left to try there:
real mutation agent, real pytest runs, real git store."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest

from treesearch.app import resume, run_from_config

ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
FLAG = "def on(x):\n    return x > 1\n"
# No single edit of `x > 1` (comparison swaps, new constants) makes on(1) return "yes".
FLAG_TESTS = "from flag import on\n\n\ndef test_on():\n    assert on(1) == 'yes'\n"


def config(tmp_path: Path, **search: Any) -> dict[str, Any]:
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
                "order": "ranked",
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
    # Sequentially the first no-op is the last; with workers, expansions are chosen up to two
    # per worker ahead (``parallel.run_window``), before the first no-op is recorded.
    assert len(noops) <= (1 if workers == 1 else 2 * workers)
    assert out.stop_reason == "search_space_exhausted"


def test_resumed_search_keeps_an_exhausted_pair_exhausted(tmp_path: Path) -> None:
    out = run_from_config(config(tmp_path), base_dir=tmp_path)
    before = len(expansions(out.run_dir))
    again = resume(out.run_dir, ["search.budget.expansions=100"])
    cleanup(Path(again.workspace))
    assert len(expansions(out.run_dir)) == before  # replayed: nothing left to choose
    assert again.stop_reason == "search_space_exhausted"
