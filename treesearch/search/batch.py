"""Choosing expansions for parallel workers: pure functions, no I/O.

A parallel search chooses up to W expansions ahead (``parallel.run_window``: W is
``parallel.WINDOW`` per worker).
Expansion ``k`` is chosen right after the result of expansion ``k - W`` was recorded, on a view
of the graph in which the expansions chosen and not recorded yet (``k - W + 1 .. k - 1``) are
marked as pending: their attempt counted as started (so no (node, strategy, attempt) is chosen
twice) and a virtual loss on their path (one visit with reward 0, so UCT spreads over the tree
instead of piling onto one branch). Which results are recorded and which are pending when ``k``
is chosen depends on ``k`` alone, never on which worker finished first: the same seed and the
same number of workers give the same graph. The graph itself is never changed. Expansion ``k``
uses the RNG of ``(seed, k)``, as a sequential search does.

``share_test_runs`` gives each expansion its share of the test runs left of the budget, so that
however its agent calls ``run_tests``, the expansions in flight never spend more than is left.
"""

from __future__ import annotations

import random
from collections.abc import Container, Iterable, Mapping, Sequence
from typing import Any

import networkx as nx

from treesearch.search.policies import Choice, Policy

__all__ = [
    "dispatch_event",
    "dispatched",
    "next_to_send",
    "pending_view",
    "select_batch",
    "select_one",
    "share_test_runs",
]


def pending_view(
    g: nx.DiGraph, pending: Sequence[Choice], independent: Container[str] | None = None
) -> nx.DiGraph:
    """A copy of ``g`` with ``pending`` marked as started (see the module's text). With
    ``independent`` given, a pending attempt of a strategy not in it (``agents.
    attempts_independent``) also holds its (node, strategy) pair: the node's ``held`` names it,
    and no policy chooses another attempt of it until it is recorded (``policies._untried``).
    Such an attempt would wait for the pending one anyway (``next_to_send``), keeping a worker
    idle; the choice goes elsewhere meanwhile."""
    view = g.copy()  # fresh attribute dicts per node; nested values copied where changed
    for c in pending:
        d = view.nodes[c.node]
        d["tried"] = {**d["tried"], c.strategy: d["tried"].get(c.strategy, 0) + 1}
        if independent is not None and c.strategy not in independent:
            d["held"] = (*d.get("held", ()), c.strategy)
        for n in c.path:
            view.nodes[n]["visits"] = view.nodes[n]["visits"] + 1
    return view


def select_one(
    policy: Policy,
    g: nx.DiGraph,
    pending: Sequence[Choice],
    *,
    seed: int,
    k: int,
    strategies: Mapping[str, int],
    max_depth: int | None,
    independent: Container[str] | None = None,
) -> Choice | None:
    """The choice for expansion ``k`` while ``pending`` are in flight (``None``: nothing);
    ``independent``: see ``pending_view``."""
    view = pending_view(g, pending, independent) if pending else g
    rng = random.Random(f"{seed}:{k}")
    return policy(view, rng, strategies=strategies, max_depth=max_depth)


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
    """Up to ``n`` choices for expansions ``k0, k0 + 1, ...`` made before any of them is
    recorded (fewer when the policy has nothing more to offer)."""
    out: list[Choice] = []
    for j in range(n):
        c = select_one(
            policy, g, out, seed=seed, k=k0 + j, strategies=strategies, max_depth=max_depth
        )
        if c is None:
            break
        out.append(c)
    return out


def share_test_runs(left: int | None, free_slots: int) -> int | None:
    """The test runs one more expansion may spend (its agent's ``run_tests`` calls and the
    scoring of its state together) when ``left`` are neither spent nor promised to expansions
    in flight and ``free_slots`` more expansions may be chosen; ``None``: no limit. Never more than
    ``left``, so the shares in flight add up to at most what the budget has left; 0: wait."""
    if left is None:
        return None
    if left < 1:
        return 0
    return max(1, left // max(free_slots, 1))


def next_to_send(
    queued: Sequence[int],
    unfinished: Mapping[int, Choice],
    independent: Container[str] = frozenset(),
) -> int | None:
    """The first of ``queued`` (expansions chosen and not sent yet, in the order chosen) that may
    go to an idle worker now; ``None``: none may.

    ``unfinished`` holds every expansion chosen whose worker has not answered yet (queued or in
    flight). An expansion waits while an earlier one of the same node and strategy (another
    attempt of a sampled strategy) is unfinished: an agent may keep state per node in its cache
    folder (the mutation agent's log of the programs a node already produced, its fault
    localisation), and two attempts run at once would each see or miss the other's by timing.
    One after the other, attempt ``a + 1`` sees what attempt ``a`` left, whichever worker runs
    it, and pays no second localisation. Others are sent meanwhile, so a worker waits only when
    every expansion left to send is such a later attempt. Strategies in ``independent``
    (``agents.attempts_independent``: the agent chooses by node and attempt number alone) do
    not wait."""
    for k in queued:
        c = unfinished[k]
        if c.strategy in independent or not any(
            j < k and u.node == c.node and u.strategy == c.strategy for j, u in unfinished.items()
        ):
            return k
    return None


def dispatch_event(k: int, choice: Choice, test_runs: int | None) -> dict[str, Any]:
    """The ``dispatch`` event recorded when expansion ``k`` is chosen for a worker: a search
    killed before its result was recorded chooses the same expansion again when resumed."""
    return {
        "event": "dispatch",
        "k": k,
        "node": choice.node,
        "strategy": choice.strategy,
        "attempt": choice.attempt,
        "path": list(choice.path),
        "test_runs": test_runs,
    }


def dispatched(events: Iterable[Mapping[str, Any]]) -> dict[int, tuple[Choice, int | None]]:
    """Expansions chosen for workers whose result is not on record (by ``k``: the choice and
    its share of the test runs); the latest ``dispatch`` event of each ``k`` counts."""
    sent: dict[int, tuple[Choice, int | None]] = {}
    recorded = 0
    for ev in events:
        if ev.get("event") == "dispatch":
            c = Choice(ev["node"], ev["strategy"], int(ev["attempt"]), tuple(ev["path"]))
            sent[int(ev["k"])] = (c, ev.get("test_runs"))
        elif ev.get("event") == "expansion":
            was = sent.get(int(ev.get("k", -1)))
            did = (ev.get("parent"), ev.get("strategy"), ev.get("attempt"))
            if was is None or (was[0].node, was[0].strategy, was[0].attempt) != did:
                sent.clear()  # not what was chosen (a sequential search): the rest is void
            recorded += 1
    return {k: v for k, v in sorted(sent.items()) if k >= recorded}
