"""A root whose test run cannot be scored stops the search at once (``root_invalid``): no budget
spent on expansions, a ``stop_detail`` that says why, and ``run``/``resume`` exit 4 with the
reason on stderr. Real searches through the real CLI (store, scripted agents, pytest)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from treesearch.app import run_from_config
from treesearch.search.budget import Budget, Usage, explain_stop

PYTEST = f"{shlex.quote(sys.executable)} -m pytest -q"
CALC = "def add(a, b):\n    return a - b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


def _project(root: Path, files: dict[str, str]) -> Path:
    proj = root / "proj"
    proj.mkdir(parents=True)
    (proj / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    (proj / "calc.py").write_text(CALC)
    for name, text in files.items():
        (proj / name).parent.mkdir(parents=True, exist_ok=True)
        (proj / name).write_text(text)
    return proj


def _config(tmp_path: Path, files: dict[str, str], command: Any, **search: Any) -> dict[str, Any]:
    fix = {"replace": "calc.py", "old": "return a - b", "new": "return a + b"}
    return {
        "workspace": {"path": str(_project(tmp_path, files))},
        "store": {"home": str(tmp_path / "home")},
        "strategies": {"fix": {"kind": "scripted", "steps": [fix]}},
        "scoring": {
            "search_tests": {
                "command": command,
                "timeout": 60,
                "env": {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
            }
        },
        "search": {"policy": "bfs", "seed": 0, "budget": {"expansions": 3}, **search},
        "output": {"runs_dir": str(tmp_path / "runs"), "run_id": "r"},
    }


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "treesearch", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _cli_run(tmp_path: Path, cfg: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "search.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return _cli("run", str(path), "--no-patch")


def _record(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    summary = json.loads((run_dir / "summary.json").read_text())
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return summary, events


def _assert_nothing_searched(run_dir: Path, status: str, problem: str) -> dict[str, Any]:
    summary, events = _record(run_dir)
    assert summary["stop_reason"] == "root_invalid"
    assert summary["usage"]["expansions"] == 0 and summary["usage"]["test_runs"] == 1
    assert summary["nodes"] == 1 and summary["best"]["tree"] == summary["root"]["tree"]
    detail = summary["stop_detail"]
    assert detail.startswith(f"the root's test run is {status}: ")
    assert problem in detail
    assert "nothing can be scored: fix scoring.search_tests (`" in detail
    kinds = [e["event"] for e in events]
    assert "expansion" not in kinds and "dispatch" not in kinds
    assert [e["reason"] for e in events if e["event"] == "finished"][-1] == "root_invalid"
    return summary


CASES = {
    "command not found": ({"test_calc.py": TESTS}, "nosuchtestcmd", "INVALID", "nosuchtestcmd"),
    "program not found": (
        {"test_calc.py": TESTS},
        ["nosuchtestcmd", "-q"],
        "CRASHED",
        "the test command could not start",
    ),
    "usage error": (
        {"test_calc.py": TESTS},
        f"{PYTEST} nosuchdir",
        "INVALID",
        "pytest was called wrongly",
    ),
    "no tests": (
        {"tests/helpers.py": "X = 1\n"},
        f"{PYTEST} tests",
        "INVALID",
        "pytest collected no tests",
    ),
    "collection error": (
        {"tests/test_calc.py": TESTS, "tests/test_bad.py": "def test_x(:\n    pass\n"},
        f"{PYTEST} tests",
        "ERROR",
        "errors during collection: tests/test_bad.py",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_run_with_an_unscorable_root_exits_4_and_searches_nothing(
    tmp_path: Path, case: str
) -> None:
    files, command, status, problem = CASES[case]
    proc = _cli_run(tmp_path, _config(tmp_path, files, command))
    assert proc.returncode == 4, proc.stderr
    said = [line for line in proc.stderr.splitlines() if line.startswith("treesearch: ")]
    assert said[-1].startswith(f"treesearch: the root's test run is {status}: "), proc.stderr
    assert problem in said[-1]
    assert "stopped: root_invalid; 0 expansions, 1 test runs" in proc.stdout
    _assert_nothing_searched(tmp_path / "runs" / "r", status, problem)


def test_unscorable_root_with_two_workers_stops_before_any_worker_expands(
    tmp_path: Path,
) -> None:
    cfg = _config(tmp_path, {"test_calc.py": TESTS}, f"{PYTEST} nosuchdir", workers=2)
    proc = _cli_run(tmp_path, cfg)
    assert proc.returncode == 4, proc.stderr
    assert "treesearch: the root's test run is INVALID: " in proc.stderr
    _assert_nothing_searched(tmp_path / "runs" / "r", "INVALID", "pytest was called wrongly")


def test_resume_of_a_run_with_an_unscorable_root_exits_4_and_spends_nothing(
    tmp_path: Path,
) -> None:
    cfg = _config(tmp_path, {"tests/helpers.py": "X = 1\n"}, f"{PYTEST} tests")
    assert _cli_run(tmp_path, cfg).returncode == 4
    run_dir = tmp_path / "runs" / "r"
    for extra in ((), ("-c", "search.budget.expansions=10"), ("-c", "search.workers=2")):
        proc = _cli("resume", str(run_dir), "--no-patch", *extra)
        assert proc.returncode == 4, proc.stderr
        assert "treesearch: nothing to do: the root's test run is INVALID: " in proc.stderr
        assert proc.stderr.splitlines()[-1].startswith(
            "treesearch: the root's test run is INVALID: "
        )
        _assert_nothing_searched(run_dir, "INVALID", "pytest collected no tests")
    summary, _ = _record(run_dir)
    assert summary["stop_detail"].endswith(f"(`{PYTEST} tests`) and start a new run")


def test_json_output_carries_the_reason_and_still_exits_4(tmp_path: Path) -> None:
    path = tmp_path / "search.yaml"
    path.write_text(yaml.safe_dump(_config(tmp_path, {"test_calc.py": TESTS}, "nosuchtestcmd")))
    proc = _cli("run", str(path), "--json")
    assert proc.returncode == 4, proc.stderr
    out = json.loads(proc.stdout)
    assert out["stop_reason"] == "root_invalid"
    assert "the test command was not found (exit code 127)" in out["stop_detail"]


def test_search_outcome_exposes_the_reason_for_the_eval_runner(tmp_path: Path) -> None:
    cfg = _config(tmp_path, {"test_calc.py": TESTS}, "nosuchtestcmd")
    out = run_from_config(cfg, base_dir=tmp_path)
    assert out.stop_reason == "root_invalid" and out.usage.expansions == 0
    assert out.stop_detail == out.summary["stop_detail"]
    assert out.stop_detail is not None
    assert out.stop_detail.startswith(
        "the root's test run is INVALID: the test command was not found (exit code 127)"
    )
    assert out.stop_detail.endswith(
        "fix scoring.search_tests (`nosuchtestcmd`) and start a new run"
    )
    assert out.patch == "" and out.best == out.graph.graph["root"]


def test_a_root_whose_tests_fail_is_searched_as_before(tmp_path: Path) -> None:
    proc = _cli_run(tmp_path, _config(tmp_path, {"test_calc.py": TESTS}, PYTEST))
    assert proc.returncode == 0, proc.stderr
    summary, events = _record(tmp_path / "runs" / "r")
    assert summary["root"]["score"] == 0.0 and summary["stop_reason"] == "perfect_score"
    assert summary["usage"]["expansions"] == 1 and summary["best"]["score"] == 1.0
    assert summary["stop_detail"] is None
    assert "the root's test run" not in proc.stderr


def test_explain_stop_says_why_a_root_cannot_be_searched() -> None:
    detail = "the root's test run is INVALID: x; nothing can be scored: fix scoring.search_tests"
    assert explain_stop("root_invalid", Budget(), Usage(), detail) == detail
    plain = explain_stop("root_invalid", Budget(), Usage())
    assert "nothing can be scored: fix scoring.search_tests" in plain
