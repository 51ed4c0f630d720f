"""The search controller: select -> restore -> run agent -> capture -> score -> backup.

The controller takes its collaborators as arguments (a ``SnapshotStore``, an agent factory, a
``StateScorer``, a policy and a ``RunSink``: the protocols of ``treesearch.types``), so it can be
driven by tests (``treesearch.testing``) and by other front ends. It writes no file itself: each
expansion goes to the sink as one ``expansion`` event *after* it completed, with its transcript and
test log; ``search.events.apply_event`` turns the event into graph updates, live and when resuming
(``search.events.replay``), so a resumed search rebuilds exactly the graph it had. The RNG of expansion ``k`` is derived from ``(seed, k)``, so a search that is killed
and resumed makes the same choices as one that was not.
"""

from __future__ import annotations

import hashlib
import random
import re
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import networkx as nx

from treesearch.agents import Agent, AgentContext, AgentResult, AgentStatus, run_agent
from treesearch.errors import SearchError
from treesearch.scoring.results import RunStatus, ScoreResult, from_summary, summary_marks
from treesearch.search import graph as G
from treesearch.search.batch import dispatched
from treesearch.search.budget import Budget, Usage, exhausted, remaining
from treesearch.search.events import apply_completed, apply_event, replay
from treesearch.search.policies import Choice, Policy
from treesearch.search.work import Outcome, Pool, Task
from treesearch.session import TransactionalSession
from treesearch.types import Diff, RunSink, Snapshot, SnapshotStore, StateScorer, TreeHash


@dataclass(frozen=True)
class Strategy:
    """A named strategy: its agent config plus how the controller runs it."""

    name: str
    agent: Mapping[str, Any]
    max_steps: int = 10
    timeout: float = 600.0
    samples: int = 1
    """How often it may be applied to one node (> 1: a sampled strategy, e.g. mutations)."""


class StateJudge(Protocol):
    """A value judge (``agents.llm.judge.ValueJudge``): a verdict per state, and how it joins
    a tests' score."""

    def rate(
        self,
        tree: str,
        task: str,
        diff: Callable[[], str],
        tests: str,
        *,
        volatile: tuple[str, ...] = (),
    ) -> Any:
        """The verdict on ``tree`` (``.value``, ``.reason``, ``.error``, ``.tokens``,
        ``.to_dict()``)."""
        ...

    def combine(self, score: float, verdict: Any) -> float:
        """The search's score of a state whose tests score ``score``."""
        ...


@dataclass
class Timing:
    """Where an expansion's time went (seconds)."""

    restore: float = 0.0
    agent: float = 0.0
    capture: float = 0.0
    score: float = 0.0
    bookkeeping: float = 0.0

    @property
    def overhead(self) -> float:
        """The controller's own time: restore + capture + bookkeeping."""
        return self.restore + self.capture + self.bookkeeping


@dataclass
class SearchResult:
    graph: nx.DiGraph
    best: str
    best_score: float | None
    usage: Usage
    stop_reason: str
    interrupted: bool = False
    timings: list[Timing] = field(default_factory=list)
    stop_detail: str | None = None
    """One line on why the search stopped, when the reason alone does not say it (e.g. the
    repeated agent error behind ``max_consecutive_errors``)."""


class _OutOfTime(Exception):
    """The wall-clock budget ran out inside an expansion: it is dropped (a resume redoes it)."""


