"""Selection policies: pure functions of the graph's statistics and a seeded RNG.

Each policy answers one question: which (node, strategy) pair to expand next, or ``None`` when
nothing is left. ``select(graph, rng, *, strategies, max_depth, ...)``; beam and UCT are
parameterisations (keyword-only hyper-parameters), not subclasses. A strategy may be applied to the
same node up to its ``samples`` times (sampled strategies, e.g. seeded mutations); enumerated
strategies have ``samples == 1``. A pair whose agent said, on a no-op, that nothing is left
to try (the no-op's ``exhausted`` flag, e.g. a mutation agent that has tried every edit of the
node) counts as tried ``samples`` times: no policy chooses it again.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import networkx as nx

from treesearch.search.graph import (
    PRIOR_FLOOR,
    first_parent,
    is_partial,
    path_to,
    prior,
    rank,
    root_of,
    value,
)


@dataclass(frozen=True)
class Choice:
    """The next expansion: apply ``strategy`` (attempt number ``attempt``) to ``node``."""

    node: str
    strategy: str
    attempt: int
    path: tuple[str, ...]
    """Root-first path the value is backed up along (the selection path for MCTS)."""


Policy = Callable[..., "Choice | None"]

PATIENCE: int | None = None
"""``best_first``'s default patience (``search.params.patience``): off. Measured with the
mutation agent (ranked, 200 samples, screening on, 100 test runs), patience 3 fixes 28 of
refactory's 60 bugs at 30 test runs and 32 at 100 (26 and 31 without) and experiments/bugs 20
of 20 (19) in half the test runs, with no more plausible-but-wrong patches; but it counts every
attempt, no-ops included, and the demo (five enumerated scripted strategies and the mutation
agent) stops at 0.9 with it: a repair config of one sampled agent turns it on (issue #29)."""


def _untried(
    g: nx.DiGraph, node: str, strategies: Mapping[str, int], max_depth: int | None
) -> list[str]:
    d = g.nodes[node]
    if max_depth is not None and d["depth"] >= max_depth:
        return []
    tried = d["tried"]
    done = {x["strategy"] for x in d.get("noops", ()) if x.get("exhausted")}
    done.update(d.get("held", ()))  # an attempt in flight must answer first (batch.pending_view)
    return [s for s, samples in strategies.items() if tried.get(s, 0) < samples and s not in done]


def _choice(g: nx.DiGraph, node: str, strategy: str, path: Sequence[str] | None = None) -> Choice:
    return Choice(
        node,
        strategy,
        g.nodes[node]["tried"].get(strategy, 0),
        tuple(path) if path is not None else tuple(path_to(g, node)),
    )


def _pairs(
    g: nx.DiGraph,
    strategies: Mapping[str, int],
    max_depth: int | None,
) -> list[tuple[str, str]]:
    nodes = sorted(g.nodes, key=lambda n: g.nodes[n]["order"])
    return [(n, s) for n in nodes for s in _untried(g, n, strategies, max_depth)]


def _score(g: nx.DiGraph, n: str) -> float:
    s = g.nodes[n].get("score")
    return -1.0 if s is None else float(s)


def _first_by(
    g: nx.DiGraph,
    strategies: Mapping[str, int],
    max_depth: int | None,
    rank: Callable[[str], tuple[float | bool, ...]],
) -> Choice | None:
    """The (node, untried strategy) pair whose node ranks lowest; strategies in config order."""
    pairs = _pairs(g, strategies, max_depth)
    if not pairs:
        return None
    n, s = min(pairs, key=lambda p: rank(p[0]))
    return _choice(g, n, s)


def bfs(
    g: nx.DiGraph,
    rng: random.Random,
    *,
    strategies: Mapping[str, int],
    max_depth: int | None = None,
) -> Choice | None:
    """Breadth-first: shallowest node first, then the earlier found; strategies in config order."""
    return _first_by(g, strategies, max_depth, lambda n: (g.nodes[n]["depth"], g.nodes[n]["order"]))


def _spanning_tree(g: nx.DiGraph) -> tuple[dict[str, list[str]], list[str]]:
    """The tree of first parents (``first_parent``, as ``path_to`` walks it): each node's
    children, and the nodes the root reaches in post-order (children before their parent)."""
    root = root_of(g)
    tree = nx.DiGraph()
    tree.add_nodes_from(g.nodes)
    tree.add_edges_from((first_parent(g, n), n) for n in g.nodes if n != root and g.in_degree(n))
    kids = {n: list(tree.successors(n)) for n in tree.nodes}
    return kids, list(nx.dfs_postorder_nodes(tree, root))


def stale_nodes(g: nx.DiGraph, patience: float | None) -> frozenset[str]:
    """The subtrees a patient policy moves on from: a node (never the root) under which
    ``patience`` expansions or more were spent (its own attempts and every attempt below it,
    no-ops included) while nothing below it outside such a subtree scores better than it, and
    every node below such a node. ``None`` or 0: none."""
    if not patience:
        return frozenset()
    root = root_of(g)
    kids, post = _spanning_tree(g)
    spent = {n: sum(g.nodes[n]["tried"].values()) for n in post}
    live = dict.fromkeys(post, -math.inf)  # the best score below a node, tired subtrees aside
    tired: set[str] = set()
    for n in post:
        for k in kids[n]:
            spent[n] += spent[k]
            if k not in tired:
                live[n] = max(live[n], live[k], _score(g, k))
        if n != root and spent[n] >= patience and live[n] <= _score(g, n):
            tired.add(n)
    stale: set[str] = set()
    for n in reversed(post):  # parents first
        if n in tired or n in stale:
            stale.add(n)
            stale.update(kids[n])
    return frozenset(stale)


def best_first(
    g: nx.DiGraph,
    rng: random.Random,
    *,
    strategies: Mapping[str, int],
    max_depth: int | None = None,
    patience: float | None = PATIENCE,
    priors: float | None = None,
) -> Choice | None:
    """Greedy: the highest-scoring node with something left to try (ties: a fully-run node before
    a partial one, then the earlier found). With ``patience`` k (default ``PATIENCE``: off),
    a node under which k expansions found nothing better than it (``stale_nodes``) and
    everything below it come after every other node: a wrong partial fix does not keep the
    budget.

    With ``priors`` k (> 0), best-first runs over (node, next attempt) pairs instead, each worth
    the log of how likely the edits that lead there and the attempt's own edit are (their
    priors, ``graph.prior``; 1 for a strategy without priors) plus ``k`` times what the tests
    say of the node: ``k * value(node) + sum(ln prior(edge) on its path) + ln prior(attempt)``,
    a posterior where each edit's prior is weighed by how much it moved the score. An edit
    that gains nothing costs its prior: the root's third-ranked edit wins over the fortieth
    edit under a wrong partial fix, while a fix's first half that passes more tests has its
    own best edits tried before the root's long tail."""
    stale = stale_nodes(g, patience)
    if not priors:
        return _first_by(
            g, strategies, max_depth, lambda n: (n in stale, *rank(g, n), g.nodes[n]["order"])
        )
    pairs = _pairs(g, strategies, max_depth)
    if not pairs:
        return None
    weight = float(priors)
    names = list(strategies)
    paths: dict[str, float] = {}

    def key(pair: tuple[str, str]) -> tuple[bool, float, int, int, int]:
        n, s = pair
        p = prior(g, n, s, g.nodes[n]["tried"].get(s, 0))
        worth = weight * value(g, n) + path_prior(g, n, paths) + _ln(p)
        return (n in stale, -round(worth, 9), int(is_partial(g, n)), g.nodes[n]["order"],
                names.index(s))  # fmt: skip

    n, s = min(pairs, key=key)
    return _choice(g, n, s)


def _ln(p: float | None) -> float:
    return math.log(max(p if p is not None else 1.0, PRIOR_FLOOR))


def path_prior(g: nx.DiGraph, n: str, memo: dict[str, float] | None = None) -> float:
    """The log prior of the edits that lead from the root to ``n`` along its first-parent path
    (``graph.path_to``): the sum of ``ln prior`` of each edge's attempt (0 for edges of
    strategies without priors)."""
    memo = {} if memo is None else memo
    if n in memo:
        return memo[n]
    if n == root_of(g) or not g.in_degree(n):
        memo[n] = 0.0
        return 0.0
    up = first_parent(g, n)
    e = g.edges[up, n]
    out = path_prior(g, up, memo) + _ln(prior(g, up, str(e["strategy"]), int(e.get("attempt", 0))))
    memo[n] = out
    return out


def beam(
    g: nx.DiGraph,
    rng: random.Random,
    *,
    strategies: Mapping[str, int],
    max_depth: int | None = None,
    width: int = 2,
) -> Choice | None:
    """Beam search: layer by layer, expand only the ``width`` best nodes of each depth."""
    root = root_of(g)
    layer = [root]
    while layer:
        ranked = sorted(layer, key=lambda n: (*rank(g, n), g.nodes[n]["order"]))[: int(width)]
        for n in ranked:
            untried = _untried(g, n, strategies, max_depth)
            if untried:
                return _choice(g, n, untried[0])
        nxt = {
            c
            for n in ranked
            for c in g.successors(n)
            if g.nodes[c]["depth"] == g.nodes[n]["depth"] + 1
        }
        layer = sorted(nxt, key=lambda n: g.nodes[n]["order"])
    return None


def random_policy(
    g: nx.DiGraph,
    rng: random.Random,
    *,
    strategies: Mapping[str, int],
    max_depth: int | None = None,
) -> Choice | None:
    """Uniformly random over every (node, untried strategy) pair: the baseline."""
    pairs = _pairs(g, strategies, max_depth)
    if not pairs:
        return None
    n, s = pairs[rng.randrange(len(pairs))]
    return _choice(g, n, s)


def mcts(
    g: nx.DiGraph,
    rng: random.Random,
    *,
    strategies: Mapping[str, int],
    max_depth: int | None = None,
    c: float = 1.4,
    pw_k: float = 1.0,
    pw_alpha: float = 0.5,
) -> Choice | None:
    """UCT from the root, reward = score in [0, 1].

    A node is expanded while it has untried strategies and, for sampled strategies (``samples >
    1``), while progressive widening allows another child: ``attempts < ceil(pw_k *
    visits**pw_alpha)``. Otherwise descend to the child maximising ``Q + c*sqrt(ln N / n)``.
    """
    sampled = any(v > 1 for v in strategies.values())
    is_exhausted = _exhaustion(g, strategies, max_depth)
    node = root_of(g)
    path = [node]
    while True:
        d = g.nodes[node]
        untried = _untried(g, node, strategies, max_depth)
        attempts = sum(d["tried"].values())
        allowed = math.ceil(pw_k * max(d["visits"], 1) ** pw_alpha) if sampled else math.inf
        kids = [
            k for k in g.successors(node) if k not in path and not is_exhausted(k, frozenset(path))
        ]
        if untried and (attempts < allowed or not kids):
            # Least-tried first, config order among equals: sampled strategies spread out.
            s = min(untried, key=lambda s: (d["tried"].get(s, 0), list(strategies).index(s)))
            return _choice(g, node, s, path)
        if not kids:
            return None if node == root_of(g) else _restart(g, rng, strategies, max_depth)
        parent_visits = max(d["visits"], 1)

        def uct(k: str, parent_visits: int = parent_visits) -> tuple[float, int]:
            kd = g.nodes[k]
            if kd["visits"] == 0:
                return (math.inf, -kd["order"])
            q = kd["value_sum"] / kd["visits"]
            return (q + c * math.sqrt(math.log(parent_visits) / kd["visits"]), -kd["order"])

        node = max(sorted(kids, key=lambda k: g.nodes[k]["order"]), key=uct)
        path.append(node)


def _exhaustion(
    g: nx.DiGraph, strategies: Mapping[str, int], max_depth: int | None
) -> Callable[[str, frozenset[str]], bool]:
    """``is_exhausted(node, seen)``: nothing is left to try at ``node`` or below it (``seen``:
    the nodes of the walk so far, so a transposition cannot loop), memoised for one choice."""
    exhausted: dict[str, bool] = {}

    def is_exhausted(n: str, seen: frozenset[str]) -> bool:
        if n in exhausted:
            return exhausted[n]
        if _untried(g, n, strategies, max_depth):
            exhausted[n] = False
            return False
        kids = [k for k in g.successors(n) if k not in seen]
        result = all(is_exhausted(k, seen | {n}) for k in kids)
        exhausted[n] = result
        return result

    return is_exhausted


def puct(
    g: nx.DiGraph,
    rng: random.Random,
    *,
    strategies: Mapping[str, int],
    max_depth: int | None = None,
    c: float = 4.0,
) -> Choice | None:
    """MCTS with priors (PUCT, as AlphaZero and mctx select): from the root, take the option
    that maximises ``Q + c * P * sqrt(N) / (1 + n)``, where the options of a node are its
    children (``Q`` the mean reward backed up through the child, ``n`` its visits, ``P`` the
    prior of the attempt that made it) and the next untried attempt of each strategy (``Q``
    the node's own value, ``n`` 0, ``P`` its prior, ``graph.prior``); ``N`` is the node's
    visits. An untried attempt chosen is the expansion; a child chosen is walked into. A
    strategy without priors has ``P = 1 / len(strategies)``. Ties: the earlier found child,
    then untried attempts in config order. ``c`` 4 (the default) fixed the gcd and ``or``/``and``
    traps within 30 test runs where 1 did not, and 27 of refactory's 60 bugs at 30 runs."""
    is_exhausted = _exhaustion(g, strategies, max_depth)
    uniform = 1.0 / max(len(strategies), 1)
    names = list(strategies)
    node = root_of(g)
    path = [node]
    while True:
        d = g.nodes[node]
        here = value(g, node)
        scale = c * math.sqrt(max(d["visits"], 1))
        best: tuple[float, int, str, bool] | None = None
        for s in _untried(g, node, strategies, max_depth):
            p = prior(g, node, s, d["tried"].get(s, 0))
            u = here + scale * (uniform if p is None else p)
            option = (round(u, 9), -1 - names.index(s), s, True)
            best = option if best is None or option[:2] > best[:2] else best
        for k in g.successors(node):
            if k in path or is_exhausted(k, frozenset(path)):
                continue
            kd, e = g.nodes[k], g.edges[node, k]
            p = prior(g, node, str(e["strategy"]), int(e.get("attempt", 0)))
            q = kd["value_sum"] / kd["visits"] if kd["visits"] else value(g, k)
            u = q + scale * (uniform if p is None else p) / (1 + kd["visits"])
            option = (round(u, 9), -len(names) - 1 - kd["order"], k, False)
            best = option if best is None or option[:2] > best[:2] else best
        if best is None:
            return None if node == root_of(g) else _restart(g, rng, strategies, max_depth)
        if best[3]:
            return _choice(g, node, best[2], path)
        node = best[2]
        path.append(node)


def _restart(
    g: nx.DiGraph, rng: random.Random, strategies: Mapping[str, int], max_depth: int | None
) -> Choice | None:
    # The UCT walk ended in an exhausted corner (possible through transpositions): fall back to
    # the best node that still has something to try, so the budget is not wasted.
    return best_first(g, rng, strategies=strategies, max_depth=max_depth)


POLICIES: dict[str, Policy] = {
    "bfs": bfs,
    "best_first": best_first,
    "beam": beam,
    "mcts": mcts,
    "puct": puct,
    "random": random_policy,
}
SCREENED_BY_DEFAULT = frozenset({"bfs", "best_first", "beam", "puct"})
"""Policies under which ``scoring.order: auto`` screens a repair search's candidates
(``progress_first``). They rank nodes by score (or by a prior and a score), so they seldom build
on a node a screen left partial, and a screen costs no test run more than ``order: all``
(measured on refactory and experiments/bugs: the same fixes at 30 test runs). ``mcts`` and
``random`` build on such nodes more often, each time after a run of its whole suite (a
``completed`` run that ``order: all`` does not make): with screens they find as many fixes at
30 test runs but spend more runs to the first (refactory: 7.6 against 6.9 under MCTS, and 20
fixes against 22 within 10 runs), so ``auto`` runs every test for them. An explicit ``order``
applies to every policy."""
