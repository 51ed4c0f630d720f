"""Every selection policy as a pure function of a hand-built graph and a seeded RNG (no git)."""

from __future__ import annotations

import functools
import inspect
import math
import random
from typing import Any

import networkx as nx
import pytest

from treesearch.search import graph as G
from treesearch.search.params import POLICY_PARAMS, make_policy
from treesearch.search.policies import (
    POLICIES,
    beam,
    best_first,
    bfs,
    mcts,
    path_prior,
    puct,
    random_policy,
)

TWO = {"a": 1, "b": 1}


def tree(*nodes: tuple[str, str, str, float]) -> nx.DiGraph:
    """Root ``r`` (score 0) plus ``(parent, strategy, child, score)`` expansions, in order; each
    new child's score is backed up along its path, as the controller does."""
    g = G.new_graph("r", commit=None, score=0.0, tests={})
    G.backup(g, ["r"], 0.0)
    for parent, strategy, child, score in nodes:
        g.nodes[parent]["tried"][strategy] = g.nodes[parent]["tried"].get(strategy, 0) + 1
        G.add_result(g, parent, child, strategy=strategy, edge={}, node={"score": score})
        G.backup(g, G.path_to(g, child), score)
    return g


def pick(policy: Any, g: nx.DiGraph, strategies: dict[str, int] = TWO, **kw: Any) -> Any:
    return policy(g, random.Random(0), strategies=strategies, **kw)


def test_bfs_tries_every_strategy_on_the_root_before_going_deeper() -> None:
    g = tree(("r", "a", "x", 0.9))
    choice = pick(bfs, g)
    assert (choice.node, choice.strategy, choice.attempt, choice.path) == ("r", "b", 0, ("r",))


def test_bfs_takes_the_shallowest_then_earliest_found_node() -> None:
    g = tree(("r", "a", "x", 0.1), ("r", "b", "y", 0.9))
    assert (pick(bfs, g).node, pick(bfs, g).strategy) == ("x", "a")


def test_bfs_returns_none_when_max_depth_leaves_nothing() -> None:
    g = tree(("r", "a", "x", 0.1), ("r", "b", "y", 0.9))
    assert pick(bfs, g, max_depth=1) is None
    assert pick(bfs, g, max_depth=2) is not None


def test_best_first_expands_the_best_scoring_node_with_something_left() -> None:
    g = tree(("r", "a", "x", 0.1), ("r", "b", "y", 0.9))
    choice = pick(best_first, g)
    assert (choice.node, choice.strategy, choice.path) == ("y", "a", ("r", "y"))


def test_best_first_breaks_score_ties_by_the_earlier_find() -> None:
    g = tree(("r", "a", "x", 0.5), ("r", "b", "y", 0.5))
    assert pick(best_first, g).node == "x"


def test_beam_of_width_one_never_expands_the_weaker_sibling() -> None:
    g = tree(("r", "a", "x", 0.2), ("r", "b", "y", 0.8))
    seen = []
    for child in ("y1", "y2"):
        choice = pick(beam, g, width=1)
        seen.append(choice.node)
        g.nodes[choice.node]["tried"][choice.strategy] = 1
        G.add_result(g, choice.node, child, strategy=choice.strategy, edge={}, node={"score": 0})
    assert seen == ["y", "y"]
    assert pick(beam, g, width=1).node in ("y1", "y2")  # the next layer, never x


def test_beam_of_width_two_keeps_both_siblings_in_the_beam() -> None:
    g = tree(("r", "a", "x", 0.2), ("r", "b", "y", 0.8))
    g.nodes["y"]["tried"].update(a=1, b=1)
    assert pick(beam, g, width=2).node == "x"
    assert pick(beam, g, width=1) is None


def test_random_is_the_same_for_the_same_seed_and_covers_every_untried_pair() -> None:
    g = tree(("r", "a", "x", 0.2), ("r", "b", "y", 0.8))
    untried = {(n, s) for n in ("x", "y") for s in TWO}
    seen = set()
    for seed in range(40):
        one = random_policy(g, random.Random(seed), strategies=TWO)
        two = random_policy(g, random.Random(seed), strategies=TWO)
        assert one is not None and one == two
        seen.add((one.node, one.strategy))
    assert seen == untried