class Controller:
    """Runs one search over the store's workspace."""

    def __init__(
        self,
        *,
        store: SnapshotStore,
        strategies: Mapping[str, Strategy],
        make_agent: Callable[[Strategy], Agent],
        scorer: StateScorer,
        policy: Policy,
        budget: Budget,
        seed: int = 0,
        task: str = "",
        stop_on_perfect: bool = True,
        sink: RunSink | None = None,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
        max_consecutive_errors: int | None = 3,
        isolation: Any = None,
        pool: Pool | None = None,
        judge: StateJudge | None = None,
    ) -> None:
        self.store = store
        self.strategies = dict(strategies)
        self.make_agent = make_agent
        self.scorer = scorer
        self.policy = policy
        self.budget = budget
        self.seed = seed
        self.task = task
        self.stop_on_perfect = stop_on_perfect
        self.sink = sink
        """Where events, timings, transcripts and test logs go (``runs.RunDir``; ``None``:
        nowhere). The controller writes no file itself."""
        self.on_progress = on_progress
        self.max_consecutive_errors = max_consecutive_errors
        self.isolation = isolation
        """How agent commands are confined (``treesearch.isolation.Isolation``; ``None``: not)."""
        self.pool = pool
        """Worker processes expanding a batch at once (``search.parallel``; ``None``: one
        expansion at a time, in the workspace)."""
        self.judge = judge
        """A value judge (``scoring.judge``) whose verdict joins each new state's score;
        ``None``: the tests alone score."""
        self._judge_tokens = 0
        self.pending: dict[int, tuple[Choice, int | None]] = {}
        """Expansions sent to workers and not recorded when the search was killed (by ``k``:
        the choice and its share of the test runs): a resumed search sends them again."""
        self.error_streak: list[str] = []
        """Reasons of the latest expansions in a row whose agent failed with the same error and
        left no new state (counted by this process only: a resumed search, e.g. after the server was fixed,
        starts again at 0)."""
        self.graph: nx.DiGraph | None = None
        self.usage = Usage()
        self.feedback: dict[str, str] = {}
        self.scores: dict[str, ScoreResult] = {}
        self.timings: list[Timing] = []
        self._clock: tuple[float, float] | None = None
        """(monotonic time, wall seconds already spent) when this process started counting."""

    # ---------------------------------------------------------------- setup / resume

    def start(self) -> None:
        """Capture and score the root (the workspace as it is now)."""
        self._start_clock()
        snap = self.store.capture(label=None, meta={"purpose": "search-root"})
        result = self._score(snap.tree, None)
        if result is None:
            raise SearchError(
                f"search.budget.wall_seconds ({self.budget.wall_seconds:g} s) ran out while "
                "the root was being tested: raise it"
            )
        judged = self._judged(snap.tree, result, root=snap.tree)
        ev = {
            "event": "root",
            "tree": snap.tree,
            "commit": snap.commit,
            "score": judged.score,
            "tests": _summary(judged),
            "feedback": result.feedback(),
            "test_runs": 0 if result.cached else 1,
            "cache_hits": 1 if result.cached else 0,
            "elapsed": round(self._elapsed(), 3),
            **self._take_judge_tokens(),
        }
        self._emit(ev)
        self._write_test_log(snap.tree, result)
        self.replay([ev])

    def replay(self, events: Sequence[Mapping[str, Any]]) -> None:
        """Rebuild the graph from events (``root`` first, then ``expansion`` events)."""
        self.graph = replay(
            events, graph=self.graph, usage=self.usage, feedback=self.feedback
        ).graph
        self.pending = dispatched(events)

    # ---------------------------------------------------------------- the loop

    def _start_clock(self) -> None:
        self._clock = (time.monotonic(), self.usage.wall_seconds)

    def _elapsed(self) -> float:
        """Wall seconds of the search: this process's since it started the search (or resumed
        it), plus what earlier processes recorded in their last event."""
        if self._clock is None:
            return self.usage.wall_seconds
        t0, before = self._clock
        return before + time.monotonic() - t0

    def time_left(self) -> float | None:
        """Wall seconds left of ``budget.wall_seconds`` (``None``: no wall-clock limit)."""
        if self.budget.wall_seconds is None:
            return None
        self.usage.wall_seconds = self._elapsed()
        return max(self.budget.wall_seconds - self.usage.wall_seconds, 0.0)

    def _score(
        self, tree: str | None, parent: ScoreResult | None, *, partial: ScoreResult | None = None
    ) -> ScoreResult | None:
        """Score with the test run's timeout clipped to the wall time left (``partial``: complete
        that partial result's run instead); ``None`` when the wall-clock budget ran out before
        or during the run."""
        left = self.time_left()
        if left is not None and left <= 0:
            return None
        runs_left = remaining(self.budget, self.usage)["test_runs"]
        if partial is not None:
            result = self.scorer.complete(self.store.workspace, tree, partial, time_limit=left)
        else:
            result = self.scorer.score(
                self.store.workspace,
                tree=tree,
                parent=parent,
                time_limit=left,
                max_runs=None if runs_left is None else max(int(runs_left), 1),
            )
        spec = self.scorer.search_spec
        limited = left is not None and spec is not None and left < spec.timeout
        if limited and result.run.timed_out and not result.cached:
            return None  # cut by the budget, not by the spec's timeout: says nothing of the state
        return result

    def stop_reason(self) -> str | None:
        """Why the search must stop now (``None``: it goes on). A root that cannot be scored
        comes first (``root_invalid``: no expansion could be told from another); then a perfect
        best node when ``stop_on_perfect`` is on, whatever budget ran out at the same moment (the
        search found what it looked for); then the budgets; then repeated agent errors."""
        g = self._g()
        self.time_left()  # brings usage.wall_seconds up to date
        if self.root_problem() is not None:
            return "root_invalid"
        if self.stop_on_perfect:
            best = G.best_node(g)
            if (g.nodes[best].get("score") or 0.0) >= 1.0:
                return "perfect_score"
        reason = exhausted(self.budget, self.usage)
        if reason:
            return reason
        n = self.max_consecutive_errors
        if n is not None and len(self.error_streak) >= n:
            return "max_consecutive_errors"
        return None

    def root_problem(self) -> str | None:
        """Why nothing can be scored from the root (one line; ``stop_detail`` of
        ``root_invalid``), or ``None``: its test run was usable (tests may all fail). Read from
        the root's test summary in the graph, so a resumed search says the same."""
        g = self._g()
        why = unscorable(g.nodes[G.root_of(g)].get("tests"))
        if why is None:
            return None
        spec = self.scorer.search_spec
        command = ""
        if spec is not None:
            cmd = spec.command
            command = f" (`{cmd if isinstance(cmd, str) else shlex.join(cmd)}`)"
        return (
            f"the root's test run is {why}; nothing can be scored: fix scoring.search_tests"
            f"{command} and start a new run"
        )

    def run(self) -> SearchResult:
        """Expand until a budget or the search space runs out (or a perfect score is found).

        ``KeyboardInterrupt`` (Ctrl-C, or SIGTERM mapped to it by the caller) stops the search
        after restoring the best node found so far; the run can be resumed from its events.
        """
        g = self._g()
        interrupted = False
        reason = "exhausted"
        if self._clock is None:
            self._start_clock()
        try:
            while True:
                stop = self.stop_reason()
                if stop:
                    reason = stop
                    break
                if self.pool is not None:
                    reason = self.pool.run_window(self)
                    break
                k = self.usage.expansions
                rng = random.Random(f"{self.seed}:{k}")
                choice = self.policy(
                    g,
                    rng,
                    strategies={n: s.samples for n, s in self.strategies.items()},
                    max_depth=self.budget.max_depth,
                )
                if choice is None:
                    reason = "search_space_exhausted"
                    break
                if G.is_partial(g, choice.node):
                    self.complete(choice.node)  # then choose again: its value may have dropped
                    continue
                ev = self.expand(choice, k)
                if str(ev["edge"].get("reason") or "").startswith("replay:"):
                    # A replayed search met a request it never recorded: going on would no
                    # longer reproduce the recording.
                    reason = "replay_miss"
                    break
        except _OutOfTime:
            reason = "wall_seconds"
        except KeyboardInterrupt:
            interrupted = True
            reason = "interrupted"
        self.time_left()
        best = G.best_node(g)
        self.store.restore(best)
        detail = None
        if reason == "root_invalid":
            detail = self.root_problem()
        if reason == "max_consecutive_errors":
            detail = (
                f"the agent failed {len(self.error_streak)} times in a row with the same error: "
                f"{self.error_streak[-1]}"
            )
        return SearchResult(
            g,
            best,
            g.nodes[best].get("score"),
            self.usage,
            reason,
            interrupted,
            self.timings,
            detail,
        )

    def complete(self, node: str) -> dict[str, Any]:
        """Run the whole suite on ``node``, which a failing-first screen left partial and a
        policy chose to build on; records a ``completed`` event and returns it. The policy
        chooses again after it (the node is now worth its score, not its bound)."""
        g = self._g()
        runs0, hits0 = self.scorer.test_runs, self.scorer.cache_hits
        known = self.scores.get(node)
        if known is None or known.partial is None:  # after a resume: from its test summary
            known = from_summary(node, g.nodes[node].get("tests"))
        if self.time_left() == 0:
            raise _OutOfTime
        t0 = time.perf_counter()
        self.store.restore(node)
        t1 = time.perf_counter()
        result = self._score(node, None, partial=known)
        if result is None:
            raise _OutOfTime
        t2 = time.perf_counter()
        self.scores[node] = result
        self._write_test_log(node, result)
        feedback = result.feedback()
        judged = self._judged(node, result)
        ev: dict[str, Any] = {
            "event": "completed",
            "node": node,
            "score": judged.score,
            "tests": _summary(judged),
            "feedback": feedback,
            "path": G.path_to(g, node),
            "test_runs": self.scorer.test_runs - runs0,
            "cache_hits": self.scorer.cache_hits - hits0,
            "elapsed": round(self._elapsed(), 3),
            **self._take_judge_tokens(),
        }
        self._emit(ev)
        apply_completed(g, ev, self.usage)
        self.feedback[node] = feedback
        if self.sink is not None:
            self.sink.append_timing(
                {
                    "completed": node,
                    "restore_seconds": round(t1 - t0, 4),
                    "score_seconds": round(t2 - t1, 4),
                    "seconds": round(time.perf_counter() - t0, 3),
                    "elapsed": ev["elapsed"],
                }
            )
        return ev

    def expand(self, choice: Choice, k: int) -> dict[str, Any]:
        """One expansion; returns the event it recorded."""
        timing = Timing()
        strategy = self.strategies[choice.strategy]
        t_start = time.perf_counter()
        t = t_start
        runs0, hits0 = self.scorer.test_runs, self.scorer.cache_hits
        self.store.restore(choice.node)
        timing.restore = time.perf_counter() - t

        base = f"{k:04d}-{_safe(strategy.name)}"
        session_file = self.sink.session_file(base) if self.sink is not None else None
        timeout = strategy.timeout
        left = self.time_left()
        if left is not None:
            if left <= 0:
                raise _OutOfTime
            timeout = min(timeout, left)
        session = TransactionalSession.create(
            self.store,
            session_file,
            timeout=timeout,
            messages=[{"role": "user", "content": self.task}] if self.task else (),
            # Derived from the run, not random: the session's snapshots (and so the nodes'
            # commit ids) are the same in two runs with the same seed.
            session_id=self._session_id(choice, k),
        )
        session.isolation = self.isolation
        ctx = AgentContext(
            session=session,
            task=self.task,
            feedback=tuple(self.feedback.get(n, "") for n in choice.path),
            max_steps=strategy.max_steps,
            timeout=timeout,
            rng=random.Random(f"{self.seed}:{choice.node}:{strategy.name}:{choice.attempt}"),
            node=TreeHash(choice.node),
            attempt=choice.attempt,
            history=tuple(self._history(choice.path)),
            siblings=tuple(self._siblings(choice.node)),
            test_spec=self.scorer.search_spec,
            run_tests=self._run_tests_tool(),
            # Beside the stores (a copied workspace gets a new store); keyed by content.
            cache_dir=self.store.path.parent / "agent-cache",
            warm=getattr(self.scorer, "warm", None),
            failing=self._failing(choice.node),
        )
        t = time.perf_counter()
        try:
            agent = self.make_agent(strategy)
            result = run_agent(agent, ctx)
        except Exception as exc:  # noqa: BLE001 - a strategy that cannot even be built fails
            result = AgentResult(AgentStatus.FAILED, reason=f"{type(exc).__name__}: {exc}")
        timing.agent = time.perf_counter() - t
        session.close()  # its workspace hold (the search's own hold goes on)
        if left is not None and self.time_left() == 0:
            raise _OutOfTime  # the agent was cut at the budget: no result to record

        def capture() -> Snapshot:
            # run_agent leaves disk, session and store agreeing on result.tree (it records
            # changes made outside steps and rolls back a failed step): no second scan needed.
            if result.tree is not None:
                return self.store.resolve(result.tree)
            return self.store.capture(label=None, meta=None)

        return self._record(
            choice,
            k,
            result,
            capture,
            lambda child, parent: self._score(child, self._parent_result(parent)),
            lambda: (self.scorer.test_runs - runs0, self.scorer.cache_hits - hits0),
            timing,
            t_start,
        )

    def _judged(self, tree: str, result: ScoreResult, *, root: str | None = None) -> ScoreResult:
        """``result`` with the judge's verdict on ``tree`` joined to its score (and a partial
        run's bound) and recorded in its details; ``result`` itself without a judge. A judge
        that failed leaves the tests' score and says why (``details["judge"]["error"]``)."""
        if self.judge is None:
            return result
        start = root if root is not None else G.root_of(self._g())
        verdict = self.judge.rate(
            tree,
            self.task,
            lambda: self.store.diff(start, tree).patch if tree != start else "",
            _judge_tests(result),
            volatile=(str(self.store.workspace),),
        )
        self._judge_tokens += verdict.tokens
        partial = result.partial
        if partial is not None and partial.upper is not None:
            partial = replace(partial, upper=self.judge.combine(partial.upper, verdict))
        return replace(
            result,
            score=self.judge.combine(result.score, verdict),
            details={**result.details, "judge": verdict.to_dict()},
            partial=partial,
        )

    def _take_judge_tokens(self) -> dict[str, int]:
        """``{"tokens": n}``: the judge's tokens since the last event (for the next one)."""
        n, self._judge_tokens = self._judge_tokens, 0
        return {"tokens": n} if n else {}

    def _session_id(self, choice: Choice, k: int) -> str:
        name = self.strategies[choice.strategy].name
        key = f"{self.seed}:{k}:{choice.node}:{name}:{choice.attempt}"
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    def apply_outcome(self, pool: Pool, task: Task, out: Outcome) -> dict[str, Any]:
        """Record what a worker did for ``task`` (``search.parallel``); returns the event."""
        if out.error is not None:
            raise SearchError(f"expansion {task.k} failed in a search worker: {out.error}")
        if out.cut or out.result is None:
            raise _OutOfTime  # cut at the budget: this one and the later ones are dropped
        return self._record(
            task.choice,
            task.k,
            out.result,
            lambda: pool.record(out),
            lambda child, parent: out.new_score(),
            lambda: (out.test_runs, out.cache_hits),
            Timing(**{k: v for k, v in out.timing.items() if k != "capture"}),
            time.perf_counter() - out.seconds,
        )

    def task_for(self, choice: Choice, k: int, test_runs: int | None) -> Task:
        """What a worker needs for expansion ``k`` (``search.parallel``), as the graph is now;
        its time limits are set when it is sent (``timed``)."""
        strategy = self.strategies[choice.strategy]
        base = f"{k:04d}-{_safe(strategy.name)}"
        session_file = self.sink.session_file(base) if self.sink is not None else None
        return Task(
            k=k,
            choice=choice,
            strategy=strategy,
            start=self.store.resolve(choice.node),
            session_file=str(session_file) if session_file is not None else None,
            session_id=self._session_id(choice, k),
            task=self.task,
            feedback=tuple(self.feedback.get(n, "") for n in choice.path),
            history=tuple(self._history(choice.path)),
            siblings=tuple(self._siblings(choice.node)),
            failing=self._failing(choice.node),
            seed=self.seed,
            timeout=strategy.timeout,
            time_left=None,
            test_runs=test_runs,
            known=frozenset(self._g().nodes),
            parent_score=self._parent_result(choice.node),
            repair=getattr(self.scorer, "repair", None),
            warm_checked=bool(getattr(getattr(self.scorer, "warm", None), "checked", False)),
        )

    def timed(self, task: Task) -> Task:
        """``task`` with the agent's timeout clipped to the wall-clock budget left now."""
        left = self.time_left()
        if left is None:
            return task
        if left <= 0:
            raise _OutOfTime
        return replace(task, time_left=left, timeout=min(task.strategy.timeout, left))

    def _record(
        self,
        choice: Choice,
        k: int,
        result: AgentResult,
        capture: Callable[[], Snapshot],
        score: Callable[[str, str], ScoreResult | None],
        counts: Callable[[], tuple[int, int]],
        timing: Timing,
        t_start: float,
    ) -> dict[str, Any]:
        """Record an expansion whose agent has run: its transcript, its state (``capture``),
        the state's score when it is new (``score(child, parent)``; ``None``: the wall-clock
        budget ran out), the event (test runs and cache hits from ``counts``) and its timing."""
        g = self._g()
        strategy = self.strategies[choice.strategy]
        base = f"{k:04d}-{_safe(strategy.name)}"
        transcript_rel = None
        if self.sink is not None:
            transcript_rel = self.sink.write_transcript(base, result.to_json())

        t = time.perf_counter()
        snap = capture()
        timing.capture += time.perf_counter() - t
        child = str(snap.tree)

        parent = choice.node
        edge: dict[str, Any] = {
            "attempt": choice.attempt,
            "steps": result.steps,
            "status": result.status.value,
            "reason": result.reason,
            "transcript": transcript_rel,
            "tokens": result.cost.tokens_in + result.cost.tokens_out,
            **({"exhausted": True} if result.exhausted else {}),  # policies choose it no more
        }
        node: dict[str, Any] | None = None
        feedback = None
        if G.is_ancestor(g, child, parent):
            # An agent that failed and left nothing new is an error, never a silent no-op.
            outcome = "error" if result.status is AgentStatus.FAILED else "noop"
            reward = g.nodes[parent].get("score")
        elif child in g:
            outcome = "transposition"
            reward = g.nodes[child].get("score")
            t = time.perf_counter()
            edge["diffstat"] = _diffstat(self.store.diffs([(parent, child)])[0])
            timing.bookkeeping += time.perf_counter() - t
        else:
            outcome = "new"
            t = time.perf_counter()
            scored = score(child, parent)
            if scored is None:
                raise _OutOfTime
            self.scores[child] = scored
            timing.score += time.perf_counter() - t
            feedback = scored.feedback()
            self._write_test_log(child, scored)
            scored = self._judged(child, scored)  # (self.scores keeps the tests' own result)
            partial = scored.partial
            bound = partial.upper if partial is not None else None
            reward = scored.score
            if partial is not None:  # see partial_estimate: what MCTS backs up until completed
                reward = G.partial_estimate(scored.score, bound, g.nodes[parent].get("score"))
            t = time.perf_counter()
            step, whole = self.store.diffs([(parent, child), (G.root_of(g), child)])
            edge["diffstat"] = _diffstat(step)
            node = {
                "score": scored.score,
                "tests": _summary(scored),
                "commit": snap.commit,
                "diff_size": _diff_size(whole),
                **({"partial": True} if partial is not None else {}),
                **({"bound": bound} if bound is not None else {}),
                **({"backed": reward} if partial is not None else {}),
            }
            timing.bookkeeping += time.perf_counter() - t
        t = time.perf_counter()
        test_runs, cache_hits = counts()  # the agent's own run_tests calls count too
        ev = {
            "event": "expansion",
            "k": k,
            "parent": parent,
            "strategy": strategy.name,
            "attempt": choice.attempt,
            "child": child,
            "outcome": outcome,
            "path": list(choice.path),
            "reward": reward,
            "edge": edge,
            "node": node,
            "feedback": feedback,
            "test_runs": test_runs,
            "cache_hits": cache_hits,
            "seconds": round(time.perf_counter() - t_start, 3),
            "elapsed": round(self._elapsed(), 3),
            "tokens": edge["tokens"] + self._take_judge_tokens().get("tokens", 0),
        }
        if result.priors and strategy.name not in g.nodes[parent].get("priors", {}):
            ev["priors"] = [float(p) for p in result.priors]  # the node's, recorded once
        self._emit(ev)
        apply_event(g, ev, self.usage)
        self._note_error(ev)
        if feedback is not None:
            self.feedback[child] = feedback
        timing.bookkeeping += time.perf_counter() - t
        self.timings.append(timing)
        if self.sink is not None:
            self.sink.append_timing(
                {
                    "k": k,
                    "strategy": strategy.name,
                    "agent_seconds": round(timing.agent, 3),
                    **{
                        f"{name}_seconds": round(getattr(timing, name), 4)
                        for name in ("restore", "capture", "score", "bookkeeping")
                    },
                    "seconds": ev["seconds"],
                    "elapsed": ev["elapsed"],
                }
            )
        if self.on_progress is not None:
            best = G.best_node(g)
            self.on_progress(
                {
                    "k": k,
                    "outcome": outcome,
                    "status": result.status.value,
                    "reason": result.reason,
                    "strategy": strategy.name,
                    "score": reward,
                    "best_score": g.nodes[best].get("score"),
                    "nodes": g.number_of_nodes(),
                    "remaining": remaining(self.budget, self.usage),
                }
            )
        return ev

    # ---------------------------------------------------------------- helpers

    def _note_error(self, ev: Mapping[str, Any]) -> None:
        """Track the run of consecutive identical agent errors (``max_consecutive_errors``): runs
        that failed and left no new state (a failed run that kept useful steps made progress)."""
        edge = ev.get("edge") or {}
        if ev.get("outcome") != "error":
            self.error_streak = []
            return
        reason = one_line(edge.get("reason"))
        if self.error_streak and error_key(self.error_streak[-1]) != error_key(reason):
            self.error_streak = []
        self.error_streak.append(reason)

    def _parent_result(self, parent: str) -> ScoreResult | None:
        """The parent's result (after a resume, rebuilt from its node's test summary: what a
        failing-first screen needs of it)."""
        found = self.scores.get(parent)
        if found is None and self.graph is not None and parent in self.graph:
            found = from_summary(parent, self.graph.nodes[parent].get("tests"))
        return found

    def _failing(self, node: str) -> tuple[str, ...]:
        """The node's failing search tests, as its test summary lists them."""
        tests = self._g().nodes[node].get("tests") or {}
        return tuple(str(t) for t in tests.get("failing") or ())

    def _g(self) -> nx.DiGraph:
        if self.graph is None:
            raise RuntimeError("start() or replay() first")
        return self.graph

    def _history(self, path: tuple[str, ...]) -> list[dict[str, Any]]:
        g = self._g()
        out = []
        for a, b in zip(path, path[1:], strict=False):
            e = g.edges[a, b]
            out.append(
                {
                    "strategy": e["strategy"],
                    "score": g.nodes[b].get("score"),
                    "summary": g.nodes[b].get("tests", {}).get("summary", ""),
                    "diffstat": e.get("diffstat", ""),
                }
            )
        return out

    def _siblings(self, node: str) -> list[dict[str, Any]]:
        g = self._g()
        out = []
        for child in sorted(g.successors(node), key=lambda c: g.nodes[c]["order"]):
            e = g.edges[node, child]
            out.append(
                {
                    "strategy": e["strategy"],
                    "outcome": "new",
                    "score": g.nodes[child].get("score"),
                    "summary": g.nodes[child].get("tests", {}).get("summary", ""),
                }
            )
        for err in g.nodes[node].get("errors", []):
            out.append(
                {
                    "strategy": err["strategy"],
                    "outcome": "error",
                    "score": g.nodes[node].get("score"),
                    "summary": err.get("reason") or "",
                }
            )
        for noop in g.nodes[node]["noops"]:
            out.append(
                {
                    "strategy": noop["strategy"],
                    "outcome": "noop",
                    "score": g.nodes[node].get("score"),
                    "summary": noop.get("reason") or "",
                }
            )
        return out

    def sink_event(self, ev: dict[str, Any]) -> None:
        """Record an event that changes nothing in the graph (e.g. ``dispatch``)."""
        self._emit(ev)

    def _emit(self, ev: dict[str, Any]) -> None:
        if self.sink is not None:
            self.sink.append(ev)

    def _write_test_log(self, tree: str, result: ScoreResult) -> None:
        if self.sink is not None:
            self.sink.write_test_log(tree, result)

    def _run_tests_tool(self) -> Callable[[], str]:
        def run_tests() -> str:
            left = self.time_left()
            if left is not None and left <= 0:
                return (
                    "not run: the search's wall-clock budget (search.budget.wall_seconds) is spent"
                )
            result = self.scorer.score(self.store.workspace, tree=None, time_limit=left)
            return str(result.feedback())

        return run_tests


