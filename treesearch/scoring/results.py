"""Plain values of a test run: per-test outcomes, run status, and the scored result."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from treesearch.errors import ScoringError

FORMAT_VERSION = 1
"""Version of the ``to_dict`` layout of a ``TestRun`` (cache rows carry it)."""


class Outcome(str, enum.Enum):
    """The outcome of one test, as pytest names them."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"
    XFAIL = "xfail"
    XPASS = "xpass"

    @property
    def is_pass(self) -> bool:
        """True for outcomes that leave a suite green: passed, xfail and (non-strict) xpass."""
        return self in (Outcome.PASSED, Outcome.XFAIL, Outcome.XPASS)

    @property
    def is_failure(self) -> bool:
        """True for failed and error."""
        return self in (Outcome.FAILED, Outcome.ERROR)


# Worst first: when one test appears twice in a report, the worse outcome wins.
_SEVERITY = {
    Outcome.ERROR: 0,
    Outcome.FAILED: 1,
    Outcome.SKIPPED: 2,
    Outcome.XFAIL: 3,
    Outcome.XPASS: 4,
    Outcome.PASSED: 5,
}


def worse(a: Outcome, b: Outcome) -> Outcome:
    """The worse of two outcomes (error < failed < skipped < xfail < xpass < passed)."""
    return a if _SEVERITY[a] <= _SEVERITY[b] else b


class RunStatus(str, enum.Enum):
    """Whether the run itself produced trustworthy per-test results."""

    OK = "ok"
    """The command finished and its results were read (tests may still have failed)."""
    TIMEOUT = "timeout"
    """The timeout fired; the process group was ended; no results are trusted."""
    CRASHED = "crashed"
    """The command could not start, died from a signal, was interrupted, or lost its report
    although its output shows that tests ran."""
    INVALID = "invalid"
    """No trustworthy result: the report is missing, empty, unparsable, too large or unsafe and
    nothing shows that the suite ran (typically a wrong command or report path); the test
    command was not found (exit 127) or could not be executed (126); or the pytest session was
    cut short (``pytest.exit()``, an interrupt, fewer tests run than collected). Never a pass."""
    ERROR = "error"
    """The suite ran but not as a whole: a test module failed to collect (an import or syntax
    error), whatever the flags (``--continue-on-collection-errors`` too). Never a pass."""


@dataclass(frozen=True)
class TestCase:
    """One test of a run."""

    __test__ = False  # not a pytest test class

    id: str
    """Test id: the pytest node id for pytest runs (``tests/test_x.py::TestA::test_b[p]``),
    ``classname::name`` for other JUnit producers."""
    outcome: Outcome
    """The outcome (after reruns, see ``flaky``)."""
    classname: str = ""
    """JUnit ``classname`` attribute as written in the report."""
    name: str = ""
    """JUnit ``name`` attribute as written in the report."""
    seconds: float = 0.0
    """Duration reported for the test."""
    message: str = ""
    """Short failure/error/skip message (the JUnit ``message`` attribute)."""
    text: str = ""
    """Tail of the failure/error details (traceback), capped; empty for passing tests."""
    reruns: tuple[Outcome, ...] = ()
    """Outcomes of the re-runs made because the outcome differed from the parent's."""
    flaky: bool = False
    """True when the first run and the re-runs disagreed (pass versus fail)."""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "outcome": self.outcome.value}
        if self.classname:
            d["classname"] = self.classname
        if self.name:
            d["name"] = self.name
        if self.seconds:
            d["seconds"] = self.seconds
        if self.message:
            d["message"] = self.message
        if self.text:
            d["text"] = self.text
        if self.reruns:
            d["reruns"] = [o.value for o in self.reruns]
        if self.flaky:
            d["flaky"] = True
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TestCase:
        return cls(
            id=str(d["id"]),
            outcome=Outcome(d["outcome"]),
            classname=str(d.get("classname", "")),
            name=str(d.get("name", "")),
            seconds=float(d.get("seconds", 0.0)),
            message=str(d.get("message", "")),
            text=str(d.get("text", "")),
            reruns=tuple(Outcome(o) for o in d.get("reruns", ())),
            flaky=bool(d.get("flaky", False)),
        )


