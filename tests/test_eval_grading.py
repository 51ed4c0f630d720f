"""Held-out grading of single runs (``treesearch run``): in a fresh copy of the best tree plus
held-out files kept outside the workspace, never in the searched workspace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from eval_fixtures import HELDOUT, PYTEST, TEST_ENV, make_calc

from treesearch.app import run_from_config
from treesearch.errors import ConfigError


def _config(tmp: Path, proj: Path, steps: list[dict[str, Any]], **scoring: Any) -> dict[str, Any]:
    return {
        "workspace": {"path": str(proj)},
        "store": {"home": str(tmp / "home")},
        "strategies": {"fix": {"kind": "scripted", "steps": steps}},
        "scoring": {
            "search_tests": {"command": f"{PYTEST} tests", "timeout": 60, "env": TEST_ENV},
            "grade_tests": {"command": f"{PYTEST} heldout", "timeout": 60, "env": TEST_ENV},
            **scoring,
        },
        "search": {"policy": "bfs", "budget": {"expansions": 2}},
        "output": {"runs_dir": str(tmp / "runs")},
        "sandbox": {"writable": [str(tmp)]},  # the listing is written beside the workspace
    }


FIX = {"replace": "calc.py", "old": "a - b", "new": "a + b"}


def test_run_held_out_files_absent_from_workspace_and_graded_in_copy(tmp_path: Path) -> None:
    proj = make_calc(tmp_path / "proj")
    held = tmp_path / "held"
    held.mkdir()
    (held / "test_more.py").write_text(HELDOUT)
    listing = tmp_path / "listing.txt"
    steps = [{"run": f"find . -type f -not -path './.*' | sort > {listing}"}, FIX]
    cfg = _config(tmp_path, proj, steps, grade_files={"heldout": "held"})
    out = run_from_config(cfg, base_dir=tmp_path)
    seen = listing.read_text().split()
    assert "./calc.py" in seen and not any("heldout" in p or "test_more" in p for p in seen)
    assert out.grade is not None and out.grade.resolved and out.grade.held_out
    assert [t.id for t in out.grade.run.tests] == ["heldout/test_more.py::test_add_two_two"]
    assert not (proj / "heldout").exists()


def test_run_grade_never_runs_in_the_searched_workspace(tmp_path: Path) -> None:
    # Before the fix the grade command ran in the workspace: its marker file stayed there.
    proj = make_calc(tmp_path / "proj")
    grade = {"command": f"touch graded-here && {PYTEST} tests", "timeout": 60, "env": TEST_ENV}
    out = run_from_config(_config(tmp_path, proj, [FIX], grade_tests=grade), base_dir=tmp_path)
    assert out.grade is not None and out.grade.resolved
    assert not (proj / "graded-here").exists()


def test_run_grade_files_inside_workspace_are_refused(tmp_path: Path) -> None:
    proj = make_calc(tmp_path / "proj")
    (proj / "heldout").mkdir()
    cfg = _config(tmp_path, proj, [FIX], grade_files={"heldout": "proj/heldout"})
    with pytest.raises(ConfigError, match="is inside the workspace, where the search can read it"):
        run_from_config(cfg, base_dir=tmp_path)
    cfg = _config(tmp_path, proj, [FIX], grade_files={"../up": "proj"})
    with pytest.raises(ConfigError, match=r"grade_files\.\.\./up: must be a relative path"):
        run_from_config(cfg, base_dir=tmp_path)
    cfg = _config(tmp_path, proj, [FIX], grade_files={"heldout": "nowhere"})
    with pytest.raises(ConfigError, match="nowhere does not exist"):
        run_from_config(cfg, base_dir=tmp_path)


def test_run_mutation_strategy_without_operators_regression_resolved_null(tmp_path: Path) -> None:
    # Bug: the resolved config.yaml records the default `operators: null`, which the typed
    # mutation config then refused when the run read it back: every such run failed at once.
    proj = make_calc(tmp_path / "proj")
    cfg = _config(tmp_path, proj, [FIX])
    cfg["strategies"] = {"mutate": {"kind": "mutation", "max_steps": 1, "seed": 0}}
    cfg["search"]["budget"] = {"expansions": 1}
    out = run_from_config(cfg, base_dir=tmp_path)
    assert out.usage.expansions == 1