def test_mcts_expands_the_least_tried_strategy_first() -> None:
    g = tree()
    assert pick(mcts, g).strategy == "a"
    g.nodes["r"]["tried"]["a"] = 1
    assert pick(mcts, g).strategy == "b"


def test_mcts_with_no_exploration_descends_to_the_child_with_the_best_mean() -> None:
    g = tree(("r", "a", "x", 0.2), ("r", "b", "y", 0.8))
    choice = pick(mcts, g, c=0.0)
    assert (choice.node, choice.path) == ("y", ("r", "y"))


def test_mcts_with_much_exploration_visits_the_less_visited_child() -> None:
    g = tree(("r", "a", "x", 0.2), ("r", "b", "y", 0.8))
    for _ in range(5):  # y visited often, x once
        G.backup(g, ["r", "y"], 0.8)
    assert pick(mcts, g, c=100.0).node == "x"


def test_mcts_progressive_widening_limits_samples_of_a_sampled_strategy() -> None:
    g = tree()
    sampled = {"m": 5}
    choice = pick(mcts, g, sampled)
    assert (choice.node, choice.strategy, choice.attempt) == ("r", "m", 0)
    g.nodes["r"]["tried"]["m"] = 1
    G.add_result(g, "r", "x", strategy="m", edge={}, node={"score": 0.5})
    G.backup(g, ["r", "x"], 0.5)
    # visits 2 at the root: ceil(1 * 2**0.5) = 2 attempts allowed, one made -> widen again
    assert pick(mcts, g, sampled).node == "r"
    g.nodes["r"]["tried"]["m"] = 2
    # two attempts made, two allowed -> descend into the child instead
    assert pick(mcts, g, sampled).node == "x"


def test_mcts_passes_over_a_child_with_nothing_left_below_it() -> None:
    g = tree(("r", "a", "x", 0.2), ("r", "b", "y", 0.8))
    assert pick(mcts, g, c=0.0).node == "y"
    g.nodes["y"]["tried"].update(a=1, b=1)  # y, UCT's pick with c=0, is exhausted
    assert pick(mcts, g, c=0.0).node == "x"


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_policy_returns_none_when_everything_was_tried(name: str) -> None:
    g = tree(("r", "a", "x", 0.2), ("r", "b", "y", 0.8))
    for n in ("x", "y"):
        g.nodes[n]["tried"].update(a=1, b=1)
    assert make_policy(name)(g, random.Random(0), strategies=TWO) is None


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_policy_only_picks_untried_pairs_within_max_depth(name: str) -> None:
    g = tree(("r", "a", "x", 0.2), ("x", "a", "z", 0.9))
    for seed in range(10):
        choice = make_policy(name)(g, random.Random(seed), strategies=TWO, max_depth=2)
        assert choice is not None
        assert g.nodes[choice.node]["depth"] < 2
        assert g.nodes[choice.node]["tried"].get(choice.strategy, 0) == 0
        assert choice.path[0] == "r" and choice.path[-1] == choice.node


def test_make_policy_refuses_an_unknown_name_or_parameter() -> None:
    with pytest.raises(KeyError):
        make_policy("dfs")
    with pytest.raises(
        ValueError, match=r"^policy 'beam': params\.c: unknown key \(allowed: width\)$"
    ):
        make_policy("beam", c=1.0)
    with pytest.raises(ValueError, match=r"params\.c: unknown key \(allowed: none\)$"):
        make_policy("bfs", c=1.0)
    with pytest.raises(ValueError, match=r"params\.width: must be a whole number of nodes"):
        make_policy("beam", width=0)
    with pytest.raises(ValueError, match=r"policy 'mcts' takes MctsParams, not PuctParams"):
        make_policy("mcts", POLICY_PARAMS["puct"]())


def test_make_policy_binds_the_policy_functions_own_defaults() -> None:
    """A parameter left out gets the value the policy function itself defaults to."""
    for name, policy in POLICIES.items():
        bound = make_policy(name)
        assert isinstance(bound, functools.partial) and bound.func is policy
        defaults = {
            k: p.default
            for k, p in inspect.signature(policy).parameters.items()
            if p.kind is p.KEYWORD_ONLY and k not in ("strategies", "max_depth")
        }
        assert bound.keywords == defaults, name
    assert make_policy("mcts", c=0.5).keywords == {"c": 0.5, "pw_k": 1.0, "pw_alpha": 0.5}


