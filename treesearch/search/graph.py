"""The search graph: a networkx ``DiGraph`` whose node key is the workspace's tree hash.

Two branches that reach the same files meet in one node (a transposition). A strategy run that
changes nothing, or that returns to one of its own ancestors, adds no node and no cycle: it is kept
in the parent's ``noops`` list, or in its ``errors`` list when the agent failed (an agent error is
its own outcome, never a silent no-op). Node attributes (see ``NODE_FIELDS``) are plain JSON values, so the
graph round-trips through ``networkx.node_link_data``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import networkx as nx

NODE_FIELDS = (
    "score",  # float in [0, 1] (None while unscored)
    "tests",  # summary of the test run: {"passed": n, "failed": n, ..., "failing": [ids]}
    "visits",  # times a backup went through this node
    "value_sum",  # sum of rewards backed up through it
    "depth",  # shortest distance from the root
    "order",  # 0-based order in which the node was found
    "commit",  # store commit of the snapshot (the same in two runs from the same store state)
    "tried",  # {strategy: attempts started from this node}
    "noops",  # expansions from here that changed nothing or came back to an ancestor
    "errors",  # expansions from here whose agent failed and left no new state (with the reason)
    "diff_size",  # changed lines from the root (tie-breaker for the final answer)
    "partial",  # only on nodes scored by a failing-first screen alone (scoring.order): True
    "bound",  # only on partial nodes: the score if every test not run passed (what ranks them)
    "backed",  # only on partial nodes: what MCTS backed up for it (partial_estimate)
    "priors",  # {strategy: [prior of attempt 0, 1, ...]} when its agent gave them (prior())
)
VOLATILE_NODE = ("commit",)
VOLATILE_EDGE = ("seconds",)


def new_graph(
    root: str, *, commit: str | None, score: float | None, tests: dict[str, Any]
) -> nx.DiGraph:
    g = nx.DiGraph(root=root)
    g.add_node(
        root,
        score=score,
        tests=tests,
        visits=0,
        value_sum=0.0,
        depth=0,
        order=0,
        commit=commit,
        tried={},
        noops=[],
        errors=[],
        diff_size=0,
    )
    return g


def root_of(g: nx.DiGraph) -> str:
    return str(g.graph["root"])


def is_ancestor(g: nx.DiGraph, node: str, of: str) -> bool:
    """True when ``node`` is ``of`` or one of its ancestors."""
    return node == of or node in nx.ancestors(g, of)


def add_result(
    g: nx.DiGraph,
    parent: str,
    child: str,
    *,
    strategy: str,
    edge: dict[str, Any],
    node: dict[str, Any] | None,
    failed: bool = False,
) -> str:
    """Record one expansion of ``parent`` that produced state ``child``.

    Returns ``"error"`` (the agent failed, ``failed``, and left no new state: no node, no edge;
    kept in the parent's ``errors`` list with the edge's ``reason``), ``"noop"`` (nothing
    changed, or back to an ancestor: no node, no edge), ``"new"``
    (a node was added; ``node`` holds its attributes), or ``"transposition"`` (the state was
    already known: only an edge is added, the node keeps its score).
    """
    if is_ancestor(g, child, parent):
        if failed:
            g.nodes[parent].setdefault("errors", []).append(
                {"strategy": strategy, "to": child, **edge}
            )
            return "error"
        g.nodes[parent]["noops"].append({"strategy": strategy, "to": child, **edge})
        return "noop"
    if child in g:
        if g.has_edge(parent, child):
            # Another strategy already led here from this parent (DiGraph: one edge per pair).
            g.edges[parent, child].setdefault("also", []).append({"strategy": strategy, **edge})
        else:
            g.add_edge(parent, child, strategy=strategy, **edge)
            g.nodes[child]["depth"] = min(g.nodes[child]["depth"], g.nodes[parent]["depth"] + 1)
        return "transposition"
    if node is None:
        raise ValueError("a new state needs its node attributes")
    attrs = {
        "visits": 0,
        "value_sum": 0.0,
        "depth": g.nodes[parent]["depth"] + 1,
        "order": g.number_of_nodes(),
        "tried": {},
        "noops": [],
        "errors": [],
        **node,
    }
    g.add_node(child, **attrs)
    g.add_edge(parent, child, strategy=strategy, **edge)
    return "new"


def backup(g: nx.DiGraph, path: Iterable[str], reward: float) -> None:
    """Add one visit and ``reward`` to every node of ``path`` (root first)."""
    for n in path:
        g.nodes[n]["visits"] += 1
        g.nodes[n]["value_sum"] += reward


def path_to(g: nx.DiGraph, node: str) -> list[str]:
    """The shortest path from the root to ``node`` (ties broken by earlier-found nodes)."""
    root = root_of(g)
    if node == root:
        return [root]
    best: list[str] = [node]
    cur = node
    while cur != root:
        cur = first_parent(g, cur)
        best.append(cur)
    return best[::-1]


def first_parent(g: nx.DiGraph, node: str) -> str:
    """The parent ``path_to`` goes through: the shallowest predecessor, then the earlier found
    (deterministic). Not for the root, which has none."""
    return min(g.predecessors(node), key=lambda p: (g.nodes[p]["depth"], g.nodes[p]["order"]))


PRIOR_FLOOR = 1e-6
"""The prior of an attempt past the end of the list its agent gave (it may still be tried)."""


def prior(g: nx.DiGraph, n: str, strategy: str, attempt: int) -> float | None:
    """The prior of attempt ``attempt`` of ``strategy`` on node ``n``: from the list its agent
    gave for ``n`` (``AgentResult.priors``), or, before ``n`` was expanded with it, from the
    nearest node up its first-parent path that has one (a child's edits are mostly its
    parent's). ``None``: the strategy gives no priors."""
    root = root_of(g)
    cur = n
    while True:
        got = g.nodes[cur].get("priors", {}).get(strategy)
        if got is not None:
            return float(got[attempt]) if attempt < len(got) else PRIOR_FLOOR
        if cur == root or not g.in_degree(cur):
            return None
        cur = first_parent(g, cur)


def is_partial(g: nx.DiGraph, n: str) -> bool:
    """True for a node whose tests ran only in part (a failing-first screen that did not pass):
    its score is a lower bound, and it is never the final answer."""
    return bool(g.nodes[n].get("partial"))


def value(g: nx.DiGraph, n: str) -> float:
    """What the policies believe a node is worth: its score; for a partial node, the most it
    can turn out to score (its ``bound``: every test the screen left out passing), so a screen
    saves test runs without changing which state the search prefers (a policy that chooses a
    partial node has the controller complete its run first). -1 while unscored."""
    d = g.nodes[n]
    s = d.get("bound") if d.get("partial") and d.get("bound") is not None else d.get("score")
    return -1.0 if s is None else float(s)


def rank(g: nx.DiGraph, n: str) -> tuple[float, int]:
    """Sort key of a node for the policies, best first: the higher ``value``, then a fully-run
    node before a partial one of the same value (known beats hoped for)."""
    return (-value(g, n), 1 if is_partial(g, n) else 0)


def partial_estimate(lower: float, bound: float | None, parent: float | None) -> float:
    """What a partial node is worth until its run completes, for the values MCTS backs up: its
    known score (the tests the screen ran, which its parent failed) plus its parent's score for
    the tests it did not run (those its parent passed, taken as passing still), at most its
    bound. A screen that stopped at a test the parent failed too so counts as the parent's
    value, as a full run of such a state mostly does, neither as if every test not run failed
    (which pulls a subtree's mean to 0 at every screen) nor as if all of them passed (which
    keeps a trapped subtree's mean at its bound)."""
    estimate = lower + float(parent or 0.0)
    return min(estimate, bound) if bound is not None else estimate


def complete(
    g: nx.DiGraph, node: str, *, score: float, tests: dict[str, Any], path: Iterable[str]
) -> None:
    """A partial node's whole run came in (the ``completed`` event): it takes the run's score
    and test summary, and the nodes of ``path`` (the root-first path its expansion backed its
    value up along) take the difference between what was backed up (``backed``: its
    ``partial_estimate``; the lower bound in logs written before that) and the score."""
    d = g.nodes[node]
    backed = float(d.get("backed", d.get("score")) or 0.0)
    d["score"] = score
    d["tests"] = tests
    d.pop("partial", None)
    d.pop("bound", None)
    d.pop("backed", None)
    delta = float(score) - backed
    if delta:
        for n in path:
            if n in g and g.nodes[n]["visits"]:
                g.nodes[n]["value_sum"] += delta


def best_node(g: nx.DiGraph) -> str:
    """The final answer: the highest-scoring fully-run node; ties go to the smaller diff from
    the root, then the earlier find. Partial nodes (``is_partial``) never are."""
    scored = [
        n for n, d in g.nodes(data=True) if d.get("score") is not None and not d.get("partial")
    ]
    if not scored:
        return root_of(g)
    return min(
        scored,
        key=lambda n: (-g.nodes[n]["score"], g.nodes[n].get("diff_size", 0), g.nodes[n]["order"]),
    )


def to_json(g: nx.DiGraph, *, stable: bool = False) -> str:
    """node-link JSON. The same seed and deterministic agents give the same bytes (a search's
    snapshots have fixed dates; timings are kept in ``timings.jsonl``, not in the graph). With
    ``stable`` the commit ids (and the ``seconds`` of graphs recorded before that) are left out:
    bytes then also agree between runs whose stores held different snapshots before."""
    data = nx.node_link_data(g, edges="edges")
    if stable:
        for n in data["nodes"]:
            for k in VOLATILE_NODE:
                n.pop(k, None)
            for noop in n.get("noops", []) + n.get("errors", []):
                for k in VOLATILE_EDGE:
                    noop.pop(k, None)
        for e in data["edges"]:
            for k in VOLATILE_EDGE:
                e.pop(k, None)
            for also in e.get("also", []):
                for k in VOLATILE_EDGE:
                    also.pop(k, None)
    data["nodes"].sort(key=lambda n: n["order"])
    data["edges"].sort(key=lambda e: (e["source"], e["target"]))
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def expansions(g: nx.DiGraph) -> list[dict[str, Any]]:
    """Every recorded expansion's edge attributes (new, transposition, no-op and error), each
    with ``strategy``, ``status`` and ``reason``."""
    out: list[dict[str, Any]] = []
    for _, d in g.nodes(data=True):
        out.extend(d.get("noops", []))
        out.extend(d.get("errors", []))
    for _, _, d in g.edges(data=True):
        out.append(d)
        out.extend(d.get("also", []))
    return out


def from_json(text: str) -> nx.DiGraph:
    data = json.loads(text)
    return nx.node_link_graph(data, directed=True, edges="edges")
