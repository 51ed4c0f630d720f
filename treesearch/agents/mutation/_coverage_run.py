"""The coverage run behind spectrum-based fault localisation: one coverage context per test.

The test command (a plain pytest invocation) runs under coverage.py with a small pytest plugin
that switches coverage's context to each test's node id and logs each test's outcome (so a run
that times out still says which tests passed). Everything lives in a temporary folder outside
the workspace. See ``localize`` for how the data are used.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from treesearch import lifecycle
from treesearch.scoring import TestRun, TestSpec, run_tests
from treesearch.scoring.warm_plan import register_boot

__all__ = ["CoverageRun", "Wrapped", "run_with_coverage", "wrap"]

_PLUGIN_MODULE = "_treesearch_fl_contexts"
_PLUGIN_SOURCE = '''\
"""Written by treesearch: one coverage context per test (its node id), and an outcome log."""
import coverage
import pytest

LOG = None


def _switch(name):
    cov = coverage.Coverage.current()
    if cov is not None:
        cov.switch_context(name)


def _log(*fields):
    if LOG is not None:
        with open(LOG, "a", encoding="utf-8") as handle:
            handle.write("\\t".join(f.replace("\\t", " ").replace("\\n", " ") for f in fields))
            handle.write("\\n")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _log("start", item.nodeid)
    _switch(item.nodeid)


def pytest_runtest_logreport(report):
    _log("report", report.nodeid, report.when, report.outcome)


def pytest_runtest_logfinish(nodeid, location):
    _switch("")
'''
# argv: python -c BOOT <rcfile> <plugin dir> <log file> <pytest args...>
_BOOT = (
    "import sys; rc, d, log = sys.argv[1:4]; sys.path.append(d); "
    f"import {_PLUGIN_MODULE} as p; p.LOG = log; "
    "from coverage.cmdline import main; "
    f"sys.exit(main(['run', '--rcfile=' + rc, '-m', 'pytest', '-p', '{_PLUGIN_MODULE}', "
    "*sys.argv[4:]]))"
)
register_boot(_BOOT)  # it runs pytest as `python -m pytest` would: a warm child may run it
_PYTHON_WORD = re.compile(r"^python(\d+(\.\d+)*)?$")
_PYTEST_WORD = re.compile(r"^py\.?test$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SHELL_META = re.compile(r"[;&|<>`$(){}\n*?]")


@dataclass(frozen=True)
class Wrapped:
    python: str
    args: tuple[str, ...]
    env: dict[str, str]


def wrap(spec: TestSpec) -> Wrapped | str:
    """Split a pytest command into (python, pytest args, env); a reason string if impossible."""
    if not spec.is_pytest:
        return "the test command is not a pytest command"
    if isinstance(spec.command, str):
        if _SHELL_META.search(spec.command):
            return "the test command uses shell syntax that cannot be wrapped in coverage"
        try:
            words = shlex.split(spec.command)
        except ValueError as exc:
            return f"cannot split the test command: {exc}"
    else:
        words = list(spec.command)
    env: dict[str, str] = {}
    while words and _ASSIGNMENT.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if (
        len(words) >= 3
        and _PYTHON_WORD.match(os.path.basename(words[0]))
        and words[1:3]
        == [
            "-m",
            "pytest",
        ]
    ):
        return Wrapped(words[0], tuple(words[3:]), env)
    if words and _PYTEST_WORD.match(os.path.basename(words[0])):
        return Wrapped("python", tuple(words[1:]), env)
    return "the test command is neither `python -m pytest ...` nor `pytest ...`"


@dataclass
class CoverageRun:
    run: TestRun
    contexts: dict[str, dict[str, set[int]]]  # context -> abs path -> lines
    log: list[list[str]]
    problem: str = ""


def run_with_coverage(
    spec: TestSpec, workspace: Path, wrapped: Wrapped, timeout: float, *, warm: Any = None
) -> CoverageRun:
    """The tests of ``spec`` under coverage, one context per test. ``warm``: the search's warm
    test runner (``scoring.warm.WarmRunner``), used once it is ``ready`` (a coverage run is
    never the first run's check)."""
    from coverage import CoverageData  # imported here: only this path needs coverage.py

    with lifecycle.scratch_dir("fl") as tmp:
        folder = Path(tmp)
        (folder / f"{_PLUGIN_MODULE}.py").write_text(_PLUGIN_SOURCE, encoding="utf-8")
        data_file = folder / "coverage.data"
        rc = folder / "coveragerc"
        root = os.path.realpath(workspace)
        rc.write_text(
            "[run]\n"
            f"data_file = {data_file}\n"
            f"include = {root}{os.sep}*\n"
            # SIGTERM (the sandbox's first signal on a timeout) still writes the data.
            "sigterm = true\n"
            "disable_warnings = no-data-collected, module-not-measured, couldnt-parse\n",
            encoding="utf-8",
        )
        log_file = folder / "outcomes.log"
        command = (
            wrapped.python,
            "-c",
            _BOOT,
            str(rc),
            str(folder),
            str(log_file),
            *wrapped.args,
        )
        # sys.monitoring (coverage's default core on Python 3.14+) cannot switch contexts: ask
        # for the C tracer (older coverage ignores the variable).
        env = {
            **spec.env,
            **wrapped.env,
            "COVERAGE_FILE": str(data_file),
            "COVERAGE_CORE": "ctrace",
        }
        run_spec = TestSpec(
            command=command,
            cwd=spec.cwd,
            timeout=timeout,
            env=env,
            tests=spec.tests,
            runner="pytest",
        )
        ready = warm is not None and warm.ready
        run = run_tests(run_spec, workspace, warm=warm if ready else None)
        log: list[list[str]] = []
        with contextlib.suppress(OSError):
            log = [
                line.split("\t")
                for line in log_file.read_text(encoding="utf-8", errors="replace").splitlines()
            ]
        contexts: dict[str, dict[str, set[int]]] = {}
        if not data_file.exists():
            tail = run.output.strip().splitlines()[-1:] or [run.problem]
            return CoverageRun(run, contexts, log, f"coverage wrote no data ({tail[0][:200]})")
        try:
            data = CoverageData(basename=str(data_file))
            data.read()
            for path in data.measured_files():
                for lineno, names in data.contexts_by_lineno(path).items():
                    for name in names:
                        contexts.setdefault(name, {}).setdefault(path, set()).add(lineno)
        except Exception as exc:  # coverage's data errors have no common base class
            return CoverageRun(run, {}, log, f"cannot read the coverage data: {exc}")
        return CoverageRun(run, contexts, log)