def one_line(reason: Any) -> str:
    """An agent's failure reason as one line (``"unknown error"`` when it gave none)."""
    text = " ".join(str(reason or "").split())
    return (text[:297] + "...") if len(text) > 300 else (text or "unknown error")


_NUMBER = re.compile(r"\d+(\.\d+)?")


def error_key(reason: str) -> str:
    """What makes two agent errors "the same": their text with numbers (durations, ports,
    counts) blanked."""
    return _NUMBER.sub("#", reason)


UNSCORABLE = ("invalid", "error")
"""Statuses of a root's test run that leave nothing to search by (``Controller.root_problem``):
``invalid`` (the command was not found, a pytest usage error, no tests collected, an unreadable
report, a session cut short) and ``error`` (a module failed to collect). A run that could not
start at all (``crashed``, marked ``started: false`` in its summary) is one too. A timeout or a
crash of a run that started may be the bug itself: such a root is searched."""


def unscorable(tests: Mapping[str, Any] | None) -> str | None:
    """``STATUS: problem`` when a test summary (``_summary``) says that nothing in it could be
    scored, else ``None``."""
    if not tests:
        return None
    status = str(tests.get("status") or "")
    if status not in UNSCORABLE and tests.get("started") is not False:
        return None
    problem = str(tests.get("problem") or "no usable result")
    return f"{status.upper()}: {problem}"