def noop(g: nx.DiGraph, node: str, strategy: str, *, exhausted: bool) -> None:
    """One expansion of ``node`` that changed nothing, as ``apply_event`` records it."""
    g.nodes[node]["tried"][strategy] = g.nodes[node]["tried"].get(strategy, 0) + 1
    edge = {"status": "gave_up", **({"exhausted": True} if exhausted else {})}
    assert G.add_result(g, node, node, strategy=strategy, edge=edge, node=None) == "noop"


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_policy_never_chooses_a_pair_its_agent_declared_exhausted(name: str) -> None:
    # Regression: best_first chose the best node's `mutate` again after the mutation agent had
    # tried every edit there (about 100 no-op expansions in a stuck refactory search).
    sampled = {"m": 200}
    g = tree(("r", "m", "x", 0.2), ("r", "m", "y", 0.8))
    g.nodes["r"]["tried"]["m"] = 2
    noop(g, "y", "m", exhausted=False)  # a no-op that says nothing: y may be tried again
    choices = [make_policy(name)(g, random.Random(seed), strategies=sampled) for seed in range(20)]
    chosen = {c.node for c in choices if c is not None}
    if name == "best_first":  # the best node, with 197 attempts left
        assert chosen == {"y"}
    noop(g, "y", "m", exhausted=True)
    for seed in range(20):
        choice = make_policy(name)(g, random.Random(seed), strategies=sampled)
        assert choice is not None and choice.node != "y"
    for n in ("r", "x"):
        noop(g, n, "m", exhausted=True)
    assert make_policy(name)(g, random.Random(0), strategies=sampled) is None


# ------------------------------------------------------------------ priors, bounds, completion


def with_priors(g: nx.DiGraph, node: str, strategy: str, priors: list[float]) -> nx.DiGraph:
    g.nodes[node].setdefault("priors", {})[strategy] = priors
    return g


def attempts(*nodes: tuple[str, str, int, str, float]) -> nx.DiGraph:
    """Like ``tree``, with each edge's attempt number: ``(parent, strategy, attempt, child,
    score)``."""
    g = G.new_graph("r", commit=None, score=0.5, tests={})
    G.backup(g, ["r"], 0.5)
    for parent, strategy, attempt, child, score in nodes:
        g.nodes[parent]["tried"][strategy] = g.nodes[parent]["tried"].get(strategy, 0) + 1
        G.add_result(
            g, parent, child, strategy=strategy, edge={"attempt": attempt}, node={"score": score}
        )
        G.backup(g, G.path_to(g, child), score)
    return g


MUT = {"m": 50}


def test_prior_reads_the_nodes_list_or_its_first_parents_and_none_without_any() -> None:
    g = with_priors(
        attempts(("r", "m", 0, "x", 0.6), ("x", "m", 0, "y", 0.6)), "r", "m", [0.5, 0.3]
    )
    assert G.prior(g, "r", "m", 1) == 0.3
    assert G.prior(g, "r", "m", 2) == G.PRIOR_FLOOR  # past the end of the list
    assert G.prior(g, "y", "m", 0) == 0.5  # not expanded with m yet: the root's list stands in
    with_priors(g, "x", "m", [0.9, 0.1])
    assert G.prior(g, "y", "m", 0) == 0.9  # the nearest list up the path
    assert G.prior(g, "r", "other", 0) is None


def test_best_first_with_priors_weighs_a_childs_gain_against_the_edits_prior() -> None:
    # The root's list: attempt 0 made x, attempt 1 is next (prior 0.3).
    better = with_priors(attempts(("r", "m", 0, "x", 0.6)), "r", "m", [0.5, 0.3, 0.2])
    # x gained 0.1: 10 * 0.6 + ln 0.5 (its edit) + ln 0.5 (its own first) > 10 * 0.5 + ln 0.3.
    choice = pick(best_first, better, MUT, priors=10)
    assert (choice.node, choice.attempt) == ("x", 0)
    # The same child without a gain costs its edit's prior: the root's next edit comes first.
    flat = with_priors(attempts(("r", "m", 0, "x", 0.5)), "r", "m", [0.5, 0.3, 0.2])
    choice = pick(best_first, flat, MUT, priors=10)
    assert (choice.node, choice.attempt) == ("r", 1)
    # Without priors best_first takes x in both (higher or equal score, earlier found aside).
    assert pick(best_first, better, MUT).node == "x"


