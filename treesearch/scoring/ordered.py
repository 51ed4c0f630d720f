"""How a ``Scorer`` runs a search state under ``scoring.order`` and ``per_test_timeout``: a
failing-first screen that goes on to the whole suite in the same run when it passes; per-test
limits from the parent's durations; what is cached and what is not (see ``treesearch.scoring.order``)."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from treesearch.scoring import order as O
from treesearch.scoring.cache import worth_caching
from treesearch.scoring.envkey import environment_key
from treesearch.scoring.grading import ScoreFunction, scored
from treesearch.scoring.probe import supports
from treesearch.scoring.results import Partial, ScoreResult, TestRun
from treesearch.scoring.runner import recheck_changed
from treesearch.scoring.spec import TestSpec

if TYPE_CHECKING:
    from treesearch.scoring.scorer import Scorer


def screens(scorer: Scorer) -> bool:
    """Whether the scorer screens the children of a state with failing tests: ``order``
    ``failing_first``/``progress_first``, or ``auto`` where the app said so (``repair``), and a
    test command that can load the plugin."""
    wanted = scorer.order in ("failing_first", "progress_first") or (
        scorer.order == "auto" and bool(scorer.repair)
    )
    return wanted and supports(scorer.search_spec)


def screen_for(scorer: Scorer, parent: TestRun | None) -> tuple[str, ...]:
    """The tests a child of ``parent`` screens on (none: no screen)."""
    return O.screen_ids(parent) if screens(scorer) else ()


def limits_for(
    scorer: Scorer, workspace: str | os.PathLike[str], parent: ScoreResult | None
) -> dict[str, Any] | None:
    """The per-test limits of a run whose parent is ``parent`` (``None``: no limit)."""
    policy = scorer.per_test_timeout
    if policy.mode == "off" or not supports(scorer.search_spec):
        return None
    measured = O.durations(parent)
    if policy.mode == "auto" and not measured and parent is not None:
        # A parent rebuilt after a resume has no durations: its full run may be cached.
        measured = _cached_durations(scorer, workspace, parent.tree)
    return O.per_test_limits(policy, measured)


def _cached_durations(
    scorer: Scorer, workspace: str | os.PathLike[str], tree: str | None
) -> dict[str, float]:
    if tree is None or scorer.cache is None:
        return {}
    spec = scorer.search_spec
    environment = environment_key(
        spec.command, spec.env, workspace, scorer.cache_inputs, memo=scorer._digests
    )
    run = scorer.cache.get(tree, spec.fingerprint(), environment)
    if run is None:
        return {}
    return O.durations(ScoreResult(0.0, False, "", run))


def evaluate(
    scorer: Scorer,
    workspace: str | os.PathLike[str],
    tree: str | None,
    parent_result: ScoreResult | None,
    parent: TestRun | None,
    screen: tuple[str, ...],
    limits: dict[str, Any] | None,
    *,
    time_limit: float | None,
) -> ScoreResult:
    """A search run with a failing-first screen and/or per-test limits (``order``)."""
    spec, fn = scorer.search_spec, scorer.score_fn
    fingerprint = spec.fingerprint()
    environment = ""
    if tree is not None and scorer.cache is not None:
        environment = environment_key(
            spec.command, spec.env, workspace, scorer.cache_inputs, memo=scorer._digests
        )
        known = scorer.cache.get(tree, fingerprint, environment)
        if known is not None:  # a full run of this state: nothing to screen
            scorer.cache_hits += 1
            return scored(
                known, fn, tree=tree, fingerprint=fingerprint, cached=True, held_out=False
            )
    warm = scorer.warm if scorer.warm.mode != "off" else None
    used = _clipped(spec, time_limit)
    if screen:
        progress = scorer.order != "failing_first"  # progress_first, or auto in a repair search
        run, report = O.run_ordered(
            used,
            workspace,
            first=screen,
            progress=progress,
            parent_failed=len(parent.failing) if parent is not None else None,
            timeouts=limits,
            warm=warm,
        )
        scorer.test_runs += 1
        if parent is not None and spec.reruns:
            run, reruns = recheck_changed(used, workspace, run, parent, warm=warm)
            scorer.test_runs += reruns
        verdict = O.screen_verdict(run, report)
        if verdict == "full":
            return _keep(scorer, run, report, used, tree, fingerprint, environment, time_limit)
        if verdict == "partial":
            partial = O.make_partial(run, report, parent_result)
            return _partial_result(run, fn, partial, tree=tree)
        # void: the plugin could not screen (it did not report); the whole suite runs again
        if time_limit is not None:
            used = _clipped(spec, max(time_limit - run.seconds, 0.01))
    run, report = O.run_ordered(used, workspace, timeouts=limits, warm=warm)
    scorer.test_runs += 1
    if parent is not None and spec.reruns:
        run, reruns = recheck_changed(used, workspace, run, parent, warm=warm)
        scorer.test_runs += reruns
    return _keep(scorer, run, report, used, tree, fingerprint, environment, time_limit)


def complete(
    scorer: Scorer,
    workspace: str | os.PathLike[str],
    tree: str | None,
    result: ScoreResult,
    *,
    time_limit: float | None,
) -> ScoreResult:
    """The whole suite's run of a state a screen left partial (``result``): no screen, per-test
    limits from the durations it knows (its own and its parent's), cached like any full run."""
    limits = limits_for(scorer, workspace, result)
    return evaluate(scorer, workspace, tree, result, None, (), limits, time_limit=time_limit)


def _keep(
    scorer: Scorer,
    run: TestRun,
    report: O.OrderReport | None,
    used: TestSpec,
    tree: str | None,
    fingerprint: str,
    environment: str,
    time_limit: float | None,
) -> ScoreResult:
    """A full run's result, cached unless a limit (the budget's or a test's) cut it."""
    cut = (used.timeout < scorer.search_spec.timeout and run.timed_out) or O.was_cut(report)
    if tree is not None and scorer.cache is not None and worth_caching(run) and not cut:
        scorer.cache.put(tree, fingerprint, run, environment)
    return scored(
        run, scorer.score_fn, tree=tree, fingerprint=fingerprint, cached=False, held_out=False
    )


def _clipped(spec: TestSpec, time_limit: float | None) -> TestSpec:
    if time_limit is not None and time_limit < spec.timeout:
        return spec.model_copy(update={"timeout": max(time_limit, 0.01)})
    return spec


def _partial_result(
    run: TestRun, fn: ScoreFunction, partial: Partial, *, tree: str | None
) -> ScoreResult:
    """A screened state: scored on the lower bound (tests not run count as failed), never
    resolved; ``partial.upper`` is its score if they all passed."""
    grade = fn(O.lower_bound(run, partial))
    value = min(1.0, max(0.0, float(grade.value)))
    upper = min(1.0, max(value, float(fn(O.upper_bound(run, partial)).value)))
    partial = replace(partial, upper=upper)
    return ScoreResult(
        score=value,
        resolved=False,
        score_name=fn.name,
        run=run,
        details=grade.details,
        tree=tree,
        fingerprint="",
        cached=False,
        held_out=False,
        partial=partial,
    )