def _summary(result: ScoreResult) -> dict[str, Any]:
    """What the graph keeps of a test run: deterministic (no durations), small."""
    run = result.run
    totals = {k: v for k, v in sorted(dict(run.totals).items()) if v}
    counts = ", ".join(f"{v} {k}" for k, v in totals.items() if k != "total") or "no tests"
    out: dict[str, Any] = {
        "status": run.status.value,
        "totals": totals,
        "failing": [t.id for t in run.failing][:50],
        "summary": f"{counts} ({run.status.value})",
    }
    if run.status.value != "ok" and run.problem:  # a broken test run says why, wherever shown
        out["problem"] = run.problem[:500]
        out["summary"] = f"{counts} ({run.status.value}: {run.problem[:200]})"
    if run.exit_code is None and run.status is RunStatus.CRASHED:
        out["started"] = False  # the command could not start (a program not found)
    verdict = (result.details or {}).get("judge")  # scoring.judge: the model's view
    if verdict:
        out["judge"] = dict(verdict)
        out["summary"] += (
            f"; judge {verdict['value']:.2f}: {verdict['reason']}"
            if verdict.get("error") is None
            else f"; judge failed: {verdict['error'][:200]}"
        )
    repro = (result.details or {}).get("reproduction")  # search.reproduce: its own part
    if repro:
        out["reproduction"] = {"passed": repro["passed"], "counted": repro["counted"]}
        out["summary"] += f"; reproduction tests: {repro['passed']}/{repro['counted']} pass"
    marks = summary_marks(result)  # a failing-first screen: what is known
    if marks:
        out.update(marks)
        out["summary"] = f"{out['summary']}; partial: {marks['not_run']} not run"
    return out


def _judge_tests(result: ScoreResult) -> str:
    """The test results a judge reads: the run's summary line and its failing tests."""
    run = result.run
    failing = [t.id for t in run.failing][:20]
    lines = [run.summary()]
    if failing:
        lines += ["Failing tests:", *(f"  {t}" for t in failing)]
    if result.partial is not None:
        lines.append(f"(a screen: {result.partial.not_run} tests did not run)")
    return "\n".join(lines)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:60]


def _diffstat(d: Diff) -> str:
    ins = sum(f.added_lines for f in d.files)
    dels = sum(f.deleted_lines for f in d.files)
    return f"{len(d.files)} files, +{ins} -{dels}"


def _diff_size(d: Diff) -> int:
    """Lines changed from the root (binary files count 1): ties between best nodes go to the
    smaller change."""
    return sum(f.added_lines + f.deleted_lines + (1 if f.binary else 0) for f in d.files)
