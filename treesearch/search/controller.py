"""The search controller: select -> restore -> run agent -> capture -> score -> backup.

The controller takes its collaborators as arguments (a snapshot store, an agent factory, a scorer,
a policy), so it can be driven by tests and by other front ends. Each expansion is written to the
run's event log as one ``expansion`` event *after* it completed; ``apply_event`` turns events into
graph updates, and is used both live and when resuming, so a resumed search rebuilds exactly the
graph it had. The RNG of expansion ``k`` is derived from ``(seed, k)``, so a search that is killed
and resumed makes the same choices as one that was not.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import networkx as nx

from treesearch.agents import AgentContext, AgentResult, AgentStatus, run_agent
from treesearch.search import graph as G
from treesearch.search.budget import Budget, Usage, exhausted, remaining
from treesearch.search.policies import Choice, Policy
from treesearch.session import TransactionalSession
from treesearch.types import TreeHash


class Store(Protocol):
    workspace: Path
    path: Path

    def capture(self, label: str | None = None, meta: dict[str, Any] | None = None) -> Any: ...
    def restore(self, ref: str) -> Any: ...
    def resolve(self, ref: str) -> Any: ...
    def diff(self, a: str, b: str | None = None, *, max_patch_bytes: int = ...) -> Any: ...
    def diffs(self, pairs: Sequence[tuple[str, str]]) -> list[Any]: ...


class ScorerLike(Protocol):
    test_runs: int
    cache_hits: int

    def score(self, workspace: Any, tree: str | None = None, *, parent: Any = None) -> Any: ...


@dataclass(frozen=True)
class Strategy:
    """A named strategy: its agent config plus how the controller runs it."""

    name: str
    agent: Mapping[str, Any]
    max_steps: int = 10
    timeout: float = 600.0
    samples: int = 1
    """How often it may be applied to one node (> 1: a sampled strategy, e.g. mutations)."""


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


EventSink = Callable[[dict[str, Any]], None]


def apply_event(g: nx.DiGraph, ev: Mapping[str, Any], usage: Usage) -> None:
    """Apply one ``expansion`` event to the graph and the usage counters (live and on resume)."""
    parent, strategy = ev["parent"], ev["strategy"]
    pd = g.nodes[parent]
    pd["tried"][strategy] = pd["tried"].get(strategy, 0) + 1
    usage.expansions += 1
    usage.test_runs += int(ev.get("test_runs", 0))
    usage.cache_hits += int(ev.get("cache_hits", 0))
    usage.wall_seconds += float(ev.get("seconds", 0.0))
    usage.tokens += int(ev.get("tokens", 0))
    edge = dict(ev.get("edge") or {})
    child = ev["child"]
    node = None
    if ev.get("node") is not None:
        node = dict(ev["node"])
    outcome = G.add_result(g, parent, child, strategy=strategy, edge=edge, node=node)
    reward = ev.get("reward")
    if reward is not None:
        path = list(ev["path"]) + ([child] if outcome != "noop" and child not in ev["path"] else [])
        G.backup(g, path, float(reward))


class Controller:
    """Runs one search over the store's workspace."""

    def __init__(
        self,
        *,
        store: Store,
        strategies: Mapping[str, Strategy],
        make_agent: Callable[[Strategy], Any],
        scorer: ScorerLike,
        policy: Policy,
        budget: Budget,
        seed: int = 0,
        task: str = "",
        stop_on_perfect: bool = True,
        emit: EventSink | None = None,
        transcripts: Path | None = None,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
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
        self.emit = emit or (lambda ev: None)
        self.transcripts = transcripts
        self.on_progress = on_progress
        self.graph: nx.DiGraph | None = None
        self.usage = Usage()
        self.feedback: dict[str, str] = {}
        self.scores: dict[str, Any] = {}
        self.timings: list[Timing] = []

    # ---------------------------------------------------------------- setup / resume

    def start(self) -> None:
        """Capture and score the root (the workspace as it is now)."""
        snap = self.store.capture(label=None, meta={"purpose": "search-root"})
        result = self.scorer.score(self.store.workspace, tree=snap.tree)
        ev = {
            "event": "root",
            "tree": snap.tree,
            "commit": snap.commit,
            "score": result.score,
            "tests": _summary(result),
            "feedback": result.feedback(),
            "test_runs": 0 if result.cached else 1,
            "cache_hits": 1 if result.cached else 0,
        }
        self.emit(ev)
        self._write_test_log(snap.tree, result)
        self.replay([ev])

    def replay(self, events: Sequence[Mapping[str, Any]]) -> None:
        """Rebuild the graph from events (``root`` first, then ``expansion`` events)."""
        for ev in events:
            kind = ev.get("event")
            if kind == "root":
                self.graph = G.new_graph(
                    ev["tree"], commit=ev["commit"], score=ev["score"], tests=ev["tests"]
                )
                self.feedback[ev["tree"]] = ev.get("feedback", "")
                self.usage.test_runs += int(ev.get("test_runs", 0))
                self.usage.cache_hits += int(ev.get("cache_hits", 0))
            elif kind == "expansion":
                assert self.graph is not None, "expansion before root"
                apply_event(self.graph, ev, self.usage)
                if ev.get("feedback") is not None:
                    self.feedback[ev["child"]] = ev["feedback"]

    # ---------------------------------------------------------------- the loop

    def stop_reason(self) -> str | None:
        g = self._g()
        reason = exhausted(self.budget, self.usage)
        if reason:
            return reason
        if self.stop_on_perfect:
            best = G.best_node(g)
            if (g.nodes[best].get("score") or 0.0) >= 1.0:
                return "perfect_score"
        return None

    def run(self) -> SearchResult:
        """Expand until a budget or the search space runs out (or a perfect score is found).

        ``KeyboardInterrupt`` (Ctrl-C, or SIGTERM mapped to it by the caller) stops the search
        after restoring the best node found so far; the run can be resumed from its events.
        """
        g = self._g()
        interrupted = False
        reason = "exhausted"
        try:
            while True:
                stop = self.stop_reason()
                if stop:
                    reason = stop
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
                ev = self.expand(choice, k)
                if str(ev["edge"].get("reason") or "").startswith("replay:"):
                    # A replayed search met a request it never recorded: going on would no
                    # longer reproduce the recording.
                    reason = "replay_miss"
                    break
        except KeyboardInterrupt:
            interrupted = True
            reason = "interrupted"
        best = G.best_node(g)
        self.store.restore(best)
        return SearchResult(
            g, best, g.nodes[best].get("score"), self.usage, reason, interrupted, self.timings
        )

    def expand(self, choice: Choice, k: int) -> dict[str, Any]:
        """One expansion; returns the event it recorded."""
        g = self._g()
        timing = Timing()
        strategy = self.strategies[choice.strategy]
        t_start = time.perf_counter()
        t = t_start
        runs0, hits0 = self.scorer.test_runs, self.scorer.cache_hits
        self.store.restore(choice.node)
        timing.restore = time.perf_counter() - t

        base = f"{k:04d}-{_safe(strategy.name)}"
        session_file = self.transcripts / f"{base}.session.jsonl" if self.transcripts else None
        if session_file is not None and session_file.exists():
            # Left by an expansion that was cut short (the run is being resumed): keep it aside.
            session_file.replace(session_file.with_name(f"{base}.aborted-{time.time_ns()}.jsonl"))
        session = TransactionalSession.create(
            self.store,
            session_file,
            timeout=strategy.timeout,
            messages=[{"role": "user", "content": self.task}] if self.task else (),
        )
        ctx = AgentContext(
            session=session,
            task=self.task,
            feedback=tuple(self.feedback.get(n, "") for n in choice.path),
            max_steps=strategy.max_steps,
            timeout=strategy.timeout,
            rng=random.Random(f"{self.seed}:{choice.node}:{strategy.name}:{choice.attempt}"),
            node=TreeHash(choice.node),
            attempt=choice.attempt,
            history=tuple(self._history(choice.path)),
            siblings=tuple(self._siblings(choice.node)),
            test_spec=getattr(self.scorer, "search_spec", None),
            run_tests=self._run_tests_tool(),
            # Beside the stores, not in one: a search of a fresh copy (workspace.copy) gets a new
            # store, and agent caches (model responses, fault localisation) are keyed by content.
            cache_dir=self.store.path.parent / "agent-cache",
        )
        t = time.perf_counter()
        try:
            agent = self.make_agent(strategy)
            result = run_agent(agent, ctx)
        except Exception as exc:  # noqa: BLE001 - a strategy that cannot even be built fails
            result = AgentResult(AgentStatus.FAILED, reason=f"{type(exc).__name__}: {exc}")
        timing.agent = time.perf_counter() - t
        session.close()  # its workspace hold (the search's own hold goes on)
        transcript_rel = None
        if self.transcripts is not None:
            transcript_rel = f"transcripts/{base}.json"
            _write_json(self.transcripts / f"{base}.json", result.to_json())

        t = time.perf_counter()
        # run_agent leaves disk, session and store agreeing on result.tree (it records changes
        # made outside steps and rolls back a failed step), so no second scan is needed here.
        snap = (
            self.store.resolve(result.tree)
            if result.tree is not None
            else self.store.capture(label=None, meta=None)
        )
        timing.capture = time.perf_counter() - t
        child = str(snap.tree)

        parent = choice.node
        edge: dict[str, Any] = {
            "attempt": choice.attempt,
            "steps": result.steps,
            "status": result.status.value,
            "reason": result.reason,
            "transcript": transcript_rel,
            "seconds": round(timing.agent, 3),
            "tokens": result.cost.tokens_in + result.cost.tokens_out,
        }
        node: dict[str, Any] | None = None
        feedback = None
        if G.is_ancestor(g, child, parent):
            outcome = "noop"
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
            scored = self.scorer.score(
                self.store.workspace, tree=child, parent=self.scores.get(parent)
            )
            self.scores[child] = scored
            timing.score = time.perf_counter() - t
            feedback = scored.feedback()
            self._write_test_log(child, scored)
            reward = scored.score
            t = time.perf_counter()
            step, whole = self.store.diffs([(parent, child), (G.root_of(g), child)])
            edge["diffstat"] = _diffstat(step)
            node = {
                "score": scored.score,
                "tests": _summary(scored),
                "commit": snap.commit,
                "diff_size": _diff_size(whole),
            }
            timing.bookkeeping += time.perf_counter() - t
        t = time.perf_counter()
        test_runs = self.scorer.test_runs - runs0  # the agent's own run_tests calls count too
        cache_hits = self.scorer.cache_hits - hits0
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
            "tokens": edge["tokens"],
        }
        self.emit(ev)
        apply_event(g, ev, self.usage)
        if feedback is not None:
            self.feedback[child] = feedback
        timing.bookkeeping += time.perf_counter() - t
        self.timings.append(timing)
        if self.on_progress is not None:
            best = G.best_node(g)
            self.on_progress(
                {
                    "k": k,
                    "outcome": outcome,
                    "strategy": strategy.name,
                    "score": reward,
                    "best_score": g.nodes[best].get("score"),
                    "nodes": g.number_of_nodes(),
                    "remaining": remaining(self.budget, self.usage),
                }
            )
        return ev

    # ---------------------------------------------------------------- helpers

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

    def _write_test_log(self, tree: str, result: Any) -> None:
        if self.transcripts is None:
            return
        folder = self.transcripts.parent / "tests"
        folder.mkdir(exist_ok=True)
        run = result.run
        text = (
            f"tree {tree}\ncommand {run.command}\n{run.summary()}"
            f"{' (cached)' if result.cached else ''}\n\n{run.output}\n"
        )
        (folder / f"{tree[:12]}.log").write_text(text, encoding="utf-8", errors="replace")

    def _run_tests_tool(self) -> Callable[[], str]:
        def run_tests() -> str:
            result = self.scorer.score(self.store.workspace, tree=None)
            return str(result.feedback())

        return run_tests


def _summary(result: Any) -> dict[str, Any]:
    """What the graph keeps of a test run: deterministic (no durations), small."""
    run = result.run
    totals = {k: v for k, v in sorted(dict(run.totals).items()) if v}
    counts = ", ".join(f"{v} {k}" for k, v in totals.items() if k != "total") or "no tests"
    return {
        "status": run.status.value,
        "totals": totals,
        "failing": [t.id for t in run.failing][:50],
        "summary": f"{counts} ({run.status.value})",
    }


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:60]


def _write_json(path: Path, data: Any) -> None:
    import json

    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")
    tmp.replace(path)


def _diffstat(d: Any) -> str:
    ins = sum(f.added_lines for f in d.files)
    dels = sum(f.deleted_lines for f in d.files)
    return f"{len(d.files)} files, +{ins} -{dels}"


def _diff_size(d: Any) -> int:
    """Lines changed from the root (binary files count 1): ties between best nodes go to the
    smaller change."""
    return sum(f.added_lines + f.deleted_lines + (1 if f.binary else 0) for f in d.files)
