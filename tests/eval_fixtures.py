"""Helpers for the eval tests: small real repositories, instances and configs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

from treesearch.store.source import commit_folder, diff_commits

ROOT = Path(__file__).resolve().parent.parent
TEST_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"

CALC = "def add(a, b):\n    return a - b\n"
VISIBLE = (
    "from calc import add\n\n\n"
    "def test_add_zero():\n    assert add(0, 0) == 0\n\n\n"
    "def test_add_one_two():\n    assert add(1, 2) == 3\n"
)
HELDOUT = "from calc import add\n\n\ndef test_add_two_two():\n    assert add(2, 2) == 4\n"
F2P = ["heldout/test_more.py::test_add_two_two", "tests/test_calc.py::test_add_one_two"]
P2P = ["tests/test_calc.py::test_add_zero"]


def make_calc(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "calc.py").write_text(CALC)
    (folder / "tests").mkdir()
    (folder / "tests" / "test_calc.py").write_text(VISIBLE)
    (folder / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    return folder


def calc_repo(tmp: Path, owner_name: str = "acme/calc", layout: str = "flat") -> dict[str, Any]:
    """A bare repository of the calc project under ``tmp/repos`` and an instance row for it."""
    owner, name = owner_name.split("/")
    src = make_calc(tmp / f"src-{owner}-{name}")
    repos = tmp / "repos"
    repo = {
        "flat": repos / f"{owner}__{name}",
        "nested": repos / owner / name,
        "dotgit": repos / owner / f"{name}.git",
    }[layout]
    base = commit_folder(repo, src, message="base")
    with_tests = tmp / f"tests-{owner}-{name}"
    make_calc(with_tests)
    (with_tests / "heldout").mkdir()
    (with_tests / "heldout" / "test_more.py").write_text(HELDOUT)
    scratch = tmp / f"scratch-{owner}-{name}.git"
    commit_folder(scratch, src, message="base")
    test_commit = commit_folder(scratch, with_tests, message="t", parent=base, branch="t")
    return {
        "instance_id": f"{owner}__{name}-1",
        "repo": owner_name,
        "base_commit": base,
        "patch": "",
        "test_patch": diff_commits(scratch, base, test_commit),
        "FAIL_TO_PASS": json.dumps(F2P),  # the published files' JSON-encoded strings
        "PASS_TO_PASS": P2P,
        "problem_statement": "add() subtracts.",
        "version": "1.0",
    }


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def eval_config(
    tmp: Path,
    *,
    steps: list[dict[str, Any]] | None = None,
    name: str = "eval.yaml",
    **eval_section: Any,
) -> Path:
    """A config whose one strategy (scripted) fixes calc.add; ``steps`` replaces its steps."""
    fix = [{"replace": "calc.py", "old": "a - b", "new": "a + b"}]
    cfg: dict[str, Any] = {
        "task": "Fix the tests.",
        "strategies": {"fix": {"kind": "scripted", "steps": steps if steps is not None else fix}},
        "scoring": {
            "search_tests": {"command": f"{PYTEST} tests", "timeout": 60, "env": TEST_ENV},
        },
        "search": {"policy": "bfs", "seed": 0, "budget": {"expansions": 2}},
        "output": {"model_name": "calc-model"},
        # Agent commands may write only the workspace (where isolation works) and this folder.
        "sandbox": {"writable": [str(tmp)]},
        "eval": {
            "grade_tests": {"command": PYTEST, "timeout": 60, "env": TEST_ENV},
            **eval_section,
        },
    }
    path = tmp / name
    path.write_text(yaml.safe_dump(cfg))
    return path


def rows_without_timing(path: Path) -> list[dict[str, Any]]:
    """``results.jsonl`` rows minus wall-clock fields (the only ones allowed to differ)."""
    out = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        row.pop("seconds")
        row.pop("grade_seconds", None)
        row.pop("env_log", None)
        out.append(row)
    return out
