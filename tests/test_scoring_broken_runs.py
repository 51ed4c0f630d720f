"""A broken test run is never a pass, and never a normal result (issue 12, items 1-4).

Real pytest runs in temporary projects, real shells, the real CLI and a real search.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from treesearch.scoring import RunStatus, Scorer, TestSpec, make_score, run_tests

QUICK_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTEST_ADDOPTS": ""}


def pytest_spec(*args: str, **kwargs: object) -> TestSpec:
    fields: dict[str, object] = {
        "command": (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args),
        "timeout": 60,
        "env": QUICK_ENV,
    }
    fields.update(kwargs)
    return TestSpec(**fields)  # type: ignore[arg-type]


def make_project(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pytest.ini").write_text("[pytest]\n")
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def all_scores(run: object) -> dict[str, tuple[float, bool]]:
    out = {}
    for name in ("pass_fraction", "resolved"):
        grade = make_score(name)(run)  # type: ignore[arg-type]
        out[name] = (grade.value, grade.resolved)
    return out


# --- 1. a test command that does not exist ------------------------------------------------------


def _value(outcome: Any) -> str:
    assert outcome is not None
    return str(outcome.value)


def test_run_of_a_test_command_that_does_not_exist_is_invalid_with_the_shell_reason(
    tmp_path: Path,
) -> None:
    # Regression (issue 12): exit 127 from /bin/sh was an OK run with "no tests" and score 0.
    run = run_tests(TestSpec(command="nosuchtestcmd --flag", timeout=30), tmp_path)
    assert run.status is RunStatus.INVALID and run.exit_code == 127
    assert "the test command was not found (exit code 127)" in run.problem
    assert "nosuchtestcmd: not found" in run.problem  # the shell's own words
    assert all_scores(run) == {"pass_fraction": (0.0, False), "resolved": (0.0, False)}


def test_run_of_a_missing_pytest_program_says_not_found_instead_of_missing_report(
    tmp_path: Path,
) -> None:
    run = run_tests(TestSpec(command="nosuchpytest-bin -q", runner="pytest", timeout=30), tmp_path)
    assert run.status is RunStatus.INVALID
    assert run.problem.startswith("the test command was not found (exit code 127)")


def test_run_of_a_test_script_that_is_not_executable_is_invalid(tmp_path: Path) -> None:
    script = tmp_path / "run-tests.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o644)
    run = run_tests(TestSpec(command="./run-tests.sh", timeout=30), tmp_path)
    assert run.status is RunStatus.INVALID and run.exit_code == 126
    assert "could not be executed (exit code 126)" in run.problem


def test_cli_score_prints_the_reason_of_a_missing_test_command_and_exits_3(
    workspace: Path, home: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    cmd = [sys.executable, "-m", "treesearch", "score", "--tests", "nosuchtestcmd"]
    cmd += ["--workspace", str(workspace), "--home", str(home)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    assert out.returncode == 3, out.stderr
    assert "status invalid" in out.stdout
    assert "problem: the test command was not found (exit code 127)" in out.stdout
    assert "nosuchtestcmd: not found" in out.stdout
    as_json = subprocess.run([*cmd, "--json"], capture_output=True, text=True, env=env)
    assert as_json.returncode == 3
    assert json.loads(as_json.stdout)["status"] == "invalid"


def test_search_node_summary_carries_the_reason_of_a_missing_test_command(
    tmp_path: Path,
) -> None:
    from treesearch.app import run_from_config

    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "calc.py").write_text("X = 1\n")
    cfg = {
        "workspace": {"path": str(proj)},
        "store": {"home": str(tmp_path / "home")},
        "strategies": {
            "edit": {"kind": "scripted", "steps": [{"write": "calc.py", "content": "X = 2\n"}]}
        },
        "scoring": {"search_tests": {"command": "nosuchtestcmd", "timeout": 30}},
        "search": {"seed": 1, "budget": {"expansions": 1}},
        "output": {"runs_dir": str(tmp_path / "runs")},
    }
    out = run_from_config(cfg, base_dir=tmp_path)
    tests = out.graph.nodes[out.best]["tests"]
    assert tests["status"] == "invalid"
    assert "the test command was not found (exit code 127)" in tests["problem"]
    assert "invalid: the test command was not found" in tests["summary"]


# --- 2. a session cut short ---------------------------------------------------------------------

EXIT_ZERO = """
import pytest
def test_first(): pass
def test_stops(): pytest.exit("enough", returncode=0)
def test_never_runs(): assert False
"""


def test_run_cut_short_by_pytest_exit_with_returncode_zero_is_invalid(tmp_path: Path) -> None:
    # Regression (issue 12): exit code 0 and only passes in the report scored 1.0, resolved.
    ws = make_project(tmp_path / "ws", {"test_a.py": EXIT_ZERO})
    run = run_tests(pytest_spec(), ws)
    assert run.exit_code == 0
    assert run.status is RunStatus.INVALID
    assert "the test session was cut short (Exit: enough)" in run.problem
    assert "1 of 3 collected tests ran" in run.problem
    assert all_scores(run) == {"pass_fraction": (0.0, False), "resolved": (0.0, False)}


def test_run_cut_short_is_invalid_from_the_banner_when_the_probe_cannot_load(
    tmp_path: Path,
) -> None:
    # `env -u` drops the variables that load the probe: the banner still tells.
    ws = make_project(tmp_path / "ws", {"test_a.py": EXIT_ZERO})
    spec = TestSpec(
        command=f"env -u PYTEST_PLUGINS {sys.executable} -m pytest -q -p no:cacheprovider",
        timeout=60,
        env=QUICK_ENV,
    )
    run = run_tests(spec, ws)
    assert run.status is RunStatus.INVALID
    assert "cut short (_pytest.outcomes.Exit: enough)" in run.problem


def test_run_interrupted_by_keyboard_interrupt_in_a_test_is_invalid(tmp_path: Path) -> None:
    ws = make_project(
        tmp_path / "ws",
        {"test_a.py": "def test_a(): pass\ndef test_b(): raise KeyboardInterrupt\n"},
    )
    run = run_tests(pytest_spec(), ws)
    assert run.status is RunStatus.INVALID and "KeyboardInterrupt" in run.problem


def test_run_stopped_by_maxfail_after_a_failure_stays_ok_and_says_so(tmp_path: Path) -> None:
    ws = make_project(
        tmp_path / "ws",
        {"test_a.py": "def test_a(): pass\ndef test_b(): assert 0\ndef test_c(): pass\n"},
    )
    run = run_tests(pytest_spec("-x"), ws)
    assert run.status is RunStatus.OK
    assert run.totals["passed"] == 1 and run.totals["failed"] == 1
    assert "2 of 3 collected tests ran" in run.problem


def test_probe_leaves_the_tests_environment_as_it_was(tmp_path: Path) -> None:
    ws = make_project(
        tmp_path / "ws",
        {
            "test_env.py": """
                import os
                def test_env():
                    assert os.environ.get("PYTEST_PLUGINS") is None
                    assert os.environ["PYTHONPATH"] == "/nowhere"
                    assert not any(k.startswith("TREESEARCH_PYTEST") for k in os.environ)
            """
        },
    )
    run = run_tests(pytest_spec(env={**QUICK_ENV, "PYTHONPATH": "/nowhere"}), ws)
    assert run.status is RunStatus.OK and run.totals["passed"] == 1, run.output


def test_isolated_python_runs_without_the_probe(tmp_path: Path) -> None:
    ws = make_project(tmp_path / "ws", {"test_a.py": "def test_a(): pass\n"})
    spec = TestSpec(
        command=(sys.executable, "-I", "-m", "pytest", "-q", "-p", "no:cacheprovider"),
        timeout=60,
        env=QUICK_ENV,
    )
    run = run_tests(spec, ws)
    assert run.status is RunStatus.OK and run.totals["passed"] == 1, run.output


# --- 3. collection errors -----------------------------------------------------------------------

COLLECTION = {
    "test_a.py": "def test_1(): pass\ndef test_2(): pass\ndef test_3(): assert 0\n",
    "test_b.py": "import no_such_module\ndef test_x(): pass\n",
    "test_c.py": "def test_1(): pass\ndef test_2(): pass\ndef test_3(): pass\n",
}


@pytest.mark.parametrize("flags", [(), ("--continue-on-collection-errors",)])
def test_run_with_a_module_that_fails_to_import_is_an_error_whatever_the_flags(
    tmp_path: Path, flags: tuple[str, ...]
) -> None:
    # Regression (issue 12): with --continue-on-collection-errors the import error counted as
    # one failure among the passes (0.714 > the real 0.667) and the run was OK.
    ws = make_project(tmp_path / "ws", COLLECTION)
    run = run_tests(pytest_spec(*flags), ws)
    assert run.status is RunStatus.ERROR
    assert run.problem.startswith("errors during collection: test_b.py")
    assert all_scores(run) == {"pass_fraction": (0.0, False), "resolved": (0.0, False)}


def test_run_setup_error_in_a_fixture_is_a_failing_test_not_a_collection_error(
    tmp_path: Path,
) -> None:
    ws = make_project(
        tmp_path / "ws",
        {
            "test_a.py": """
                import pytest
                @pytest.fixture
                def broken():
                    raise RuntimeError("no database")
                def test_uses(broken): pass
                def test_plain(): pass
            """
        },
    )
    run = run_tests(pytest_spec(), ws)
    assert run.status is RunStatus.OK
    assert run.totals["error"] == 1 and run.totals["passed"] == 1


# --- 4. not run is not a pass -------------------------------------------------------------------

NOT_RUN = {
    "test_a.py": """
        import pytest
        @pytest.mark.xfail(run=False, reason="never run")
        def test_fix(): assert False
        def test_keep(): pass
        @pytest.mark.xfail(reason="expected")
        def test_known(): assert False
    """
}


def test_fail_to_pass_test_marked_xfail_run_false_does_not_resolve(tmp_path: Path) -> None:
    # Regression (issue 12): a never-run xfail counted as a pass, and resolved the instance.
    ws = make_project(tmp_path / "ws", NOT_RUN)
    run = run_tests(pytest_spec(), ws)
    assert run.status is RunStatus.OK
    assert _value(run.outcome("test_a.py::test_fix")) == "skipped"
    assert _value(run.outcome("test_a.py::test_known")) == "xfail"  # it ran, and failed
    swe = make_score(
        {
            "kind": "swebench",
            "fail_to_pass": ["test_a.py::test_fix"],
            "pass_to_pass": ["test_a.py::test_keep"],
        }
    )(run)
    assert not swe.resolved and swe.details["tests_status"]["FAIL_TO_PASS"]["failure"] == [
        "test_a.py::test_fix"
    ]
    frac = make_score({"kind": "pass_fraction", "skipped": "fail"})(run)
    assert frac.value == pytest.approx(2 / 3) and not frac.resolved
    only_fix = run_tests(pytest_spec(tests=("test_a.py::test_fix",)), ws)
    assert all_scores(only_fix) == {"pass_fraction": (0.0, False), "resolved": (0.0, False)}


def test_swebench_counts_an_xpass_as_a_failure_as_the_harness_does(tmp_path: Path) -> None:
    # No -rX in the command: the probe names the xpass.
    ws = make_project(
        tmp_path / "ws",
        {
            "test_a.py": """
                import pytest
                @pytest.mark.xfail(reason="was broken")
                def test_fixed(): pass
                def test_keep(): pass
            """
        },
    )
    result = Scorer(
        pytest_spec(),
        {
            "kind": "swebench",
            "fail_to_pass": ["test_a.py::test_fixed"],
            "pass_to_pass": ["test_a.py::test_keep"],
        },
    ).score(ws)
    assert _value(result.run.outcome("test_a.py::test_fixed")) == "xpass"
    assert not result.resolved
    assert result.details["tests_status"]["FAIL_TO_PASS"]["failure"] == ["test_a.py::test_fixed"]


@pytest.mark.parametrize(
    ("command", "isolated"),
    [
        ("python -I -m pytest", True),
        ("env X=1 python3.11 -Im pytest -rE", True),
        ("uv run python -E -m pytest", True),
        ("pytest -rE", False),  # pytest's -rE is not Python's -E
        ("python -m pytest -rE", False),
    ],
)
def test_probe_is_left_out_only_for_an_interpreter_that_ignores_pythonpath(
    command: str, isolated: bool, tmp_path: Path
) -> None:
    from treesearch.scoring.probe import probe_env

    env = probe_env(command, tmp_path / "probe", tmp_path / "probe.json", {}, {})
    assert (env == {}) is isolated