def test_best_first_with_priors_leaves_a_wrong_partial_fix_for_the_roots_better_edits() -> None:
    # Shares of a ranked list of ~40 edits. x (a wrong partial fix, +0.25) was tried 5 times
    # and none of its children did better than it.
    shares = [0.04, 0.035, 0.03, 0.03, 0.025, 0.02]
    g = attempts(("r", "m", 0, "x", 0.75), *[("x", "m", i, f"x{i}", 0.75) for i in range(5)])
    with_priors(g, "r", "m", shares)
    with_priors(g, "x", "m", shares)
    # r's 2nd edit: 10 * 0.5 + ln 0.035 = 1.65. x's 6th: 7.5 + ln 0.04 + ln 0.02 = 0.37; an
    # x_i's 1st: 7.5 + ln 0.04 + ln(x_i's edit) + ln 0.04 < 0.
    choice = pick(best_first, g, MUT, priors=10)
    assert (choice.node, choice.attempt) == ("r", 1)
    # Plain best_first stays under x (0.75 beats the root's 0.5).
    assert pick(best_first, g, MUT).node == "x"
    # Had x passed every test but one (+0.4), its own next edit would come first.
    g.nodes["x"]["score"] = 0.9
    assert pick(best_first, g, MUT, priors=10).node == "x"


def test_path_prior_sums_the_log_priors_of_the_edits_on_the_path() -> None:
    g = with_priors(
        attempts(("r", "m", 1, "x", 0.6), ("x", "m", 0, "y", 0.7)), "r", "m", [0.5, 0.25]
    )
    with_priors(g, "x", "m", [0.1])
    assert pytest.approx(math.log(0.25) + math.log(0.1)) == path_prior(g, "y")
    assert path_prior(g, "r") == 0.0


def test_puct_expands_a_high_prior_attempt_before_a_visited_child_of_equal_value() -> None:
    g = with_priors(attempts(("r", "m", 0, "x", 0.5)), "r", "m", [0.6, 0.4])
    for _ in range(3):
        G.backup(g, ["r", "x"], 0.5)
    # Untried attempt 1: Q = 0.5 (the root's value) + c * 0.4 * sqrt(N) / 1; x: Q 0.5 + c *
    # 0.6 * sqrt(N) / (1 + 4).
    choice = pick(puct, g, MUT, c=1.0)
    assert (choice.node, choice.attempt, choice.path) == ("r", 1, ("r",))
    # A child whose mean is far higher is walked into instead.
    g2 = with_priors(attempts(("r", "m", 0, "x", 1.0)), "r", "m", [0.6, 0.1])
    with_priors(g2, "x", "m", [0.9])
    choice = pick(puct, g2, MUT, c=1.0)
    assert (choice.node, choice.attempt, choice.path) == ("x", 0, ("r", "x"))


def test_a_partial_node_ranks_by_its_bound_below_a_full_node_of_the_same_value() -> None:
    g = tree(("r", "a", "x", 0.5), ("r", "b", "p", 0.0))
    g.nodes["p"].update(partial=True, bound=0.5)
    assert G.value(g, "p") == 0.5 and G.value(g, "x") == 0.5
    assert G.rank(g, "x") < G.rank(g, "p")  # known beats hoped for
    g.nodes["p"]["bound"] = 0.75
    assert pick(best_first, g, {"a": 2, "b": 2}).node == "p"  # its bound is the best value
    # Completing it: it takes its score, and the path takes the difference from what was
    # backed up (its known score, 0.0, as the controller backs up).
    before = g.nodes["r"]["value_sum"]
    G.complete(g, "p", score=0.25, tests={"status": "ok"}, path=["r", "p"])
    assert "partial" not in g.nodes["p"] and "bound" not in g.nodes["p"]
    assert g.nodes["p"]["score"] == 0.25 and g.nodes["p"]["value_sum"] == pytest.approx(0.25)
    assert g.nodes["r"]["value_sum"] == pytest.approx(before + 0.25)
    assert pick(best_first, g, {"a": 2, "b": 2}).node == "x"


def test_priors_and_c_must_be_numbers_of_their_policies() -> None:
    assert make_policy("best_first", priors=10, patience=3) is not None
    assert make_policy("puct", c=2.0) is not None
    with pytest.raises(ValueError, match=r"params\.priors: unknown key \(allowed: c\)$"):
        make_policy("puct", priors=10)
