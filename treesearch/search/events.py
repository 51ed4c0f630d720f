"""From a run's events to its graph: the one place that rebuilds a search.

A search records one ``root`` event, then one ``expansion`` event per expansion *after* it
completed, a ``completed`` event when it ran the whole suite on a node a failing-first screen
had left partial (a policy chose it), and ``finished``/``interrupted`` at each process's end.
``apply_event`` turns one expansion into graph updates (``apply_completed`` one completed run);
the controller uses them live, and ``replay`` uses them to rebuild the graph, the usage counters
and the test feedback from a log: when resuming a search (``Controller.replay``) and when
reading a finished run (``app.load_run_graph``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from treesearch.errors import RunError
from treesearch.search import graph as G
from treesearch.search.budget import Usage

__all__ = ["Replayed", "apply_completed", "apply_event", "replay"]


@dataclass
class Replayed:
    """What a log of events rebuilds."""

    graph: nx.DiGraph | None
    """The search graph (``None`` when the events hold no root yet)."""
    usage: Usage = field(default_factory=Usage)
    """What the search had spent."""
    feedback: dict[str, str] = field(default_factory=dict)
    """Test feedback per scored node (what agents are shown about the path to a node)."""


def replay(
    events: Iterable[Mapping[str, Any]],
    *,
    graph: nx.DiGraph | None = None,
    usage: Usage | None = None,
    feedback: dict[str, str] | None = None,
) -> Replayed:
    """Rebuild from events (``root`` first, then ``expansion`` events; ``finished`` and
    ``interrupted`` bring the elapsed time up to date; other events are ignored).

    ``graph``, ``usage`` and ``feedback`` continue an earlier replay (they are updated in place)."""
    out = Replayed(
        graph,
        usage if usage is not None else Usage(),
        feedback if feedback is not None else {},
    )
    for ev in events:
        kind = ev.get("event")
        if kind == "root":
            out.graph = G.new_graph(
                ev["tree"], commit=ev["commit"], score=ev["score"], tests=ev["tests"]
            )
            out.feedback[ev["tree"]] = ev.get("feedback", "")
            out.usage.tokens += int(ev.get("tokens", 0))  # a value judge's (scoring.judge)
            out.usage.test_runs += int(ev.get("test_runs", 0))
            out.usage.cache_hits += int(ev.get("cache_hits", 0))
            out.usage.wall_seconds = float(ev.get("elapsed", 0.0))
        elif kind == "expansion":
            if out.graph is None:
                raise RunError("the event log holds an expansion before its root: it is damaged")
            apply_event(out.graph, ev, out.usage)
            if ev.get("feedback") is not None:
                out.feedback[ev["child"]] = ev["feedback"]
        elif kind == "completed":
            if out.graph is None:
                raise RunError("the event log holds a completed run before its root: it is damaged")
            apply_completed(out.graph, ev, out.usage)
            if ev.get("feedback") is not None:
                out.feedback[ev["node"]] = ev["feedback"]
        elif kind in ("finished", "interrupted"):  # the end of an earlier process
            spent = float(ev.get("elapsed", 0.0))
            out.usage.wall_seconds = max(out.usage.wall_seconds, spent)
    return out


def apply_event(g: nx.DiGraph, ev: Mapping[str, Any], usage: Usage) -> None:
    """Apply one ``expansion`` event to the graph and the usage counters (live and on resume)."""
    parent, strategy = ev["parent"], ev["strategy"]
    pd = g.nodes[parent]
    pd["tried"][strategy] = pd["tried"].get(strategy, 0) + 1
    if ev.get("priors"):  # the agent's prior of each attempt here (graph.prior)
        pd.setdefault("priors", {}).setdefault(strategy, list(ev["priors"]))
    usage.expansions += 1
    usage.test_runs += int(ev.get("test_runs", 0))
    usage.cache_hits += int(ev.get("cache_hits", 0))
    if "elapsed" in ev:
        usage.wall_seconds = float(ev["elapsed"])
    else:  # a log written before elapsed time was recorded: the sum of expansion times
        usage.wall_seconds += float(ev.get("seconds", 0.0))
    usage.tokens += int(ev.get("tokens", 0))
    edge = dict(ev.get("edge") or {})
    child = ev["child"]
    node = None
    if ev.get("node") is not None:
        node = dict(ev["node"])
    failed = edge.get("status") == "failed"
    outcome = G.add_result(g, parent, child, strategy=strategy, edge=edge, node=node, failed=failed)
    reward = ev.get("reward")
    if reward is not None:
        stays = outcome in ("noop", "error")
        path = list(ev["path"]) + ([child] if not stays and child not in ev["path"] else [])
        G.backup(g, path, float(reward))


def apply_completed(g: nx.DiGraph, ev: Mapping[str, Any], usage: Usage) -> None:
    """Apply one ``completed`` event: the partial node's whole run (``graph.complete``) and its
    test runs."""
    usage.test_runs += int(ev.get("test_runs", 0))
    usage.cache_hits += int(ev.get("cache_hits", 0))
    usage.tokens += int(ev.get("tokens", 0))  # a value judge's (scoring.judge)
    if "elapsed" in ev:
        usage.wall_seconds = float(ev["elapsed"])
    G.complete(
        g, ev["node"], score=float(ev["score"]), tests=dict(ev["tests"]), path=ev.get("path") or ()
    )
