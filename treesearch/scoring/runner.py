"""Run a ``TestSpec`` in a workspace through the sandbox; turn what it left into a ``TestRun``."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from treesearch import lifecycle, sandbox
from treesearch.errors import SandboxError, ScoringError
from treesearch.scoring.junit import (
    MAX_REPORT_BYTES,
    Report,
    ReportError,
    generic_test_id,
    parse_junit,
    pytest_node_id,
    read_report,
)
from treesearch.scoring.results import Outcome, RunStatus, TestCase, TestRun, worse
from treesearch.scoring.spec import TestSpec
from treesearch.types import ProcessResult

OUTPUT_TAIL_CHARS = 8000
"""Characters of standard output kept in ``TestRun.output``."""
STDERR_TAIL_CHARS = 4000
"""Characters of standard error kept in ``TestRun.output``."""

# Set for every run unless the spec's env overrides them: scoring must not write into the state
# it scores (a __pycache__ folder would change the next capture's tree hash).
_QUIET_ENV = {"PYTHONDONTWRITEBYTECODE": "1"}

# Output that shows a test suite ran (pytest's summary and collection lines, go test, jest).
_SUITE_RAN = re.compile(
    r"\b\d+ (?:passed|failed|errors?|xfailed|xpassed)\b"
    r"|^collected \d+ items?"
    r"|^(?:--- (?:PASS|FAIL)|ok\s+\S|FAIL\s+\S)"
    r"|^Tests:\s+\d",
    re.MULTILINE,
)
_XPASS_LINE = re.compile(r"^XPASS (\S.*?)(?: - .*)?$", re.MULTILINE)

_PYTEST_EXIT = {
    2: "pytest was interrupted",
    3: "pytest hit an internal error",
    4: "pytest was called wrongly (usage error, e.g. a test id that does not exist)",
    5: "pytest collected no tests",
}


def run_tests(
    spec: TestSpec,
    workspace: str | os.PathLike[str],
    *,
    only: Sequence[str] | None = None,
    max_report_bytes: int = MAX_REPORT_BYTES,
) -> TestRun:
    """Run the spec's command in ``workspace`` and read its per-test results.

    ``only`` replaces the spec's explicit test ids (used for re-runs). The workspace is left as
    it was: a report path inside it is put back the way it was found, and Python writes no
    bytecode unless the spec's env says otherwise.

    Raises:
        ScoringError: the workspace or the spec's ``cwd`` is not a folder inside it.
    """
    cwd = _working_dir(workspace, spec.cwd)
    tests = tuple(spec.tests if only is None else only)
    with lifecycle.scratch_dir("score") as tmp:
        extra: list[str] = []
        report_path: Path | None = None
        if spec.junit_xml is not None:
            report_path = cwd / spec.junit_xml
        if spec.is_pytest:
            if report_path is None:
                report_path = Path(tmp) / "junit.xml"
                extra.append(f"--junitxml={report_path}")
            # xunit1 adds the file attribute, which makes node ids exact; without the cache
            # plugin pytest writes no .pytest_cache folder into the workspace.
            extra += ["-o", "junit_family=xunit1"]
            if not _has_pytest_plugin_off(spec.command, "cacheprovider"):
                extra += ["-p", "no:cacheprovider"]
        extra += tests
        command: str | list[str]
        if isinstance(spec.command, str):
            command = spec.command + (" " + shlex.join(extra) if extra else "")
            shown = command
        else:
            command = [*spec.command, *extra]
            shown = shlex.join(command)
        env = {**_QUIET_ENV, **spec.env}
        with _report_slot(report_path, Path(tmp) / "previous-report"):
            try:
                proc = sandbox.run(command, cwd, timeout=spec.timeout, extra_env=env)
            except SandboxError as exc:
                raise ScoringError(f"cannot run the tests `{shown}` in {cwd}: {exc}") from exc
            report: Report | ReportError | None = None
            if report_path is not None and not proc.timed_out:
                try:
                    report = parse_junit(read_report(report_path, max_report_bytes))
                except ReportError as exc:
                    report = exc
    return _make_run(spec, proc, report, cwd, shown)


def _working_dir(workspace: str | os.PathLike[str], rel: str) -> Path:
    ws = Path(os.path.abspath(os.fspath(workspace)))
    if not ws.is_dir():
        raise ScoringError(f"workspace {ws} is not a folder")
    cwd = (ws / rel).resolve()
    if cwd != ws.resolve() and ws.resolve() not in cwd.parents:
        raise ScoringError(f"test cwd {rel!r} leads outside the workspace {ws}")
    if not cwd.is_dir():
        raise ScoringError(f"test cwd {rel!r} is not a folder in the workspace {ws}")
    return cwd


def _has_pytest_plugin_off(command: str | Sequence[str], plugin: str) -> bool:
    if isinstance(command, str):
        try:
            words = shlex.split(command)
        except ValueError:
            return False
    else:
        words = list(command)
    off = f"no:{plugin}"
    return any(
        w == f"-p{off}" or (w == off and i > 0 and words[i - 1] == "-p")
        for i, w in enumerate(words)
    )


@contextlib.contextmanager
def _report_slot(path: Path | None, keep: Path) -> Iterator[None]:
    """Clear the report path for the run (no stale report is ever read) and afterwards put back
    exactly what was there, so scoring leaves no report file behind in the workspace."""
    if path is None:
        yield
        return
    had_previous = False
    if path.is_symlink() or path.is_file():
        shutil.move(os.fspath(path), os.fspath(keep))
        had_previous = True
    try:
        yield
    finally:
        if path.is_symlink() or path.is_file():
            with contextlib.suppress(OSError):
                path.unlink()
        if had_previous:
            with contextlib.suppress(OSError):
                shutil.move(os.fspath(keep), os.fspath(path))


def _output(proc: ProcessResult) -> str:
    out = proc.stdout[-OUTPUT_TAIL_CHARS:]
    if proc.stderr.strip():
        out += ("\n" if out and not out.endswith("\n") else "") + "[stderr]\n"
        out += proc.stderr[-STDERR_TAIL_CHARS:]
    return out


def _make_run(
    spec: TestSpec,
    proc: ProcessResult,
    report: Report | ReportError | None,
    cwd: Path,
    shown: str,
) -> TestRun:
    base = TestRun(
        status=RunStatus.OK,
        exit_code=proc.exit_code,
        timed_out=proc.timed_out,
        seconds=proc.seconds,
        output=_output(proc),
        has_report=spec.is_pytest or spec.junit_xml is not None,
        command=shown,
    )
    code = proc.exit_code
    if proc.timed_out:
        return replace(
            base,
            status=RunStatus.TIMEOUT,
            problem=f"the tests did not finish within {spec.timeout:g} s; the process group "
            "was ended",
        )
    if code is None:
        reason = proc.stderr.strip().splitlines()
        return replace(
            base,
            status=RunStatus.CRASHED,
            problem="the test command could not start" + (f": {reason[-1]}" if reason else ""),
        )
    signal_note = f"the test command was killed by signal {-code}" if code < 0 else ""
    if report is None:  # exit code only
        if signal_note:
            return replace(base, status=RunStatus.CRASHED, problem=signal_note)
        return base
    if isinstance(report, ReportError):
        everything = proc.stdout + "\n" + proc.stderr
        if signal_note or _SUITE_RAN.search(everything):
            why = f"{report}, although the output shows that tests ran"
            if signal_note:
                why = f"{signal_note}; {report}"
            return replace(base, status=RunStatus.CRASHED, problem=why)
        return replace(
            base,
            status=RunStatus.INVALID,
            problem=f"{report}, and the output shows no sign that tests ran"
            + (f" ({_PYTEST_EXIT[code]})" if spec.is_pytest and code in _PYTEST_EXIT else ""),
        )
    tests = _cases(report, spec.is_pytest, cwd, proc.stdout)
    run = replace(base, tests=tests, suite_errors=report.suite_errors)
    if not tests:
        note = f" ({_PYTEST_EXIT[code]})" if spec.is_pytest and code in _PYTEST_EXIT else ""
        if report.suite_errors:
            note = f" ({report.suite_errors} suite error(s))" + note
        return replace(run, status=RunStatus.INVALID, problem=f"the report lists no tests{note}")
    if signal_note:
        return replace(run, status=RunStatus.CRASHED, problem=signal_note)
    if spec.is_pytest and code == 2 and not any(t.outcome is Outcome.ERROR for t in tests):
        return replace(run, status=RunStatus.CRASHED, problem=_PYTEST_EXIT[2])
    if spec.is_pytest and code in (3, 4):
        return replace(run, status=RunStatus.CRASHED, problem=_PYTEST_EXIT[code])
    if spec.is_pytest and code == 2:
        return replace(
            run,
            problem="errors during collection: "
            + ", ".join(t.id for t in tests if t.outcome is Outcome.ERROR),
        )
    return run


def _cases(report: Report, is_pytest: bool, cwd: Path, stdout: str) -> tuple[TestCase, ...]:
    xpassed = {m.group(1) for m in _XPASS_LINE.finditer(stdout)} if is_pytest else set()
    merged: dict[str, TestCase] = {}
    for raw in report.cases:
        test_id = pytest_node_id(raw, cwd) if is_pytest else generic_test_id(raw)
        if raw.result == "failure":
            outcome = Outcome.FAILED
        elif raw.result == "error":
            outcome = Outcome.ERROR
        elif raw.result == "skipped":
            outcome = Outcome.XFAIL if raw.skip_type == "pytest.xfail" else Outcome.SKIPPED
        else:
            # pytest's JUnit writes a non-strict xpass as a pass; its terminal summary (with
            # -rX or -rA) names them.
            outcome = Outcome.XPASS if test_id in xpassed else Outcome.PASSED
        case = TestCase(
            id=test_id,
            outcome=outcome,
            classname=raw.classname,
            name=raw.name,
            seconds=raw.seconds,
            message=raw.message,
            text=raw.text if outcome.is_failure else "",
        )
        previous = merged.get(test_id)
        if previous is not None and worse(previous.outcome, outcome) is previous.outcome:
            continue
        merged[test_id] = case
    return tuple(merged.values())


def recheck_changed(
    spec: TestSpec,
    workspace: str | os.PathLike[str],
    run: TestRun,
    parent: TestRun,
    *,
    max_report_bytes: int = MAX_REPORT_BYTES,
) -> tuple[TestRun, int]:
    """Re-run (``spec.reruns`` times) the tests whose outcome differs from ``parent``'s; returns
    the updated run and the number of re-runs made.

    A test whose pass/fail class is not the same in every run is marked flaky and gets the
    majority outcome (a tie goes to the worse one). Only tests present in both runs are
    compared; pytest re-runs only those tests, other runners re-run the whole command.
    Re-runs that are not OK (timeout, crash) are ignored.
    """
    if spec.reruns <= 0 or run.status is not RunStatus.OK or parent.status is not RunStatus.OK:
        return run, 0
    changed = [
        t.id
        for t in run.tests
        if (old := parent.outcome(t.id)) is not None and _klass(old) != _klass(t.outcome)
    ]
    if not changed:
        return run, 0
    history: dict[str, list[Outcome]] = {test_id: [] for test_id in changed}
    for _ in range(spec.reruns):
        again = run_tests(
            spec,
            workspace,
            only=changed if spec.is_pytest else None,
            max_report_bytes=max_report_bytes,
        )
        if again.status is not RunStatus.OK:
            continue
        for test_id in changed:
            outcome = again.outcome(test_id)
            if outcome is not None:
                history[test_id].append(outcome)
    tests = []
    for t in run.tests:
        if t.id not in history:
            tests.append(t)
            continue
        seen = [t.outcome, *history[t.id]]
        flaky = len({_klass(o) for o in seen}) > 1
        outcome = t.outcome
        if flaky:
            counts = Counter(seen)
            best = max(counts.values())
            tied = [o for o in seen if counts[o] == best]
            outcome = tied[0]
            for o in tied[1:]:
                outcome = worse(outcome, o)
        tests.append(replace(t, outcome=outcome, reruns=tuple(history[t.id]), flaky=flaky))
    return replace(run, tests=tuple(tests)), spec.reruns


def _klass(outcome: Outcome) -> str:
    if outcome.is_pass:
        return "pass"
    if outcome.is_failure:
        return "fail"
    return "skip"
