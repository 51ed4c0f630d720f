"""Fault localisation: real pytest runs under coverage in temporary projects (no mocks)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import tree_digest

from treesearch.agents.mutation import FORMULAS, is_test_path, localize
from treesearch.agents.mutation.localize import Localization
from treesearch.scoring import TestSpec

ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
PYPROJECT = '[tool.pytest.ini_options]\npythonpath = ["."]\n'

CLAMP = """\
def clamp(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return lo
    return x


def total(xs):
    s = 0
    for x in xs:
        s += x
    return s
"""
CLAMP_TESTS = """\
import pytest

import calc


@pytest.mark.parametrize(("x", "want"), [(5, 5), (-1, 0), (11, 10), (10, 10)])
def test_clamp(x, want):
    assert calc.clamp(x, 0, 10) == want


def test_total():
    assert calc.total([1, 2]) == 3
"""


def spec(command: str = "python -m pytest -q tests", timeout: float = 60) -> TestSpec:
    return TestSpec(command=command, timeout=timeout, env=ENV)


def project(root: Path, files: dict[str, str]) -> Path:
    for rel, text in {"pyproject.toml": PYPROJECT, **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.fixture
def clamp_project(workspace: Path) -> Path:
    return project(workspace, {"calc.py": CLAMP, "tests/test_calc.py": CLAMP_TESTS})


def test_localize_ranks_the_buggy_line_first(clamp_project: Path) -> None:
    loc = localize(clamp_project, spec())
    assert loc.method == "coverage" and loc.note == ""
    assert (loc.failing, loc.passing) == (1, 4)  # each parametrised case is its own test
    top = loc.lines[0]
    assert (top.path, top.line, top.failed, top.passed, top.score) == ("calc.py", 5, 1, 0, 1.0)
    assert loc.failing_tests == ("tests/test_calc.py::test_clamp[11-10]",)
    # Lines only passing tests run are not suspicious; test files are never ranked.
    ranked = {(s.path, s.line) for s in loc.lines}
    assert ("calc.py", 6) not in ranked and ("calc.py", 12) not in ranked
    assert all(not is_test_path(s.path) for s in loc.lines)


@pytest.mark.parametrize("formula", sorted(FORMULAS))
def test_localize_ranks_the_buggy_line_first_with_every_formula(
    clamp_project: Path, formula: str
) -> None:
    loc = localize(clamp_project, spec(), formula=formula, tree="t-" + formula)
    assert loc.formula == formula
    assert (loc.lines[0].path, loc.lines[0].line) == ("calc.py", 5)


def test_localize_refuses_an_unknown_formula(clamp_project: Path) -> None:
    with pytest.raises(ValueError, match="unknown formula 'jaccard'; known: ochiai"):
        localize(clamp_project, spec(), formula="jaccard")


def test_localize_leaves_nothing_in_the_workspace(clamp_project: Path) -> None:
    before = tree_digest(clamp_project)
    localize(clamp_project, spec())
    assert tree_digest(clamp_project) == before  # no .coverage, __pycache__, .pytest_cache


def test_localize_boosts_lines_in_failing_tracebacks(workspace: Path) -> None:
    project(
        workspace,
        {
            "mean.py": """\
                def mean(xs):
                    n = len(xs)
                    total = sum(xs)
                    return total / n
                """,
            "tests/test_mean.py": """\
                from mean import mean


                def test_mean_of_empty_list_is_zero():
                    assert mean([]) == 0


                def test_mean():
                    assert mean([1, 3]) == 2
                """,
        },
    )
    loc = localize(workspace, spec())
    top = loc.lines[0]
    # Every body line has the same spectrum; the ZeroDivisionError's line wins by its traceback.
    assert (top.line, top.in_traceback) == (4, 1)
    assert top.score == pytest.approx(1.5)
    assert loc.lines[1].score == pytest.approx(1.0)


def test_localize_of_a_project_whose_tests_crash_on_import(workspace: Path) -> None:
    project(
        workspace,
        {
            "rates.py": """\
                BASE = 100
                RATE = BASE / 0


                def scaled(x):
                    return x * RATE
                """,
            "tests/test_rates.py": """\
                from rates import scaled


                def test_scaled():
                    assert scaled(1) == 1
                """,
        },
    )
    loc = localize(workspace, spec())
    assert loc.method == "coverage" and loc.failing == 1 and loc.passing == 0
    assert loc.failing_tests == ("tests/test_rates.py",)  # the collection error
    assert (loc.lines[0].path, loc.lines[0].line, loc.lines[0].in_traceback) == ("rates.py", 2, 1)


def test_localize_falls_back_to_tracebacks_when_coverage_cannot_wrap_the_command(
    workspace: Path,
) -> None:
    project(
        workspace,
        {
            "mean.py": "def mean(xs):\n    return sum(xs) / len(xs)\n\n\ndef one():\n    return 1\n",
            "tests/test_mean.py": (
                "from mean import mean, one\n\n\n"
                "def test_empty():\n    assert mean([]) == 0\n\n\n"
                "def test_one():\n    assert one() == 1\n"
            ),
        },
    )
    loc = localize(workspace, spec("cd . && python -m pytest -q tests"))
    assert loc.method == "traceback"
    assert "coverage not used" in loc.note and "shell syntax" in loc.note
    assert [(s.path, s.line) for s in loc.lines] == [("mean.py", 2)]


def test_localize_falls_back_when_coverage_is_switched_off(clamp_project: Path) -> None:
    loc = localize(clamp_project, spec(), use_coverage=False)
    assert loc.method == "traceback" and "switched off" in loc.note
    # The traceback shows only the test; the failing assertion calls ``clamp``, whose lines
    # are ranked (and ``total``'s are not).
    assert {(s.path, s.line) for s in loc.lines} == {("calc.py", n) for n in (2, 3, 4, 5, 6)}
    assert all(s.near_call == 1 and s.in_traceback == 0 for s in loc.lines)


def test_localize_reports_a_state_without_failing_tests(workspace: Path) -> None:
    project(
        workspace,
        {
            "ok.py": "X = 1\n",
            "tests/test_ok.py": "import ok\n\n\ndef test_x():\n    assert ok.X == 1\n",
        },
    )
    loc = localize(workspace, spec())
    assert loc.lines == () and loc.failing == 0 and "no failing tests" in loc.note


def test_localize_counts_the_test_running_at_a_timeout_as_failing(workspace: Path) -> None:
    project(
        workspace,
        {
            "loop.py": """\
                def count_to(n):
                    i = 0
                    while i < n:
                        pass
                    return i
                """,
            "tests/test_loop.py": """\
                from loop import count_to


                def test_zero():
                    assert count_to(0) == 0


                def test_three():
                    assert count_to(3) == 3
                """,
        },
    )
    loc = localize(workspace, spec(timeout=3))
    assert loc.run_status == "timeout" and loc.method == "coverage"
    assert loc.failing_tests == ("tests/test_loop.py::test_three",) and loc.passing == 1
    assert "timed out while running tests/test_loop.py::test_three" in loc.note
    assert (loc.lines[0].line, loc.lines[0].failed, loc.lines[0].passed) == (4, 1, 0)


def test_localize_caches_per_tree_in_memory_and_on_disk(
    clamp_project: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "fl-cache"
    first = localize(clamp_project, spec(), tree="tree-a", cache_dir=folder)
    assert not first.cached and len(list(folder.glob("*.json"))) == 1
    again = localize(clamp_project, spec(), tree="tree-a", cache_dir=folder, formula="dstar")
    assert again.cached and again.seconds == 0.0 and again.formula == "dstar"
    assert again.lines[0].line == first.lines[0].line
    other = localize(clamp_project, spec(), tree="tree-b", cache_dir=folder)
    assert not other.cached


def test_localize_leaves_out_test_files_and_excluded_globs(clamp_project: Path) -> None:
    loc = localize(clamp_project, spec(), exclude=["calc.py"])
    assert loc.lines == ()


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("tests/helpers.py", True),
        ("pkg/test_x.py", True),
        ("pkg/x_test.py", True),
        ("conftest.py", True),
        ("pkg/testing/util.py", True),
        ("pkg/contest.py", False),
        ("src/attest.py", False),
    ],
)
def test_is_test_path(path: str, expected: bool) -> None:
    assert is_test_path(path) is expected


def test_localize_runs_the_tests_from_the_spec_cwd(
    workspace: Path, write: Callable[..., Path]
) -> None:
    project(workspace / "sub", {"calc.py": CLAMP, "tests/test_calc.py": CLAMP_TESTS})
    write(workspace, "README.md", "top level\n")
    loc = localize(workspace, TestSpec(command="python -m pytest -q tests", cwd="sub", env=ENV))
    assert (loc.lines[0].path, loc.lines[0].line) == ("sub/calc.py", 5)


def test_localize_does_not_cache_coverage_that_could_not_run_in_the_environment(
    clamp_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Regression (issue 12): one run whose `python` had neither coverage nor pytest cached its
    # fallback ranking under the store home, and every later run got it back.
    import os
    import subprocess
    import sys

    folder = tmp_path / "fl-cache"
    bare = tmp_path / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    good_path = os.environ["PATH"]
    monkeypatch.setenv("PATH", f"{bare / 'bin'}{os.pathsep}{good_path}")
    broken = localize(clamp_project, spec(), tree="tree-env-failure", cache_dir=folder)
    assert broken.method == "traceback" and "coverage could not run" in broken.note
    assert not broken.cached and not list(folder.glob("*.json"))
    again = localize(clamp_project, spec(), tree="tree-env-failure", cache_dir=folder)
    assert not again.cached and "coverage could not run" in again.note  # said every time

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{good_path}")
    fixed = localize(clamp_project, spec(), tree="tree-env-failure", cache_dir=folder)
    assert fixed.method == "coverage" and not fixed.cached and fixed.note == ""
    assert (fixed.lines[0].path, fixed.lines[0].line) == ("calc.py", 5)
    assert localize(clamp_project, spec(), tree="tree-env-failure", cache_dir=folder).cached


GATED_TESTS = """\
import os
import time
from pathlib import Path

import calc


def test_gate():
    # Tell the test it started, then wait (at most a minute) until it lets the run go on.
    Path(os.environ["FL_STARTED"]).touch()
    release = Path(os.environ["FL_RELEASE"])
    end = time.monotonic() + 60
    while not release.exists() and time.monotonic() < end:
        time.sleep(0.02)
    assert calc.clamp(11, 0, 10) == 10
"""


def test_localize_of_one_tree_in_two_processes_runs_the_tests_once(
    workspace: Path, tmp_path: Path
) -> None:
    """Regression (issue 15, repair throughput): the two workers of a parallel search both
    localised the root, each under coverage; the second now waits for the first's spectrum."""
    root = project(workspace, {"calc.py": CLAMP, "tests/test_calc.py": GATED_TESTS})
    started, release = tmp_path / "started", tmp_path / "release"
    gated = TestSpec(
        command="python -m pytest -q tests",
        timeout=120,
        env={**ENV, "FL_STARTED": str(started), "FL_RELEASE": str(release)},
    )
    folder = tmp_path / "fl-cache"
    code = (
        "import sys, json\n"
        "from treesearch.agents.mutation import localize\n"
        "from treesearch.scoring import TestSpec\n"
        "spec = TestSpec(**json.loads(sys.argv[1]))\n"
        "loc = localize(sys.argv[2], spec, tree='tree-a', cache_dir=sys.argv[3])\n"
        "print(json.dumps([loc.cached, [s.line for s in loc.lines]]))  # noqa: prints\n"
    )
    args = json.dumps({"command": gated.command, "timeout": gated.timeout, "env": dict(gated.env)})
    first = subprocess.Popen(
        [sys.executable, "-c", code, args, str(root), str(folder)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        end = time.monotonic() + 60
        while not started.exists() and first.poll() is None and time.monotonic() < end:
            time.sleep(0.02)
        assert started.exists(), "the first process's tests never started"
        started.unlink()
        second: list[Localization] = []
        waiter = threading.Thread(
            target=lambda: second.append(localize(root, gated, tree="tree-a", cache_dir=folder))
        )
        waiter.start()
        # The second call waits on the first's lock (without it, it would start its own run:
        # its gate test touches `started` again).
        time.sleep(0.5)
        ran_again = started.exists()
        release.touch()
        waiter.join(timeout=120)
        out, _ = first.communicate(timeout=120)
    finally:
        release.touch()
        if first.poll() is None:
            first.kill()
    cached_first, lines_first = json.loads(out.strip().splitlines()[-1])
    assert not cached_first
    assert not ran_again
    assert second and second[0].cached and second[0].seconds == 0.0
    assert [s.line for s in second[0].lines] == lines_first
