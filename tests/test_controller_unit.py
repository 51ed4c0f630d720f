"""The controller's bookkeeping, driven by the doubles of ``treesearch.testing`` (no git, no pytest
runs): budgets, transpositions, no-ops, returns to an ancestor, agent errors, resume."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from treesearch.agents import AgentContext, AgentCost, AgentResult, AgentStatus
from treesearch.search import graph as G
from treesearch.search.budget import Budget
from treesearch.search.controller import Controller, SearchResult, Strategy
from treesearch.search.events import replay
from treesearch.search.params import make_policy
from treesearch.session import ToolCall
from treesearch.testing import CallbackAgent, FunctionScorer, MemorySink, MemoryStore, ScriptedAgent


def value(files: Mapping[str, str]) -> float:
    """Score: the x in ``x = <n>`` of a.py, out of 3."""
    m = re.search(r"x = (\d+)", files.get("a.py", ""))
    return int(m.group(1)) / 3 if m else 0.0


def write(n: int) -> ScriptedAgent:
    return ScriptedAgent([{"write": "a.py", "content": f"x = {n}\n"}])


def add(k: int) -> CallbackAgent:
    """Adds ``k`` to x (one session step) and reports 100 tokens."""

    def run(ctx: AgentContext) -> AgentResult:
        text = (ctx.workspace / "a.py").read_text()
        n = int(text.split("=")[1]) + k
        ctx.session.step([ToolCall("c", "write_file", {"path": "a.py", "content": f"x = {n}\n"})])
        return AgentResult(AgentStatus.FINISHED, cost=AgentCost(tokens_in=60, tokens_out=40))

    return CallbackAgent(run)


TEN = Budget(expansions=10)
BROKEN = ScriptedAgent([{"replace": "a.py", "old": "not there", "new": "y"}])


class Search:
    """A workspace with ``a.py`` holding ``x = 0``, a ``MemoryStore`` and a ``MemorySink``."""

    def __init__(self, tmp_path: Path) -> None:
        self.workspace = tmp_path / "ws"
        self.workspace.mkdir(parents=True)
        (self.workspace / "a.py").write_text("x = 0\n")
        self.store = MemoryStore(self.workspace)
        self.scorer = FunctionScorer(value)
        self.sink = MemorySink()

    def controller(
        self,
        agents: Mapping[str, Any],
        *,
        policy: str = "bfs",
        budget: Budget = TEN,
        stop_on_perfect: bool = False,
        make_agent: Callable[[Strategy], Any] | None = None,
        **kw: Any,
    ) -> Controller:
        return Controller(
            store=self.store,
            strategies={name: Strategy(name, {}) for name in agents},
            make_agent=make_agent or (lambda st: agents[st.name]),
            scorer=self.scorer,
            policy=make_policy(policy),
            budget=budget,
            stop_on_perfect=stop_on_perfect,
            sink=self.sink,
            **kw,
        )

    def run(self, agents: Mapping[str, Any], **kw: Any) -> SearchResult:
        c = self.controller(agents, **kw)
        c.start()
        return c.run()


def nodes(g: nx.DiGraph) -> dict[int, float]:
    return {d["order"]: d["score"] for _, d in g.nodes(data=True)}


def test_search_finds_the_best_state_and_leaves_it_in_the_workspace(tmp_path: Path) -> None:
    s = Search(tmp_path)
    out = s.run({"one": write(1), "three": write(3)}, stop_on_perfect=True)
    assert out.stop_reason == "perfect_score"
    assert out.best_score == 1.0
    assert (s.workspace / "a.py").read_text() == "x = 3\n"
    assert s.store.restores[-1].target.tree == out.best


def test_expansion_budget_stops_the_search_at_its_count(tmp_path: Path) -> None:
    s = Search(tmp_path)
    out = s.run({"one": add(1), "two": add(2)}, budget=Budget(expansions=3))
    assert (out.stop_reason, out.usage.expansions) == ("expansions", 3)
    assert len([e for e in s.sink.events if e["event"] == "expansion"]) == 3


def test_test_run_budget_counts_runs_not_cache_hits(tmp_path: Path) -> None:
    s = Search(tmp_path)
    # "same" reaches x = 1 from the root like "one": a cache hit at most, never a second run
    out = s.run({"one": write(1), "same": write(1), "two": add(2)}, budget=Budget(test_runs=3))
    assert out.stop_reason == "test_runs"
    assert out.usage.test_runs == 3 == s.scorer.test_runs
    assert len(s.scorer.scored) == len(set(s.scorer.scored))  # no state tested twice


def test_max_depth_stops_expanding_below_it(tmp_path: Path) -> None:
    s = Search(tmp_path)
    out = s.run({"inc": add(1)}, budget=Budget(expansions=None, max_depth=2))
    assert out.stop_reason == "search_space_exhausted"
    assert max(d["depth"] for _, d in out.graph.nodes(data=True)) == 2
    assert out.usage.expansions == 2


def test_token_budget_stops_after_the_agents_reported_enough(tmp_path: Path) -> None:
    s = Search(tmp_path)
    out = s.run({"inc": add(1)}, budget=Budget(expansions=None, tokens=250))
    assert (out.stop_reason, out.usage.tokens, out.usage.expansions) == ("tokens", 300, 3)


def test_two_strategies_reaching_the_same_files_meet_in_one_node(tmp_path: Path) -> None:
    s = Search(tmp_path)
    out = s.run({"one": write(1), "also_one": write(1)}, budget=Budget(expansions=2))
    g = out.graph
    assert g.number_of_nodes() == 2
    [(root, child)] = list(g.edges)
    assert g.edges[root, child]["strategy"] == "one"
    assert [a["strategy"] for a in g.edges[root, child]["also"]] == ["also_one"]
    outcomes = [e["outcome"] for e in s.sink.events if e["event"] == "expansion"]
    assert outcomes == ["new", "transposition"]
    assert s.scorer.scored.count(child) == 1


def test_a_strategy_that_changes_nothing_is_a_noop_without_a_node(tmp_path: Path) -> None:
    s = Search(tmp_path)
    out = s.run({"same": write(0)}, budget=Budget(expansions=5))
    g = out.graph
    assert g.number_of_nodes() == 1 and g.number_of_edges() == 0
    root = G.root_of(g)
    assert [n["strategy"] for n in g.nodes[root]["noops"]] == ["same"]
    assert out.stop_reason == "search_space_exhausted"


def test_a_return_to_an_ancestor_is_a_noop_and_adds_no_cycle(tmp_path: Path) -> None:
    s = Search(tmp_path)
    out = s.run({"one": write(1), "zero": write(0)}, budget=Budget(expansions=10))
    g = out.graph
    assert nx.is_directed_acyclic_graph(g)
    assert g.number_of_nodes() == 2
    child = next(n for n in g.nodes if n != G.root_of(g))
    noops = g.nodes[child]["noops"]
    # "one" on x = 1 changes nothing; "zero" goes back to the root: both stay at the child
    assert [(n["strategy"], n["to"]) for n in noops] == [("one", child), ("zero", G.root_of(g))]


def test_a_failed_agent_that_left_nothing_is_an_error_not_a_noop(tmp_path: Path) -> None:
    s = Search(tmp_path)
    out = s.run({"broken": BROKEN, "one": write(1)}, budget=Budget(expansions=2))
    g = out.graph
    root = G.root_of(g)
    [error] = g.nodes[root]["errors"]
    assert error["strategy"] == "broken" and error["status"] == "failed"
    assert "replace" in error["reason"]
    assert g.nodes[root]["noops"] == []
    assert (s.workspace / "a.py").read_text() == "x = 1\n"


def test_an_agent_that_cannot_be_built_fails_its_expansion_with_the_reason(
    tmp_path: Path,
) -> None:
    s = Search(tmp_path)

    def make_agent(st: Strategy) -> Any:
        raise RuntimeError("no such model")

    out = s.run({"x": None}, make_agent=make_agent, budget=Budget(expansions=1))
    [ev] = [e for e in s.sink.events if e["event"] == "expansion"]
    assert ev["outcome"] == "error"
    assert ev["edge"]["reason"] == "RuntimeError: no such model"
    assert out.graph.number_of_nodes() == 1


def test_repeated_identical_agent_errors_stop_the_search_with_the_reason(
    tmp_path: Path,
) -> None:
    s = Search(tmp_path)
    agents = {f"b{i}": BROKEN for i in range(5)}
    out = s.run(agents, max_consecutive_errors=3)
    assert (out.stop_reason, out.usage.expansions) == ("max_consecutive_errors", 3)
    assert out.stop_detail is not None and "failed 3 times in a row" in out.stop_detail


def test_an_error_streak_is_broken_by_a_different_outcome(tmp_path: Path) -> None:
    s = Search(tmp_path)
    agents = {"b1": BROKEN, "b2": BROKEN, "ok": write(1), "b3": BROKEN, "b4": BROKEN}
    out = s.run(agents, max_consecutive_errors=3, budget=Budget(expansions=5))
    assert out.stop_reason == "expansions"


def test_the_sink_gets_a_transcript_per_expansion_and_a_test_log_per_scored_state(
    tmp_path: Path,
) -> None:
    s = Search(tmp_path)
    out = s.run({"one": write(1), "same": write(0)}, budget=Budget(expansions=2))
    assert sorted(s.sink.transcripts) == ["0000-one", "0001-same"]
    assert set(s.sink.test_logs) == set(out.graph.nodes)
    edge = out.graph.edges[G.root_of(out.graph), out.best]
    assert edge["transcript"] == "transcripts/0000-one.json"
    assert [t["k"] for t in s.sink.timings] == [0, 1]


@pytest.mark.parametrize("policy", ["bfs", "best_first", "beam", "mcts", "random"])
def test_replaying_the_events_rebuilds_the_same_graph(tmp_path: Path, policy: str) -> None:
    s = Search(tmp_path)
    agents = {"one": add(1), "two": add(2), "same": write(0), "broken": BROKEN}
    out = s.run(agents, policy=policy, budget=Budget(expansions=8))
    rebuilt = replay(s.sink.events)
    assert rebuilt.graph is not None
    assert G.to_json(rebuilt.graph) == G.to_json(out.graph)
    assert rebuilt.usage.expansions == out.usage.expansions
    assert rebuilt.usage.tokens == out.usage.tokens


@pytest.mark.parametrize("policy", ["bfs", "mcts", "random"])
def test_a_search_resumed_from_its_events_ends_as_one_never_stopped(
    tmp_path: Path, policy: str
) -> None:
    agents = {"one": add(1), "two": add(2), "same": write(0)}
    whole = Search(tmp_path / "whole")
    full = whole.run(agents, policy=policy, budget=Budget(expansions=7), seed=3)

    part = Search(tmp_path / "part")
    part.run(agents, policy=policy, budget=Budget(expansions=3), seed=3)
    events = [e for e in part.sink.events if e["event"] in ("root", "expansion")]
    resumed = part.controller(agents, policy=policy, budget=Budget(expansions=7), seed=3)
    resumed.replay(events)
    assert resumed.usage.expansions == 3
    out = resumed.run()
    assert G.to_json(out.graph, stable=True) == G.to_json(full.graph, stable=True)
    assert out.best == full.best


def test_same_seed_gives_the_same_graph_and_commit_ids(tmp_path: Path) -> None:
    agents = {"one": add(1), "two": add(2), "same": write(0)}
    a = Search(tmp_path / "a").run(agents, policy="random", seed=5)
    b = Search(tmp_path / "b").run(agents, policy="random", seed=5)
    assert G.to_json(a.graph) == G.to_json(b.graph)
