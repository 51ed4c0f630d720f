"""``Scorer``: search tests steer, held-out grade tests judge; both cached by tree hash."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from treesearch import lifecycle
from treesearch.errors import ScoringError
from treesearch.scoring import order as O
from treesearch.scoring import ordered
from treesearch.scoring.cache import ScoreCache, worth_caching
from treesearch.scoring.envkey import Memo, environment_key
from treesearch.scoring.grading import ScoreFunction, make_score, scored
from treesearch.scoring.results import ScoreResult, TestRun
from treesearch.scoring.runner import recheck_changed, run_tests
from treesearch.scoring.section import ScorerConfig
from treesearch.scoring.spec import TestSpec
from treesearch.scoring.warm import WarmRunner
from treesearch.types import SnapshotStore
from treesearch.validation import config_error

ScoreLike = str | Mapping[str, Any] | ScoreFunction
"""A score function, its registry name, or a ``{kind: name, ...params}`` mapping."""


class Scorer:
    """Scores workspace states with the search tests; grades final states with held-out tests.

    ``score`` runs the search spec (what the search sees and optimises); ``grade`` runs the
    grade spec (held out: run only when asked, for the final nodes, so the search never peeks
    at its grader). With a ``cache`` and a ``tree`` hash, a state already tested under the same
    spec in the same environment is not tested again (``ScoreResult.cached``); the environment
    key covers the interpreter, the command's programs, the installed packages, the variables
    that steer Python and pytest, and the content of the ``cache_inputs`` globs (files the
    tests read that the snapshot does not hold, e.g. ignored fixtures), see ``envkey``.
    """

    def __init__(
        self,
        search_spec: TestSpec,
        score: ScoreLike = "pass_fraction",
        grade_spec: TestSpec | None = None,
        cache: ScoreCache | None = None,
        *,
        grade_score: ScoreLike | None = None,
        cache_inputs: Sequence[str] = (),
        warm: str = "off",
        order: str = "auto",
        per_test_timeout: O.PerTestTimeout | str | float = "auto",
    ) -> None:
        self.search_spec = search_spec
        """Spec of the tests that steer the search."""
        self.score_fn: ScoreFunction = make_score(score)
        """Score function applied to search runs."""
        self.grade_spec = grade_spec
        """Spec of the held-out tests (``None``: ``grade`` falls back to the search spec)."""
        self.grade_fn: ScoreFunction = (
            self.score_fn if grade_score is None else make_score(grade_score, where="grade_score")
        )
        """Score function applied to grade runs."""
        self.cache = cache
        """The score cache, if any."""
        if isinstance(per_test_timeout, O.PerTestTimeout):
            per_test_timeout = per_test_timeout.seconds or per_test_timeout.mode
        options = {"order": order, "per_test_timeout": per_test_timeout, "warm": warm}
        try:  # the scoring section's model checks them, as it does a config's
            checked = ScorerConfig.model_validate(
                {"search_tests": search_spec, "cache_inputs": cache_inputs, **options}
            )
        except ValidationError as exc:
            raise config_error(exc, ScorerConfig, "Scorer", "") from None
        self.cache_inputs = tuple(checked.cache_inputs)
        """Globs (relative to the workspace) of files whose content is part of the cache key."""
        self._digests: Memo = {}
        self.test_runs = 0
        """Test commands actually run by this scorer (re-runs included; cache hits excluded)."""
        self.cache_hits = 0
        """Results served from the cache."""
        self.warm = WarmRunner(checked.warm)
        """The warm pytest runner (``scoring.warm``; ``off``: every run is cold). Its servers
        live until ``close``."""
        self.order: str = checked.order
        """``scoring.order``: ``auto``, ``failing_first``, ``progress_first`` or ``all`` (see
        ``scoring.order``)."""
        self.per_test_timeout = O.PerTestTimeout.of(checked.per_test_timeout)
        """``scoring.per_test_timeout``: per-test limits of search runs."""
        self.repair: bool | None = None
        """Whether ``order: auto`` screens children (``progress_first``): True in a repair search
        (its root fails tests) whose policy seldom builds on a screened-out candidate; the app
        sets it from the root and the policy (``policies.SCREENED_BY_DEFAULT``)."""

    def close(self) -> None:
        """End the warm runner's servers (a new run starts them again)."""
        self.warm.close()

    def __enter__(self) -> Scorer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    def from_config(
        cls,
        d: ScorerConfig | Mapping[str, Any] | None,
        source: str = "<config>",
        *,
        where: str = "scoring",
        cache: ScoreCache | None = None,
    ) -> Scorer:
        """Build from a validated ``scoring`` section, or from a mapping validated now
        (``ConfigError`` names ``source``, the key path below ``where`` and what is allowed)."""
        if not isinstance(d, ScorerConfig):
            try:
                d = ScorerConfig.model_validate({} if d is None else d)
            except ValidationError as exc:
                raise config_error(exc, ScorerConfig, source, where) from None
        return cls(
            d.search_tests,
            d.score,
            d.grade_tests,
            cache,
            grade_score=d.grade_score,
            cache_inputs=d.cache_inputs,
            order=d.order,
            per_test_timeout=d.per_test_timeout,
            warm=d.warm,
        )

    def score(
        self,
        workspace: str | os.PathLike[str],
        tree: str | None = None,
        *,
        parent: TestRun | ScoreResult | None = None,
        time_limit: float | None = None,
        max_runs: int | None = None,
    ) -> ScoreResult:
        """Score the workspace with the search tests.

        ``tree`` is the workspace's tree hash (enables the cache). ``parent`` is the run of the
        parent state: with ``reruns`` in the spec, tests whose outcome differs from it are
        re-run and flaky ones marked; with ``order`` failing-first its failing tests are run
        first (``ScoreResult.partial`` when they did not all pass), and its durations set the
        per-test limits (``per_test_timeout: auto``). ``time_limit`` (seconds) cuts the run
        earlier than the spec's timeout (a search's wall-clock budget); a run cut by it is not
        cached. ``max_runs`` caps the test runs of this call (a test-run budget): a screen and
        the rest of the suite share one run, so a call makes one run (more with ``reruns``).
        """
        parent_result = parent if isinstance(parent, ScoreResult) else None
        if isinstance(parent, ScoreResult):
            parent = parent.run
        screen = ordered.screen_for(self, parent)
        limits = ordered.limits_for(self, workspace, parent_result)
        if screen or limits is not None:
            return ordered.evaluate(
                self,
                workspace,
                tree,
                parent_result,
                parent,
                screen,
                limits,
                time_limit=time_limit,
            )
        return self._evaluate(
            self.search_spec,
            self.score_fn,
            workspace,
            tree,
            parent=parent,
            held_out=False,
            time_limit=time_limit,
        )

    def complete(
        self,
        workspace: str | os.PathLike[str],
        tree: str | None,
        result: ScoreResult,
        *,
        time_limit: float | None = None,
    ) -> ScoreResult:
        """The whole suite's run of a state a failing-first screen left partial (``result``,
        from ``score``): what a search runs before it builds on the state."""
        return ordered.complete(self, workspace, tree, result, time_limit=time_limit)

    def grade(self, workspace: str | os.PathLike[str], tree: str | None = None) -> ScoreResult:
        """Grade the workspace with the held-out tests (``held_out`` is False in the result
        when no grade spec was given and the search spec stood in)."""
        spec = self.grade_spec or self.search_spec
        with self.warm.only_running():  # one run: no new warm server for it
            return self._evaluate(
                spec,
                self.grade_fn,
                workspace,
                tree,
                parent=None,
                held_out=self.grade_spec is not None,
            )

    def _evaluate(
        self,
        spec: TestSpec,
        fn: ScoreFunction,
        workspace: str | os.PathLike[str],
        tree: str | None,
        *,
        parent: TestRun | None,
        held_out: bool,
        time_limit: float | None = None,
    ) -> ScoreResult:
        fingerprint = spec.fingerprint()
        limited = time_limit is not None and time_limit < spec.timeout
        run: TestRun | None = None
        environment = ""
        if tree is not None and self.cache is not None:
            environment = environment_key(
                spec.command, spec.env, workspace, self.cache_inputs, memo=self._digests
            )
            run = self.cache.get(tree, fingerprint, environment)
        cached = run is not None
        if run is None:
            used = (
                spec.model_copy(update={"timeout": max(time_limit, 0.01)})
                if time_limit is not None and limited
                else spec
            )
            warm = self.warm if self.warm.mode != "off" else None
            run = run_tests(used, workspace, warm=warm)
            self.test_runs += 1
            if parent is not None and spec.reruns:
                run, reruns = recheck_changed(used, workspace, run, parent, warm=warm)
                self.test_runs += reruns
            cut = limited and run.timed_out  # says nothing about the state: never cached
            if tree is not None and self.cache is not None and worth_caching(run) and not cut:
                self.cache.put(tree, fingerprint, run, environment)
        else:
            self.cache_hits += 1
        return scored(run, fn, tree=tree, fingerprint=fingerprint, cached=cached, held_out=held_out)


