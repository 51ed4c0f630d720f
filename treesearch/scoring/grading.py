"""Score functions: a ``TestRun`` in, a ``Grade`` (value in [0, 1], resolved, details) out.

A small registry maps a name to each function; a config names one as a string
(``score: pass_fraction``) or as a mapping with ``kind`` and its parameters
(``score: {kind: swebench, fail_to_pass: [...], pass_to_pass: [...]}``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol, runtime_checkable

from treesearch.errors import ConfigError
from treesearch.scoring.results import Grade, Outcome, RunStatus, ScoreResult, TestRun

FAIL_TO_PASS = "FAIL_TO_PASS"
PASS_TO_PASS = "PASS_TO_PASS"
RESOLVED_FULL = "RESOLVED_FULL"
RESOLVED_PARTIAL = "RESOLVED_PARTIAL"
RESOLVED_NO = "RESOLVED_NO"


@runtime_checkable
class ScoreFunction(Protocol):
    """Turns a test run into a grade. Implementations are small frozen dataclasses."""

    @property
    def name(self) -> str:
        """Registry name of the function."""
        ...

    def __call__(self, run: TestRun) -> Grade:
        """Grade one run; the value is in [0, 1]."""
        ...


@dataclass(frozen=True)
class PassFraction:
    """Share of the tests that pass (passed, xfail, xpass) among those that count.

    Failed and errored tests count against; skipped tests are left out (``skipped="ignore"``,
    pytest's view: a run with skips is green) or count as failures (``skipped="fail"``: skipping
    a failing test then earns nothing). An unexpected pass (XPASS) counts as a pass
    (``xpass="pass"``, pytest's view) or as a failure (``xpass="fail"``: SWE-bench's grade, whose
    log parser has no such status, so that the test is missing there; ``treesearch eval`` sets
    it so that the search never counts as a pass what the grade does not). A run that is not OK
    scores 0. Without a per-test report the exit code decides: 1 for exit 0, else 0. Resolved
    when ``TestRun.all_passed`` (and, with ``xpass="fail"``, no test xpassed).
    """

    name: ClassVar[str] = "pass_fraction"
    skipped: str = "ignore"
    """``ignore`` or ``fail``."""
    xpass: str = "pass"
    """``pass`` or ``fail``."""

    def __call__(self, run: TestRun) -> Grade:
        if run.status is not RunStatus.OK:
            return Grade(0.0, False, {"reason": run.problem or run.status.value})
        if not run.has_report:
            ok = run.exit_code == 0
            return Grade(1.0 if ok else 0.0, ok, {"exit_code": run.exit_code})
        xpassed = sum(1 for t in run.tests if t.outcome is Outcome.XPASS)
        xfail = xpassed if self.xpass == "fail" else 0
        good = sum(1 for t in run.tests if t.outcome.is_pass) - xfail
        bad = sum(1 for t in run.tests if t.outcome.is_failure) + run.suite_errors + xfail
        skipped = sum(1 for t in run.tests if t.outcome is Outcome.SKIPPED)
        counted = good + bad + (skipped if self.skipped == "fail" else 0)
        value = good / counted if counted else 0.0
        details = {"passed": good, "failed": bad, "skipped": skipped, "counted": counted}
        if xpassed:
            details["xpassed"] = xpassed
        resolved = run.all_passed and (self.skipped != "fail" or not skipped) and not xfail
        return Grade(value, resolved, details)

    @classmethod
    def from_params(cls, params: Mapping[str, Any], at: str) -> PassFraction:
        _check_keys(params, ("skipped", "xpass"), at)
        skipped = params.get("skipped", "ignore")
        if skipped not in ("ignore", "fail"):
            raise ConfigError(f"{at}.skipped: must be ignore or fail, got {skipped!r}")
        return cls(skipped=skipped, xpass=_xpass(params, at))


@dataclass(frozen=True)
class Resolved:
    """1 when every test passes and the run is OK (``TestRun.all_passed``), else 0; with
    ``xpass="fail"`` an unexpected pass is no pass (see ``PassFraction``)."""

    name: ClassVar[str] = "resolved"
    xpass: str = "pass"
    """``pass`` or ``fail``."""

    def __call__(self, run: TestRun) -> Grade:
        ok = run.all_passed
        if self.xpass == "fail" and any(t.outcome is Outcome.XPASS for t in run.tests):
            ok = False
        return Grade(1.0 if ok else 0.0, ok, {"reason": run.problem} if run.problem else {})

    @classmethod
    def from_params(cls, params: Mapping[str, Any], at: str) -> Resolved:
        _check_keys(params, ("xpass",), at)
        return cls(xpass=_xpass(params, at))


@dataclass(frozen=True)
class SweBench:
    """SWE-bench grading, as ``swebench.harness.grading`` (PASS_AND_FAIL evaluation type) does.

    A FAIL_TO_PASS test succeeds when it passed or xfailed (the harness's ``test_passed``:
    PASSED or XFAIL); skipped, failed, errored, xpassed or missing from the report is a failure.
    A test marked ``xfail(run=False)`` never ran: the runner reports it as skipped, so it is a
    failure too (the harness does not find it under its id in pytest's ``XFAIL at setup of ...``
    summary line either). An xpass is a failure because the harness's status map has no XPASS:
    the test is missing from it. A PASS_TO_PASS test succeeds when it passed, xfailed or was
    skipped (the harness's "maintained"; ``strict_pass_to_pass`` makes a skip a failure);
    failed, errored, xpassed or missing is a failure. A run that is not OK (timeout, crash,
    invalid, error) has no results: every listed test fails, as the harness does for a log with
    a timeout or error marker.

    Each rate is success / (success + failure), 1 for an empty list. Resolved (RESOLVED_FULL)
    when both rates are 1; RESOLVED_PARTIAL when 0 < fail-to-pass < 1 and pass-to-pass is 1.
    The value steering a search is the mean of the two rates (1 exactly when resolved).
    """

    name: ClassVar[str] = "swebench"
    fail_to_pass: Sequence[str]
    """Test ids the change must make pass (kept as a tuple)."""
    pass_to_pass: Sequence[str] = ()
    """Test ids that passed before and must keep passing (kept as a tuple)."""
    strict_pass_to_pass: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "fail_to_pass", tuple(self.fail_to_pass))
        object.__setattr__(self, "pass_to_pass", tuple(self.pass_to_pass))

    def report(self, run: TestRun) -> dict[str, dict[str, list[str]]]:
        """The harness's ``tests_status`` table:
        ``{FAIL_TO_PASS: {success: [...], failure: [...]}, PASS_TO_PASS: {...}}``."""
        ok = run.status is RunStatus.OK

        def outcome(test_id: str) -> Outcome | None:
            return run.outcome(test_id) if ok else None

        f2p: dict[str, list[str]] = {"success": [], "failure": []}
        for test_id in self.fail_to_pass:
            o = outcome(test_id)
            passed = o is not None and o in (Outcome.PASSED, Outcome.XFAIL)
            f2p["success" if passed else "failure"].append(test_id)
        p2p: dict[str, list[str]] = {"success": [], "failure": []}
        kept = {Outcome.PASSED, Outcome.XFAIL}
        if not self.strict_pass_to_pass:
            kept.add(Outcome.SKIPPED)
        for test_id in self.pass_to_pass:
            o = outcome(test_id)
            p2p["success" if o is not None and o in kept else "failure"].append(test_id)
        return {FAIL_TO_PASS: f2p, PASS_TO_PASS: p2p}

    def __call__(self, run: TestRun) -> Grade:
        status = self.report(run)
        f2p_rate = _rate(status[FAIL_TO_PASS])
        p2p_rate = _rate(status[PASS_TO_PASS])
        if f2p_rate == 1 and p2p_rate == 1:
            resolution = RESOLVED_FULL
        elif 0 < f2p_rate < 1 and p2p_rate == 1:
            resolution = RESOLVED_PARTIAL
        else:
            resolution = RESOLVED_NO
        # An empty FAIL_TO_PASS list would make any run "resolved"; a run without results never is.
        resolved = resolution == RESOLVED_FULL and run.status is RunStatus.OK
        details = {
            "tests_status": status,
            "fail_to_pass_rate": f2p_rate,
            "pass_to_pass_rate": p2p_rate,
            "resolution": resolution,
        }
        # A run without results scores 0 even when PASS_TO_PASS is empty (rate 1 by definition).
        value = (f2p_rate + p2p_rate) / 2 if run.status is RunStatus.OK else 0.0
        return Grade(value, resolved, details)

    @classmethod
    def from_params(cls, params: Mapping[str, Any], at: str) -> SweBench:
        keys = ("fail_to_pass", "pass_to_pass", "strict_pass_to_pass", FAIL_TO_PASS, PASS_TO_PASS)
        _check_keys(params, keys, at)
        f2p = _id_list(params, ("fail_to_pass", FAIL_TO_PASS), at)
        if not f2p:
            raise ConfigError(f"{at}.fail_to_pass: must list at least one test id")
        p2p = _id_list(params, ("pass_to_pass", PASS_TO_PASS), at)
        strict = params.get("strict_pass_to_pass", False)
        if not isinstance(strict, bool):
            raise ConfigError(f"{at}.strict_pass_to_pass: must be true or false, got {strict!r}")
        return cls(fail_to_pass=f2p, pass_to_pass=p2p, strict_pass_to_pass=strict)


def _xpass(params: Mapping[str, Any], at: str) -> str:
    xpass = params.get("xpass", "pass")
    if xpass not in ("pass", "fail"):
        raise ConfigError(f"{at}.xpass: must be pass or fail, got {xpass!r}")
    return str(xpass)


def _rate(table: Mapping[str, Sequence[str]]) -> float:
    total = len(table["success"]) + len(table["failure"])
    return 1.0 if total == 0 else len(table["success"]) / total


def _check_keys(params: Mapping[str, Any], allowed: Sequence[str], at: str) -> None:
    unknown = sorted(str(k) for k in params if k not in allowed)
    if unknown:
        allowed_text = ", ".join(allowed) if allowed else "none"
        raise ConfigError(
            f"{at}: unknown parameter(s) {', '.join(unknown)}; allowed: {allowed_text}"
        )


def _id_list(params: Mapping[str, Any], names: Sequence[str], at: str) -> tuple[str, ...]:
    given = [n for n in names if n in params]
    if len(given) > 1:
        raise ConfigError(f"{at}: give only one of {', '.join(given)}")
    if not given:
        return ()
    key = given[0]
    value = params[key]
    if isinstance(value, str):
        # SWE-bench datasets store the lists as JSON text.
        try:
            value = json.loads(value)
        except ValueError:
            raise ConfigError(
                f"{at}.{key}: must be a list of test ids (or its JSON text), got {value[:80]!r}"
            ) from None
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise ConfigError(f"{at}.{key}: must be a list of test ids, got {type(value).__name__}")
    for v in value:
        if not isinstance(v, str) or not v:
            raise ConfigError(f"{at}.{key}: every test id must be a non-empty string, got {v!r}")
    return tuple(value)


@dataclass(frozen=True)
class WithReproduction:
    """The search's score with reproduction tests (``search.reproduce``) as a part of their
    own: ``weight`` x the share of the reproduction tests that pass + (1 - ``weight``) x the
    ``base`` score of the other tests. Resolved when both parts are. A test belongs to the
    reproduction part when its file's name is one of ``files``. The details say each part's
    counts (``reproduction``: passed, counted)."""

    name: ClassVar[str] = "with_reproduction"
    base: Any
    """The score function of the other tests."""
    files: tuple[str, ...] = ()
    weight: float = 0.5

    def mine(self, test_id: str) -> bool:
        """Whether ``test_id`` is one of the reproduction tests (``test_r.py::test_a``, or
        ``test_r.TestK::test_a`` as JUnit names a module outside the workspace)."""
        head = test_id.split("::", 1)[0].rsplit("/", 1)[-1]
        stem = head[:-3] if head.endswith(".py") else head.split(".", 1)[0]
        return stem in {f[:-3] if f.endswith(".py") else f for f in self.files}

    def __call__(self, run: TestRun) -> Grade:
        if run.status is not RunStatus.OK:
            return self.base(run)  # type: ignore[no-any-return]
        mine = tuple(t for t in run.tests if self.mine(t.id))
        rest = tuple(t for t in run.tests if not self.mine(t.id))
        other = self.base(replace(run, tests=rest))
        good = sum(1 for t in mine if t.outcome.is_pass and t.outcome is not Outcome.XPASS)
        counted = sum(1 for t in mine if t.outcome is not Outcome.SKIPPED)
        share = good / counted if counted else 0.0
        value = self.weight * share + (1.0 - self.weight) * other.value
        details = {**other.details, "reproduction": {"passed": good, "counted": counted}}
        return Grade(value, bool(other.resolved and counted and good == counted), details)

    @classmethod
    def from_params(cls, params: Mapping[str, Any], at: str) -> WithReproduction:
        _check_keys(params, ("base", "files", "weight"), at)
        files = _id_list(params, ("files",), at)
        weight = params.get("weight", 0.5)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight <= 1:
            raise ConfigError(f"{at}.weight: must be a number in (0, 1], got {weight!r}")
        base = make_score(params.get("base", "pass_fraction"), source=at, where="base")
        return cls(base=base, files=files, weight=float(weight))


SCORES: Mapping[str, Any] = {
    PassFraction.name: PassFraction,
    Resolved.name: Resolved,
    SweBench.name: SweBench,
    WithReproduction.name: WithReproduction,
}
"""The score registry: name -> class with ``from_params(params, at)``."""


def score_names() -> list[str]:
    """Names of the registered score functions."""
    return sorted(SCORES)


def make_score(
    spec: str | Mapping[str, Any] | ScoreFunction,
    *,
    source: str = "<config>",
    where: str = "score",
) -> ScoreFunction:
    """A score function from its name, a ``{kind: name, ...params}`` mapping, or itself.

    Raises:
        ConfigError: unknown name (the message lists the known ones) or bad parameters.
    """
    at = f"{source}: {where}" if where else source
    if isinstance(spec, str):
        kind, params = spec, {}
    elif isinstance(spec, Mapping):
        if "kind" not in spec:
            raise ConfigError(f"{at}: needs a kind (one of {', '.join(score_names())})")
        kind = spec["kind"]
        params = {k: v for k, v in spec.items() if k != "kind"}
    elif isinstance(spec, ScoreFunction):
        return spec
    else:
        raise ConfigError(
            f"{at}: must be a score name or a mapping with kind, got {type(spec).__name__}"
        )
    if not isinstance(kind, str) or kind not in SCORES:
        raise ConfigError(f"{at}: unknown score {kind!r}; known scores: {', '.join(score_names())}")
    result: ScoreFunction = SCORES[kind].from_params(params, at)
    return result


def scored(
    run: TestRun,
    fn: ScoreFunction,
    *,
    tree: str | None,
    fingerprint: str,
    cached: bool,
    held_out: bool,
) -> ScoreResult:
    """The result of a full run graded by ``fn`` (its value clipped to [0, 1])."""
    grade = fn(run)
    value = min(1.0, max(0.0, float(grade.value)))
    return ScoreResult(
        score=value,
        resolved=grade.resolved,
        score_name=fn.name,
        run=run,
        details=grade.details,
        tree=tree,
        fingerprint=fingerprint,
        cached=cached,
        held_out=held_out,
    )
