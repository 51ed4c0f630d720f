"""Run a ``TestSpec`` in a workspace through the sandbox; turn what it left into a ``TestRun``."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shlex
import shutil
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from treesearch import lifecycle, sandbox
from treesearch._environ import inherited
from treesearch.errors import SandboxError, ScoringError
from treesearch.scoring._words import shell_words
from treesearch.scoring.junit import (
    MAX_REPORT_BYTES,
    Report,
    ReportError,
    generic_test_id,
    parse_junit,
    pytest_node_id,
    read_report,
)
from treesearch.scoring.probe import Probe, interrupt_banner, probe_env, read_probe
from treesearch.scoring.results import Outcome, RunStatus, TestCase, TestRun, worse
from treesearch.scoring.spec import TestSpec
from treesearch.scoring.warm import WarmClone, WarmRunner
from treesearch.types import ProcessResult

_OUTPUT_LIMIT = 64 * 1024  # the sandbox's default: bytes kept of each stream
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
_RUN_IDS = itertools.count()
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
    warm: WarmRunner | None = None,
    output_limit: int | None = None,
) -> TestRun:
    """Run the spec's command in ``workspace`` and read its per-test results.

    ``only`` replaces the spec's explicit test ids (used for re-runs). ``warm``: run pytest
    commands in a warm runner's forked children where that is the same as a cold run (it falls
    back to cold runs itself, with a note). The workspace is left as
    it was: a report path inside it is put back the way it was found, and Python writes no
    bytecode unless the spec's env says otherwise. ``output_limit``: bytes kept of the run's
    output (its first and last half; default: the sandbox's), e.g. larger for a grading run
    whose whole log is read.

    Raises:
        ScoringError: the workspace or the spec's ``cwd`` is not a folder inside it.
    """
    cwd = _working_dir(workspace, spec.cwd)
    tests = tuple(spec.tests if only is None else only)
    # The files of this run, in a folder kept for the process's life (made and removed again
    # for every run, it cost a millisecond of a 50 ms warm run): each run's names are its own.
    tmp = lifecycle.process_dir("score")
    run_id = f"{os.getpid()}-{next(_RUN_IDS)}"
    ours = [tmp / f"junit-{run_id}.xml", tmp / f"probe-{run_id}.json"]
    try:
        extra: list[str] = []
        report_path: Path | None = None
        if spec.junit_xml is not None:
            report_path = cwd / spec.junit_xml
        if spec.is_pytest:
            if report_path is None:
                report_path = ours[0]
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
        probe_file = ours[1]
        if spec.is_pytest:
            env.update(probe_env(spec.command, tmp / "plugins", probe_file, env, inherited()))
        with _report_slot(report_path, tmp / f"previous-{run_id}"):
            try:
                if warm is not None:
                    proc = warm.run(
                        command,
                        cwd,
                        timeout=spec.timeout,
                        extra_env=env,
                        workspace=workspace,
                        cold=sandbox.run,
                        pytest=spec.is_pytest,
                        report=report_path,
                        probe=probe_file,
                    )
                else:
                    proc = sandbox.run(
                        command,
                        cwd,
                        timeout=spec.timeout,
                        extra_env=env,
                        output_limit=_OUTPUT_LIMIT if output_limit is None else output_limit,
                    )
            except SandboxError as exc:
                raise ScoringError(f"cannot run the tests `{shown}` in {cwd}: {exc}") from exc
            report: Report | ReportError | None = None
            if report_path is not None and not proc.timed_out:
                try:
                    report = parse_junit(read_report(report_path, max_report_bytes))
                except ReportError as exc:
                    # Our own report file lives in a temporary folder: keep its name out of
                    # the message, which is recorded in the (deterministic) search graph.
                    text = str(exc)
                    if spec.junit_xml is None:
                        text = text.replace(str(report_path), "(pytest's --junitxml file)")
                    report = ReportError(text)
        probe = read_probe(probe_file) if spec.is_pytest and not proc.timed_out else None
    finally:
        for path in ours:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    return _make_run(spec, proc, report, cwd, shown, probe, full_output=output_limit is not None)


def warm_up(spec: TestSpec, workspace: str | os.PathLike[str], warm: WarmRunner) -> None:
    """Start the warm server that ``run_tests(spec, workspace, warm=warm)`` will use
    (``WarmRunner.prepare``), so that it imports pytest while other work goes on; nothing runs.

    Raises:
        ScoringError: the workspace or the spec's ``cwd`` is not a folder inside it.
    """
    if spec.is_pytest:
        cwd = _working_dir(workspace, spec.cwd)
        warm.prepare(spec.command, cwd, extra_env={**_QUIET_ENV, **spec.env})


def warm_clone(
    spec: TestSpec, workspace: str | os.PathLike[str], warm: WarmRunner
) -> WarmClone | None:
    """A copy of the warm server that ``run_tests(spec, workspace, warm=warm)`` uses, for
    another process (``WarmRunner.clone``); ``None`` when there is none running.

    Raises:
        ScoringError: the workspace or the spec's ``cwd`` is not a folder inside it.
    """
    if not spec.is_pytest:
        return None
    cwd = _working_dir(workspace, spec.cwd)
    return warm.clone(spec.command, cwd, extra_env={**_QUIET_ENV, **spec.env})


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
            words = shell_words(command)
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


def _output(proc: ProcessResult, full: bool = False) -> str:
    out = proc.stdout if full else proc.stdout[-OUTPUT_TAIL_CHARS:]
    if proc.stderr.strip():
        out += ("\n" if out and not out.endswith("\n") else "") + "[stderr]\n"
        out += proc.stderr if full else proc.stderr[-STDERR_TAIL_CHARS:]
    return out


def _make_run(
    spec: TestSpec,
    proc: ProcessResult,
    report: Report | ReportError | None,
    cwd: Path,
    shown: str,
    probe: Probe | None = None,
    *,
    full_output: bool = False,
) -> TestRun:
    base = TestRun(
        status=RunStatus.OK,
        exit_code=proc.exit_code,
        timed_out=proc.timed_out,
        seconds=proc.seconds,
        output=_output(proc, full_output),
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
    not_found = _not_found(proc)
    if report is None:  # exit code only
        if signal_note:
            return replace(base, status=RunStatus.CRASHED, problem=signal_note)
        if not_found:
            return replace(base, status=RunStatus.INVALID, problem=not_found)
        return base
    if isinstance(report, ReportError):
        return _unreadable_report(spec, proc, base, report, signal_note, not_found)
    tests, collect_errors = _cases(report, spec.is_pytest, cwd, proc.stdout, probe)
    run = replace(base, tests=tests, suite_errors=report.suite_errors)
    if spec.is_pytest and probe is not None:
        collect_errors = list(dict.fromkeys([*probe.collect_errors, *collect_errors]))
    if not tests:
        note = f" ({_PYTEST_EXIT[code]})" if spec.is_pytest and code in _PYTEST_EXIT else ""
        if report.suite_errors:
            note = f" ({report.suite_errors} suite error(s))" + note
        if not_found:
            note += f"; {not_found}"
        return replace(run, status=RunStatus.INVALID, problem=f"the report lists no tests{note}")
    if signal_note:
        return replace(run, status=RunStatus.CRASHED, problem=signal_note)
    if not spec.is_pytest:
        return run
    return _pytest_verdict(run, code, collect_errors, probe)


def _unreadable_report(
    spec: TestSpec,
    proc: ProcessResult,
    base: TestRun,
    report: ReportError,
    signal_note: str,
    not_found: str,
) -> TestRun:
    """A run whose JUnit report could not be read: crashed if tests ran, else invalid."""
    if not_found:
        return replace(base, status=RunStatus.INVALID, problem=not_found)
    everything = proc.stdout + "\n" + proc.stderr
    if signal_note or _SUITE_RAN.search(everything):
        why = f"{report}, although the output shows that tests ran"
        if signal_note:
            why = f"{signal_note}; {report}"
        return replace(base, status=RunStatus.CRASHED, problem=why)
    code = proc.exit_code
    return replace(
        base,
        status=RunStatus.INVALID,
        problem=f"{report}, and the output shows no sign that tests ran"
        + (f" ({_PYTEST_EXIT[code]})" if spec.is_pytest and code in _PYTEST_EXIT else ""),
    )


def _pytest_verdict(
    run: TestRun, code: int, collect_errors: list[str], probe: Probe | None
) -> TestRun:
    """A pytest run with tests in its report: what its exit code, collection errors and the
    probe say about whether the result is complete."""
    if collect_errors:
        # Whatever the flags (--continue-on-collection-errors too): a module that cannot be
        # collected hides all of its tests, so the passes of the others are no result.
        return replace(
            run,
            status=RunStatus.ERROR,
            problem="errors during collection: "
            + ", ".join(collect_errors[:10])
            + (f" and {len(collect_errors) - 10} more" if len(collect_errors) > 10 else "")
            + " (fix the module, or leave it out of the test command)",
        )
    cut_short = _cut_short(run, probe)
    if cut_short:
        return replace(run, status=RunStatus.INVALID, problem=cut_short)
    stop = probe.interrupted if probe is not None else ""
    if code == 2 and stop.startswith("Interrupted: stopping after ") and run.failing:
        return replace(run, problem=stop.removeprefix("Interrupted: "))  # xdist's -x
    if code == 2:
        return replace(run, status=RunStatus.CRASHED, problem=_PYTEST_EXIT[2])
    if code in (3, 4):
        return replace(run, status=RunStatus.CRASHED, problem=_PYTEST_EXIT[code])
    if probe is not None and probe.collected is not None and probe.finished < probe.collected:
        return replace(
            run,
            problem=f"{probe.maxfail_stop}: {probe.finished} of {probe.collected} collected "
            "tests ran",
        )
    return run


def _not_found(proc: ProcessResult) -> str:
    """Why the shell could not run the command (exit 127: not found, 126: not executable)."""
    if proc.exit_code not in (126, 127):
        return ""
    lines = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
    what = "was not found" if proc.exit_code == 127 else "could not be executed"
    last = lines[-1].strip()[:300] if lines else ""
    return f"the test command {what} (exit code {proc.exit_code})" + (f": {last}" if last else "")


def _cut_short(run: TestRun, probe: Probe | None) -> str:
    """Why a pytest session did not run its tests to the end ('' when it did, or when only
    -x/--maxfail stopped it after a failure)."""
    counts = ""
    if probe is not None and probe.collected is not None:
        counts = f"{probe.finished} of {probe.collected} collected tests ran"
    interrupted = probe.interrupted if probe is not None else interrupt_banner(run.output)
    if interrupted.startswith("Interrupted: stopping after ") and run.failing:
        interrupted = ""  # -x/--maxfail under pytest-xdist, which stops the session this way
    if interrupted:
        return (
            f"the test session was cut short ({interrupted})"
            + (f": {counts}" if counts else "")
            + "; the results are incomplete"
        )
    if probe is None or probe.collected is None or probe.finished >= probe.collected:
        return ""
    if probe.maxfail_stop and run.failing:
        return ""
    return f"pytest stopped early: {counts}; the results are incomplete"


def _cases(
    report: Report, is_pytest: bool, cwd: Path, stdout: str, probe: Probe | None = None
) -> tuple[tuple[TestCase, ...], list[str]]:
    """The report's tests (one per id, the worse outcome kept) and the ids of the collection
    errors among them (pytest only)."""
    xpassed = {m.group(1) for m in _XPASS_LINE.finditer(stdout)} if is_pytest else set()
    not_run: frozenset[str] = frozenset()
    if probe is not None:
        xpassed |= probe.xpassed
        not_run = probe.not_run
    merged: dict[str, TestCase] = {}
    collect_errors: list[str] = []
    for raw in report.cases:
        test_id = pytest_node_id(raw, cwd) if is_pytest else generic_test_id(raw)
        if raw.result == "failure":
            outcome = Outcome.FAILED
        elif raw.result == "error":
            outcome = Outcome.ERROR
            if is_pytest and raw.message == "collection failure":
                collect_errors.append(test_id)
        elif raw.result == "skipped":
            outcome = Outcome.XFAIL if raw.skip_type == "pytest.xfail" else Outcome.SKIPPED
            # xfail(run=False): never run, so never a pass of any kind: a skip.
            if outcome is Outcome.XFAIL and (
                test_id in not_run or raw.message.startswith("[NOTRUN]")
            ):
                outcome = Outcome.SKIPPED
        else:
            # pytest's JUnit writes a non-strict xpass as a pass; the probe (or, without it,
            # the terminal summary with -rX or -rA) names them.
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
    return tuple(merged.values()), collect_errors


def recheck_changed(
    spec: TestSpec,
    workspace: str | os.PathLike[str],
    run: TestRun,
    parent: TestRun,
    *,
    max_report_bytes: int = MAX_REPORT_BYTES,
    warm: WarmRunner | None = None,
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
            warm=warm,
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