SnapshotSource = SnapshotStore
"""What ``score_workspace`` needs of a snapshot store: ``treesearch.types.SnapshotStore``."""


def score_workspace(
    workspace: str | os.PathLike[str],
    spec: TestSpec | Mapping[str, Any],
    *,
    cache: ScoreCache | None = None,
    ref: str | None = None,
    store: SnapshotSource | None = None,
    score: ScoreLike = "pass_fraction",
    cache_inputs: Sequence[str] = (),
    warm: str = "off",
    on_note: Callable[[str], None] | None = None,
) -> ScoreResult:
    """Score ``workspace`` as it is, or snapshot ``ref`` of ``store`` materialised into a
    temporary folder (the workspace is then not touched).

    The cache needs a tree hash: with ``ref`` it is the snapshot's; without ``ref`` but with a
    ``store`` and a ``cache``, the workspace is captured first to learn it (that records a
    snapshot labelled by ``meta={"purpose": "score"}``). ``spec`` may be a config mapping;
    ``cache_inputs`` are globs of files (relative to the workspace) whose content is part of the
    cache key (see ``Scorer``). ``warm``: ``on`` runs a pytest command in a warm server
    (``off``, the default: one run does not pay for starting one); ``on_note`` hears its
    fallbacks to a cold run.

    Raises:
        ScoringError: ``ref`` without ``store``, or the tests could not be set up.
        ConfigError: a bad spec mapping or score name.
    """
    if not isinstance(spec, TestSpec):
        spec = TestSpec.from_config(spec)
    with Scorer(spec, score, cache=cache, cache_inputs=cache_inputs, warm=warm) as scorer:
        scorer.warm.on_note = on_note
        return _score_with(scorer, workspace, cache=cache, ref=ref, store=store)


def _score_with(
    scorer: Scorer,
    workspace: str | os.PathLike[str],
    *,
    cache: ScoreCache | None,
    ref: str | None,
    store: SnapshotSource | None,
) -> ScoreResult:
    if ref is None:
        tree = None
        if store is not None and cache is not None:
            tree = str(store.capture(None, {"purpose": "score"}).tree)
        return scorer.score(workspace, tree)
    if store is None:
        raise ScoringError(f"scoring snapshot {ref!r} needs the snapshot store")
    owner = lifecycle.process_owner().token  # in the name: `reap` removes it if we are killed
    tmp = Path(tempfile.mkdtemp(prefix=f"materialized-{owner}-", dir=lifecycle.temp_root()))
    try:
        dest = tmp / "workspace"
        tree = str(store.materialize(ref, dest).tree)
        return scorer.score(dest, tree)
    finally:
        _remove_tree(tmp)


def _remove_tree(path: Path) -> None:
    # A snapshot may hold read-only folders: open them up so their content can go.
    for root, dirs, _files in os.walk(path):
        for name in dirs:
            full = os.path.join(root, name)
            if not os.path.islink(full):
                os.chmod(full, stat.S_IRWXU)
    shutil.rmtree(path, ignore_errors=True)