def pytest_key(test_id: str) -> tuple[str, str]:
    """The JUnit ``(classname, name)`` pair pytest writes for a node id.

    Same rule as pytest's ``junitxml.mangle_test_address``: the part before the first ``[`` is
    split on ``::``, the file path becomes a dotted module, the parameters stay with the name.
    """
    path, bracket, params = test_id.partition("[")
    names = path.split("::")
    module = names[0].replace("/", ".")
    if module.endswith(".py"):
        module = module[:-3]
    names[0] = module
    names[-1] += bracket + params
    return ".".join(names[:-1]), names[-1]


@dataclass(frozen=True)
class TestRun:
    """Everything one run of a test command produced."""

    __test__ = False  # not a pytest test class

    status: RunStatus
    """Whether the run produced trustworthy results (see ``RunStatus``)."""
    tests: tuple[TestCase, ...] = ()
    """Per-test outcomes in report order (empty when no report was configured or read)."""
    exit_code: int | None = None
    """Exit status of the command; negative for a signal; ``None`` if it could not start."""
    timed_out: bool = False
    """True when the timeout fired."""
    seconds: float = 0.0
    """Wall-clock duration of the command (re-runs excluded)."""
    output: str = ""
    """Tail of standard output (and standard error, after a ``[stderr]`` line), capped."""
    problem: str = ""
    """Why the status is not OK, or what was odd about the run; empty when all is well."""
    has_report: bool = True
    """False when no JUnit report was configured: then only the exit code says pass or fail."""
    suite_errors: int = 0
    """Errors that a test suite's ``errors`` attribute counts but no testcase element shows."""
    command: str = ""
    """The command as run (shell-quoted), for logs."""

    @cached_property
    def _by_id(self) -> dict[str, TestCase]:
        return {t.id: t for t in self.tests}

    @cached_property
    def _by_key(self) -> dict[tuple[str, str], TestCase]:
        return {(t.classname, t.name): t for t in self.tests if t.name}

    def get(self, test_id: str) -> TestCase | None:
        """The test with this id; pytest node ids also match through their JUnit key."""
        found = self._by_id.get(test_id)
        if found is None:
            found = self._by_key.get(pytest_key(test_id))
        return found

    def outcome(self, test_id: str) -> Outcome | None:
        """The outcome of a test, or ``None`` when the run has no such test."""
        found = self.get(test_id)
        return None if found is None else found.outcome

    @property
    def totals(self) -> dict[str, int]:
        """Number of tests per outcome (every outcome present, zeros included), plus ``total``."""
        counts = {o.value: 0 for o in Outcome}
        for t in self.tests:
            counts[t.outcome.value] += 1
        counts["total"] = len(self.tests)
        return counts

    @property
    def failing(self) -> tuple[TestCase, ...]:
        """Tests that failed or errored."""
        return tuple(t for t in self.tests if t.outcome.is_failure)

    @property
    def flaky(self) -> tuple[str, ...]:
        """Ids of tests marked flaky."""
        return tuple(t.id for t in self.tests if t.flaky)

    @property
    def all_passed(self) -> bool:
        """True when the run is OK, exited 0, and (with a report) at least one test passed and
        none failed or errored."""
        if self.status is not RunStatus.OK or self.exit_code != 0:
            return False
        if not self.has_report:
            return True
        return (
            self.suite_errors == 0
            and not self.failing
            and any(t.outcome.is_pass for t in self.tests)
        )

    def summary(self) -> str:
        """One line: counts per outcome, status, exit code and duration."""
        totals = self.totals
        parts = [f"{totals[o.value]} {o.value}" for o in Outcome if totals[o.value]]
        if self.suite_errors:
            parts.append(f"{self.suite_errors} suite error(s)")
        if not self.has_report:
            parts.append("no per-test report")
        counts = ", ".join(parts) if parts else "no tests"
        return (
            f"{counts} (status {self.status.value}, exit code {self.exit_code}, "
            f"{self.seconds:.1f} s)"
        )

    def feedback(self, max_chars: int = 6000) -> str:
        """Text an agent can act on: the summary, the problem, failing test ids with their
        messages and traceback tails, and the tail of the output."""
        lines = [f"Tests: {self.summary()}"]
        if self.problem:
            lines.append(f"Problem: {self.problem}")
        failing = self.failing
        if failing:
            lines.append("Failing tests:")
            for t in failing:
                msg = t.message.splitlines()[0] if t.message else ""
                lines.append(f"  {t.outcome.value.upper()} {t.id}" + (f" - {msg}" if msg else ""))
        if self.flaky:
            lines.append("Flaky (outcome changed between re-runs): " + ", ".join(self.flaky))
        head = "\n".join(lines)
        if len(head) >= max_chars:
            return head[: max(0, max_chars - 3)] + "..."
        room = max_chars - len(head)
        parts = [head]
        # Up to half the room for the failing tests' tracebacks (first failures first), the
        # rest for the tail of the output.
        detail_room = room // 2
        if failing:
            per_test = max(300, detail_room // len(failing))
            for t in failing:
                if not t.text:
                    continue
                block = f"--- {t.id} ---\n{_tail(t.text, per_test)}"
                if len(block) + 1 > detail_room:
                    break
                parts.append(block)
                detail_room -= len(block) + 1
                room -= len(block) + 1
        marker = "--- output tail ---\n"
        out_room = room - len(marker) - 2
        if self.output and out_room > 0:
            parts.append(marker + _tail(self.output, out_room))
        return "\n".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (``from_dict`` reads it back)."""
        return {
            "format": FORMAT_VERSION,
            "status": self.status.value,
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "seconds": self.seconds,
            "totals": self.totals,
            "problem": self.problem,
            "has_report": self.has_report,
            "suite_errors": self.suite_errors,
            "command": self.command,
            "output": self.output,
            "tests": [t.to_dict() for t in self.tests],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TestRun:
        """Read back ``to_dict`` output (``ScoringError`` on an unknown format)."""
        if d.get("format") != FORMAT_VERSION:
            raise ScoringError(f"unknown test run format {d.get('format')!r}")
        try:
            exit_code = d.get("exit_code")
            return cls(
                status=RunStatus(d["status"]),
                tests=tuple(TestCase.from_dict(t) for t in d.get("tests", ())),
                exit_code=None if exit_code is None else int(exit_code),
                timed_out=bool(d.get("timed_out", False)),
                seconds=float(d.get("seconds", 0.0)),
                output=str(d.get("output", "")),
                problem=str(d.get("problem", "")),
                has_report=bool(d.get("has_report", True)),
                suite_errors=int(d.get("suite_errors", 0)),
                command=str(d.get("command", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ScoringError(f"malformed test run record: {exc}") from exc


@dataclass(frozen=True)
class Grade:
    """What a score function makes of a run."""

    value: float
    """The score, in [0, 1]."""
    resolved: bool
    """True when the run counts as a full solution under this score."""
    details: Mapping[str, Any] = field(default_factory=dict)
    """JSON-serialisable specifics (e.g. the SWE-bench ``tests_status`` table)."""


@dataclass(frozen=True)
class Partial:
    """What a failing-first screen (``scoring.order``) left unknown about a state: its run
    holds only the tests the screen ran."""

    not_run: int
    """Tests of the whole suite that did not run: their outcome is unknown (never a pass)."""
    reason: str
    """Why the rest did not run (e.g. the first screened test that still fails)."""
    durations: Mapping[str, float] = field(default_factory=dict, compare=False)
    """Measured durations (seconds) inherited from the parent for the tests that did not run
    (per-test limits of this state's children); kept in memory only."""
    upper: float | None = None
    """The score if every test that did not run passed: the most the state can be worth (what
    a search ranks it by until it completes the run; ``None``: not computed)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"not_run": self.not_run, "reason": self.reason}
        if self.upper is not None:
            out["upper"] = self.upper
        return out


@dataclass(frozen=True)
class ScoreResult:
    """A scored test run, as the search and the CLI see it."""

    score: float
    """The score in [0, 1] (see ``score_name``)."""
    resolved: bool
    """True when the state is a full solution under the score function."""
    score_name: str
    """Name of the score function (``pass_fraction``, ``resolved``, ``swebench``, ...)."""
    run: TestRun
    """The test run behind the score."""
    details: Mapping[str, Any] = field(default_factory=dict)
    """Score-specific details (JSON-serialisable)."""
    tree: str | None = None
    """Tree hash of the scored state, when known."""
    fingerprint: str = ""
    """Fingerprint of the test spec that produced the run (half of the cache key)."""
    cached: bool = False
    """True when the run came from the score cache instead of running the tests."""
    held_out: bool = False
    """True for a grade computed with the held-out ``grade_tests`` (never shown to the search)."""
    partial: Partial | None = None
    """Set when only a failing-first screen ran (``scoring.order``): ``run`` then holds only
    the screened tests, and ``score`` is a lower bound (tests not run count as failed)."""

    @property
    def status(self) -> RunStatus:
        """Status of the underlying run."""
        return self.run.status

    def rows(self) -> list[tuple[str, str]]:
        """Per-test table: ``(test_id, outcome)`` in report order (flaky tests say so)."""
        return [(t.id, t.outcome.value + (" (flaky)" if t.flaky else "")) for t in self.run.tests]

    def feedback(self, max_chars: int = 6000) -> str:
        """Text for an agent (see ``TestRun.feedback``). Do not show held-out results to it.
        A partial result says first what is known and what is not."""
        if self.partial is None:
            return self.run.feedback(max_chars)
        run = self.run
        known_pass = sum(1 for t in run.tests if t.outcome.is_pass)
        head = (
            "Partial result (failing tests first): only tests that failed in the parent state "
            f"ran; {self.partial.reason}. Known: {known_pass} passed, {len(run.failing)} failed; "
            f"{self.partial.not_run} other test(s) did not run (their outcome is unknown)."
        )
        return head + "\n" + run.feedback(max(0, max_chars - len(head) - 1))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict."""
        return {
            "score": self.score,
            "resolved": self.resolved,
            "score_name": self.score_name,
            "status": self.run.status.value,
            "tree": self.tree,
            "fingerprint": self.fingerprint,
            "cached": self.cached,
            "held_out": self.held_out,
            "details": dict(self.details),
            "run": self.run.to_dict(),
            **({"partial": self.partial.to_dict()} if self.partial is not None else {}),
        }


def _tail(text: str, limit: int) -> str:
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text
    return "..." + text[len(text) - limit + 3 :]


# --- a node's test summary (graph.json) and the result it stands for ---------------------------

SUMMARY = "(summary)"
"""``score_name`` of a parent rebuilt from its summary (``from_summary``): no durations."""


def from_summary(tree: str, tests: Mapping[str, Any] | None) -> ScoreResult | None:
    """A stand-in for a parent's result rebuilt from its node's test summary (after a resume,
    when the result itself is no longer in memory): its status and failing tests, which is
    what a screen needs (the summary lists the first 50; the others, counted in its totals,
    stand in as ``(failing N)``, so that a screen knows how many tests the parent failed).
    ``None`` when the summary says nothing usable."""
    if not tests:
        return None
    try:
        status = RunStatus(tests.get("status"))
    except ValueError:
        return None
    failing = tuple(
        TestCase(str(test_id), Outcome.FAILED) for test_id in tests.get("failing") or ()
    )
    totals = tests.get("totals") or {}
    counted = sum(int(totals.get(o.value) or 0) for o in Outcome if o.is_failure)
    failing += tuple(
        TestCase(f"(failing {i + 1})", Outcome.FAILED) for i in range(len(failing), counted)
    )
    run = TestRun(status=status, tests=failing, exit_code=1 if failing else 0)
    return ScoreResult(0.0, False, SUMMARY, run, tree=tree)


def summary_marks(result: ScoreResult) -> dict[str, Any]:
    """What a node's test summary adds for a partial state (empty for a full one)."""
    partial = result.partial
    if partial is None:
        return {}
    run = result.run
    return {
        "partial": True,
        "known_passed": sum(1 for t in run.tests if t.outcome.is_pass),
        "known_failed": len(run.failing),
        "not_run": partial.not_run,
        "partial_reason": partial.reason,
        **({"upper": partial.upper} if partial.upper is not None else {}),
    }
