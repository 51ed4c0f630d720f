"""Choosing a batch of expansions for parallel workers: pure functions, no I/O.

``select_batch`` asks the policy ``n`` times, each time on a view of the graph in which the
choices already made are marked as pending: their attempt counted as started (so no
(node, strategy, attempt) is chosen twice) and a virtual loss on their path (one visit with
reward 0, so UCT spreads a batch over the tree instead of piling it on one branch). The graph
itself is never changed. Expansion ``k`` of a batch uses the RNG of ``(seed, k)``, as a
sequential search does.

``share_test_runs`` splits the test runs left of the budget over a batch, so that however the
agents of a batch call ``run_tests``, the batch never spends more than is left.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any

import networkx as nx

from treesearch.search.budget import Budget, Usage
from treesearch.search.policies import Choice, Policy

__all__ = ["batch_event", "batch_size", "pending_batch", "select_batch", "share_test_runs"]


def pending_view(g: nx.DiGraph, choices: list[Choice]) -> nx.DiGraph:
    """A copy of ``g`` with ``choices`` marked as started (see the module's text)."""
    view = g.copy()  # fresh attribute dicts per node; nested values copied where changed
    for c in choices:
        d = view.nodes[c.node]
        d["tried"] = {**d["tried"], c.strategy: d["tried"].get(c.strategy, 0) + 1}
        for n in c.path:
            view.nodes[n]["visits"] = view.nodes[n]["visits"] + 1
    return view


def select_batch(
    policy: Policy,
    g: nx.DiGraph,
    *,
    seed: int,
    k0: int,
    n: int,
    strategies: Mapping[str, int],
    max_depth: int | None,
) -> list[Choice]:
    """Up to ``n`` distinct choices for expansions ``k0, k0 + 1, ...`` (fewer when the policy
    has nothing more to offer)."""
    out: list[Choice] = []
    view = g
    for j in range(n):
        rng = random.Random(f"{seed}:{k0 + j}")
        choice = policy(view, rng, strategies=strategies, max_depth=max_depth)
        if choice is None:
            break
        out.append(choice)
        view = pending_view(g, out)
    return out


def batch_size(workers: int, budget: Budget, usage: Usage) -> int:
    """How many expansions the next batch may hold: at most ``workers``, never more than the
    expansions left, and no more than the test runs left (each expansion may need one to score
    its state)."""
    n = workers
    if budget.expansions is not None:
        n = min(n, budget.expansions - usage.expansions)
    if budget.test_runs is not None:
        n = min(n, budget.test_runs - usage.test_runs)
    return max(n, 0)


def share_test_runs(budget: Budget, usage: Usage, n: int) -> list[int | None]:
    """Test runs each of ``n`` expansions may spend (its agent's ``run_tests`` calls and the
    scoring of its state together); ``None``: no limit. The shares add up to what is left."""
    if budget.test_runs is None:
        return [None] * n
    left = max(budget.test_runs - usage.test_runs, 0)
    return [left // n + (1 if j < left % n else 0) for j in range(n)]


def batch_event(k0: int, choices: list[Choice]) -> dict[str, Any]:
    """The ``batch`` event recorded before a batch is sent to the workers: a search killed
    while its results were being recorded resumes with the rest of the same batch."""
    return {
        "event": "batch",
        "k": k0,
        "choices": [
            {"node": c.node, "strategy": c.strategy, "attempt": c.attempt, "path": list(c.path)}
            for c in choices
        ],
    }


def pending_batch(events: Iterable[Mapping[str, Any]]) -> list[Choice]:
    """The choices of the last ``batch`` event that have no ``expansion`` event yet."""
    last: Mapping[str, Any] | None = None
    done = 0
    for ev in events:
        if ev.get("event") == "batch":
            last, done = ev, 0
        elif ev.get("event") == "expansion" and last is not None and ev["k"] >= last["k"]:
            done += 1
    if last is None:
        return []
    return [
        Choice(c["node"], c["strategy"], int(c["attempt"]), tuple(c["path"]))
        for c in list(last["choices"])[done:]
    ]
