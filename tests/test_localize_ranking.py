"""Fault localisation for real bugs: lines run at import time never count as run by a test,
ties go to the function the failing assertion calls, and ``treesearch localize`` prints the
ranking (real pytest runs under coverage in temporary projects; the CLI in a subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from treesearch.agents.mutation import localize
from treesearch.agents.mutation.localize import called_in_failure
from treesearch.scoring import TestSpec

ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
PYPROJECT = '[tool.pytest.ini_options]\npythonpath = ["."]\n'

# Two bugs, each failing its own test, and one passing test. Under the old counting (import-time
# lines run by every test) the module's top-level lines had ef=2, ep=1 (Ochiai 0.82) and the
# buggy lines ef=1, ep=0 (Ochiai 0.71): the import-time lines ranked first.
TWO_BUGS = """\
import math

RATE = 2


def double(x):
    return x * RATE + 1


def negate(x):
    return x


def ident(x):
    return x
"""
TWO_BUGS_TESTS = """\
import calc


def test_double():
    assert calc.double(3) == 6


def test_negate():
    assert calc.negate(3) == -3


def test_ident():
    assert calc.ident(3) == 3
"""


def spec() -> TestSpec:
    return TestSpec(command=(sys.executable, "-m", "pytest", "-q", "tests"), timeout=60, env=ENV)


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in {"pyproject.toml": PYPROJECT, **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_an_import_time_line_never_outranks_the_buggy_lines(workspace: Path) -> None:
    write(workspace, {"calc.py": TWO_BUGS, "tests/test_calc.py": TWO_BUGS_TESTS})
    loc = localize(workspace, spec())
    assert loc.method == "coverage" and (loc.failing, loc.passing) == (2, 1)
    ranked = [(s.path, s.line) for s in loc.lines]
    assert ranked[:2] == [("calc.py", 7), ("calc.py", 11)]
    import_time = {1, 3, 6, 10, 14}  # import, RATE = 2, the three ``def`` lines
    assert not import_time & {line for _, line in ranked}


def test_ties_go_to_the_function_the_failing_assertion_calls(workspace: Path) -> None:
    write(
        workspace,
        {
            "calc.py": """\
            def helper(x):
                return x * 2


            def scale(x):
                return helper(x) + 1
            """,
            "tests/test_calc.py": """\
            import calc


            def test_scale():
                assert calc.scale(2) == 4
            """,
        },
    )
    loc = localize(workspace, spec())
    # Both lines run in the one failing test only (same Ochiai score); ``scale`` is called by
    # the failing assertion, ``helper`` only through it.
    assert [(s.line, s.near_call) for s in loc.lines] == [(6, 1), (2, 0)]
    assert loc.lines[0].score == loc.lines[1].score


def test_called_in_failure_reads_the_failing_line_and_the_where_lines() -> None:
    text = (
        "def test_case_011():\n"
        ">       assert prog.search(-100, ()) == 0\n"
        "E       assert None == 0\n"
        "E        +  where None = <function search at 0x7f>(-100, ())\n"
    )
    assert called_in_failure(text) == {"search"}


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # Importing treesearch.scoring drops PYTHONPATH from os.environ (its pytest probe module
    # restores the variable at import): give the child this process's sys.path explicitly.
    env = {**os.environ, **ENV, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return subprocess.run(
        [sys.executable, "-m", "treesearch", "localize", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_localize_command_prints_the_ranked_lines_with_their_source(workspace: Path) -> None:
    write(workspace, {"calc.py": TWO_BUGS, "tests/test_calc.py": TWO_BUGS_TESTS})
    tests = f"{sys.executable} -m pytest -q tests"
    out = run_cli("--workspace", str(workspace), "--tests", tests, "--top", "2", cwd=workspace)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "2 failing, 1 passing tests; ranked by coverage (ochiai)"
    assert "calc.py:7" in lines[2] and lines[2].endswith("return x * RATE + 1")
    assert "calc.py:11" in lines[3] and lines[3].endswith("return x")
    data_out = run_cli("-w", str(workspace), "--tests", tests, "--json", cwd=workspace)
    data = json.loads(data_out.stdout)
    assert [(r["rank"], r["path"], r["line"]) for r in data["lines"]] == [
        (1, "calc.py", 7),
        (2, "calc.py", 11),
    ]
    assert data["failing_tests"] == [
        "tests/test_calc.py::test_double",
        "tests/test_calc.py::test_negate",
    ]


def test_localize_command_says_when_nothing_fails(workspace: Path) -> None:
    write(
        workspace,
        {
            "calc.py": "def one():\n    return 1\n",
            "tests/test_calc.py": "import calc\n\n\ndef test_one():\n    assert calc.one() == 1\n",
        },
    )
    tests = f"{sys.executable} -m pytest -q tests"
    out = run_cli("--tests", tests, cwd=workspace)
    assert out.returncode == 1
    assert "no failing tests" in out.stdout and "no suspicious line" in out.stdout
