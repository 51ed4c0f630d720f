"""Failing tests first, and per-test time limits from the parent's measured durations.

``scoring.order`` (``auto``, ``failing_first``, ``progress_first``, ``all``):

* ``failing_first``: a candidate's test run starts with the tests its parent failed (a
  *screen*: at most ``SCREEN_MAX`` of them, the first in the parent's report order; pytest node
  ids) and stops at the first one that still fails. When all of them pass, the rest of the
  suite runs after them in the same pytest session (one test run): the node's result is the
  result ``all`` gives, with the parent's failing tests run first, and is cached as such. A
  candidate whose screen failed keeps the screen's result, marked *partial*
  (``ScoreResult.partial``): what is known (passed, failed) and how many tests did not run. Its
  score is a lower bound: every test that did not run counts as failed (not run is never a
  pass). A suite whose results depend on the order its tests run in should use ``all``.
* ``progress_first``: the same screen, but every one of the parent's failing tests runs (no
  stop at the first), and the session always goes on to the rest. A candidate that fixes some
  of them is fully run, and a policy can climb through it to a fix that needs several edits
  (``failing_first`` hides it). One that fixes none of them cannot score above its parent
  (its other tests passed in the parent at best); it is stopped as soon as more of its tests
  have failed than its parent's (it then scores *below* its parent, whatever the tests not run
  do) and left partial. A candidate that may still tie its parent (a neutral edit: the step a
  two-edit fix often goes through) is run to the end, so no policy has to pay a second run to
  learn that it ties.
* ``all``: every run is a full run (as before this option existed).
* ``auto`` (the default): ``progress_first`` in a *repair search* under a policy that seldom
  builds on a screened-out candidate, ``all`` otherwise. A repair search is one whose root
  state's search-test run finished with per-test results (status ``ok``) and has at least one
  failing (failed or errored) test; the app tells the scorer (``Scorer.repair``) once the root
  is scored or replayed, and the policy (``search.policies.SCREENED_BY_DEFAULT``).

Screens need pytest (the runner orders and stops tests with a small plugin, ``pytest_order``): with
another runner, or an interpreter that ignores ``PYTHONPATH`` (``-I``), ``auto`` runs every
test and ``failing_first`` is a config error.

``scoring.per_test_timeout`` (``auto``, ``off``, or seconds): a limit on each test's call
phase, enforced in the pytest process (SIGALRM), so that a candidate that loops fails its first
test at once instead of costing the whole run's timeout. ``auto`` gives each test
``max(TIMEOUT_FLOOR, TIMEOUT_FACTOR x its duration in the parent's run)``; a test the parent did
not measure (a new test, or a parent scored before a resume) gets no per-test limit; the root
and held-out grade runs get none. A test cut by its limit fails with a message that says so;
a run with such a cut is not cached (another limit could let the test finish).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from treesearch import lifecycle
from treesearch.scoring.probe import ORDER_ENV
from treesearch.scoring.results import (
    SUMMARY,
    Outcome,
    Partial,
    RunStatus,
    ScoreResult,
    TestCase,
    TestRun,
)
from treesearch.scoring.runner import run_tests
from treesearch.scoring.spec import TestSpec
from treesearch.scoring.warm import WarmRunner

SCREEN_MAX = 50
"""Most parent-failing tests a screen runs (as many as a node's summary lists, so a resumed
search screens exactly as one that never stopped)."""
TIMEOUT_FACTOR = 20.0
"""``auto`` per-test limit: this many times the test's duration in the parent's run ..."""
TIMEOUT_FLOOR = 2.0
"""... and at least this many seconds (a loaded machine must not cut a healthy fast test)."""
TIMEOUT_MARK = "treesearch per-test timeout"
"""Start of the failure message of a test cut by its limit (``pytest_order.TIMEOUT_MARK``)."""


@dataclass(frozen=True)
class PerTestTimeout:
    """``scoring.per_test_timeout``: ``auto`` (from the parent's durations), ``off``, or a
    fixed number of seconds for every test (``seconds``)."""

    mode: str = "auto"
    """``auto``, ``off`` or ``fixed``."""
    seconds: float | None = None
    """The limit of ``fixed``."""

    @classmethod
    def of(cls, value: str | float) -> PerTestTimeout:
        """From a validated config value (``ScorerConfig.per_test_timeout``)."""
        return cls(value) if isinstance(value, str) else cls("fixed", float(value))


def is_repair(tests: Mapping[str, Any] | None) -> bool:
    """Whether a root node's test summary (``tests`` of the graph's root) makes the search a
    repair search: status ``ok`` and at least one failing test."""
    if not tests:
        return False
    return tests.get("status") == "ok" and bool(tests.get("failing"))


def screen_ids(parent: TestRun | None) -> tuple[str, ...]:
    """The tests a child of ``parent`` screens on: the first ``SCREEN_MAX`` failing ones of an
    OK run (a broken run's failures are not test results)."""
    if parent is None or parent.status is not RunStatus.OK:
        return ()
    return tuple(t.id for t in parent.failing)[:SCREEN_MAX]


def _cut(case: TestCase) -> bool:
    return TIMEOUT_MARK in case.message


def durations(result: ScoreResult | None) -> dict[str, float]:
    """Measured durations (seconds) per test id of a state: its own run's, over those it
    inherited from its parent when it is partial; tests cut by a limit are left out."""
    if result is None or result.score_name == SUMMARY:
        return {}
    out = dict(result.partial.durations) if result.partial is not None else {}
    out.update({t.id: t.seconds for t in result.run.tests if not _cut(t)})
    return out


def per_test_limits(policy: PerTestTimeout, measured: Mapping[str, float]) -> dict[str, Any] | None:
    """The plugin's ``timeouts`` for a run (``None``: no per-test limit)."""
    if policy.mode == "off":
        return None
    if policy.mode == "fixed":
        return {"default": policy.seconds, "tests": {}}
    if not measured:
        return None
    tests = {
        test_id: round(max(TIMEOUT_FLOOR, TIMEOUT_FACTOR * max(seconds, 0.0)), 3)
        for test_id, seconds in measured.items()
    }
    return {"default": None, "tests": tests}


@dataclass(frozen=True)
class OrderReport:
    """What the ``pytest_order`` plugin says it did in one run."""

    selected: int | None
    """Tests the screen ran first (``None``: no screen)."""
    deselected: int
    """Tests after the screened ones that did not run (the screen stopped the session)."""
    ran: int
    """Tests whose run protocol finished."""
    timed_out: tuple[str, ...]
    """Tests cut by their per-test limit."""
    aborted: str
    """A test that swallowed its timeout, after which pytest was stopped."""
    stopped: bool = False
    """The screen stopped the session (the tests after it did not run)."""
    worse: str = ""
    """The test whose failure stopped a ``progress_first`` session that made no progress: from
    it on more tests had failed than in the parent."""


def _read_report(path: Path) -> OrderReport | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        screen = data.get("screen")
        selected, deselected, stopped, worse = None, 0, False, ""
        if isinstance(screen, dict):
            selected = int(screen["screened"])
            stopped = bool(screen.get("stopped"))
            worse = str(screen.get("worse") or "")
            ran = int(data.get("ran") or 0)
            deselected = max(int(screen["collected"]) - max(ran, selected), 0)
        return OrderReport(
            selected=selected,
            deselected=deselected,
            ran=int(data.get("ran") or 0),
            timed_out=tuple(str(x) for x in data.get("timed_out") or ()),
            aborted=str(data.get("aborted") or ""),
            stopped=stopped,
            worse=worse,
        )
    except (OSError, ValueError, TypeError, AttributeError, KeyError):
        return None


def run_ordered(
    spec: TestSpec,
    workspace: str | os.PathLike[str],
    *,
    first: Sequence[str] | None = None,
    progress: bool = False,
    parent_failed: int | None = None,
    timeouts: Mapping[str, Any] | None = None,
    warm: WarmRunner | None = None,
) -> tuple[TestRun, OrderReport | None]:
    """Run ``spec`` with the ``pytest_order`` plugin: the tests ``first`` names before the
    others, in one session that stops after them when the screen fails (``progress``: when
    none of them passes, and with ``parent_failed`` only once more tests have failed than that;
    otherwise at the first that fails), and/or per-test ``timeouts``.
    The report is ``None`` when the plugin did not load or write (then nothing it was asked
    for can be assumed). ``warm``: the warm runner to run it in (as ``run_tests``)."""
    with lifecycle.scratch_dir("order") as tmp:
        cfg: dict[str, Any] = {"report": str(tmp / "report.json")}
        if first is not None:
            cfg["first"] = list(first)
            cfg["progress"] = progress
            if progress and parent_failed is not None:
                cfg["parent_failed"] = int(parent_failed)
        if timeouts:
            cfg["timeouts"] = dict(timeouts)
        (tmp / "order.json").write_text(json.dumps(cfg), encoding="utf-8")
        used = spec.model_copy(update={"env": {**spec.env, ORDER_ENV: str(tmp / "order.json")}})
        run = run_tests(used, workspace, warm=warm)
        report = _read_report(tmp / "report.json")
    if report is not None and (report.timed_out or report.aborted):
        cut = list(report.timed_out)
        note = f"{len(cut)} test(s) ran past their per-test time limit (scoring.per_test_timeout)"
        if cut:
            note += ": " + ", ".join(cut[:5]) + (" ..." if len(cut) > 5 else "")
        if report.aborted:
            note += f"; {report.aborted} swallowed the timeout and pytest was stopped"
        run = replace(run, problem=f"{run.problem}; {note}" if run.problem else note)
    return run, report


def was_cut(report: OrderReport | None) -> bool:
    """True when a per-test limit cut a test (such a run is not cached)."""
    return report is not None and bool(report.timed_out or report.aborted)


def screen_verdict(run: TestRun, report: OrderReport | None) -> str:
    """What a screened run means: ``void`` (it could not screen: the plugin did not report, or
    nothing ran; run the whole suite), ``partial`` (the screen stopped the session, or the run
    broke before the screened tests had finished) or ``full`` (every test ran, the screened
    ones first: the node's result)."""
    if report is None or report.selected is None:
        return "void"
    if run.status is RunStatus.INVALID and not run.tests:
        return "void"
    if report.stopped and (report.deselected or run.status is not RunStatus.OK):
        return "partial"  # (a stop at the suite's last test left nothing out: a full run)
    if run.status is not RunStatus.OK and report.ran < report.selected:
        return "partial"
    return "full"


def make_partial(
    run: TestRun,
    report: OrderReport | None,
    parent: ScoreResult | None,
) -> Partial:
    """The partial mark of a screened state, with why the screen did not pass."""
    selected = report.selected if report is not None and report.selected is not None else 0
    deselected = report.deselected if report is not None else 0
    not_run = deselected + max(selected - len(run.tests), 0)
    first = run.failing[0].id if run.failing else ""
    if run.status is not RunStatus.OK:
        reason = f"the screen run ended {run.status.value}" + (
            f": {run.problem}" if run.problem else ""
        )
    elif report is not None and report.worse:
        reason = (
            f"none of the {report.selected} test(s) that failed in the parent passes now, and "
            f"{report.worse} fails too: more tests fail than in the parent"
        )
    elif (
        first
        and report is not None
        and report.ran >= (report.selected or 0) > 1
        and not any(t.outcome.is_pass for t in run.tests)
    ):
        reason = f"none of the {report.selected} tests that failed in the parent passes now"
    elif first:
        reason = f"{first} failed in the parent and still fails"
    else:
        reason = "the screen did not pass"
    return Partial(not_run=not_run, reason=reason[:500], durations=durations(parent))


def lower_bound(run: TestRun, partial: Partial) -> TestRun:
    """The run a score function sees for a partial state: every test that did not run counts
    as failed."""
    return _filled(run, partial, Outcome.FAILED)


def upper_bound(run: TestRun, partial: Partial) -> TestRun:
    """The best run a partial state can turn out to have: every test that did not run passes
    (the screened tests keep what they did). A search ranks the state by its score
    (``Partial.upper``) and completes its run before it builds on it."""
    return _filled(run, partial, Outcome.PASSED)


def _filled(run: TestRun, partial: Partial, outcome: Outcome) -> TestRun:
    filler = tuple(
        TestCase(f"(not run {i + 1})", outcome, message="not run (failing-first screen)")
        for i in range(partial.not_run)
    )
    return replace(run, tests=run.tests + filler)
