"""The mutation agent: real workspaces, real store, real pytest runs; no mocks."""

from __future__ import annotations

import json
import random
import shutil
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from treesearch.agents import AgentContext, AgentResult, AgentStatus, build_agent, run_agent
from treesearch.agents.mutation import MutationAgent
from treesearch.errors import AgentError
from treesearch.scoring import PassFraction, RunStatus, TestSpec, run_tests
from treesearch.session import TransactionalSession
from treesearch.store import ShadowStore
from treesearch.types import TreeHash

ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
SPEC = TestSpec(command="python -m pytest -q tests", timeout=60, env=ENV)
PYPROJECT = '[tool.pytest.ini_options]\npythonpath = ["."]\n'

GRADES = """\
def letter(score):
    if score >= 90:
        return "A"
    if score >= 80:
        return "B"
    return "F"
"""
GRADES_TESTS = """\
from grades import letter


def test_a():
    assert letter(95) == "A"


def test_b():
    assert letter(85) == "B"


def test_boundary():
    assert letter(90) == "A"
"""


def write_project(root: Path, files: dict[str, str]) -> Path:
    for rel, text in {"pyproject.toml": PYPROJECT, **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


class Rig:
    """A workspace with its store; runs the agent as the controller would, one node at a time."""

    def __init__(self, root: Path, files: dict[str, str]) -> None:
        self.workspace = write_project(root / "ws", files)
        self.store = ShadowStore.open(self.workspace, home=root / "home")
        self.cache = root / "cache"
        self.node = self.store.capture().tree

    def expand(
        self, agent: Any, *, attempt: int = 0, seed: str = "0", node: str | None = None, **kw: Any
    ) -> AgentResult:
        """One expansion of ``node`` (default: the root), as the controller runs one."""
        node = node or self.node
        self.store.restore(node)
        session = TransactionalSession.create(self.store, timeout=60)
        ctx = AgentContext(
            session=session,
            task="fix",
            test_spec=kw.pop("test_spec", SPEC),
            rng=random.Random(f"{seed}:{node}:{attempt}"),
            node=TreeHash(node),
            attempt=attempt,
            max_steps=kw.pop("max_steps", 1),
            cache_dir=kw.pop("cache_dir", self.cache),
            **kw,
        )
        result = run_agent(agent, ctx)
        result.transcript.append({"event": "test-tree", "tree": session.tree})
        return result

    def close(self) -> None:
        self.store.close()


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(
        tmp_path,
        {"grades.py": GRADES.replace(">= 90", "> 90"), "tests/test_grades.py": GRADES_TESTS},
    )
    yield r
    r.close()


def edits(result: AgentResult) -> list[str]:
    return [e["description"] for e in result.transcript if e["event"] == "edit"]


def tree(result: AgentResult) -> str:
    return next(e["tree"] for e in result.transcript if e["event"] == "test-tree")


def test_mutation_agent_applies_one_edit_as_one_recorded_step(rig: Rig) -> None:
    result = rig.expand(MutationAgent())
    assert result.status is AgentStatus.FINISHED and result.reason is None
    assert result.steps == 1 and len(edits(result)) == 1
    localized = result.transcript[0]
    assert localized["event"] == "localize" and localized["method"] == "coverage"
    assert localized["top"][0]["path"] == "grades.py"
    edit = next(e for e in result.transcript if e["event"] == "edit")
    diff = rig.store.diff(rig.node, result.tree)
    assert [f.path for f in diff.files] == ["grades.py"]
    changed = sum(f.added_lines + f.deleted_lines for f in diff.files)
    assert changed <= 4, diff  # the edit and nothing else (a copied statement is 2 lines)
    assert edit["path"] == "grades.py" and 0 < edit["probability"] <= 1


def test_mutation_agent_same_seed_gives_the_same_edits(tmp_path: Path) -> None:
    runs = []
    for name in ("one", "two"):
        r = Rig(
            tmp_path / name,
            {"grades.py": GRADES.replace(">= 90", "> 90"), "tests/test_grades.py": GRADES_TESTS},
        )
        runs.append([edits(r.expand(MutationAgent(seed=7), attempt=a)) for a in range(4)])
        r.close()
    assert runs[0] == runs[1]
    assert len({tuple(e) for e in runs[0]}) == 4  # repeated expansions of the node differ


def test_mutation_agent_different_seeds_give_different_edits(rig: Rig, tmp_path: Path) -> None:
    first = [
        edits(rig.expand(MutationAgent(seed=1), attempt=a, cache_dir=tmp_path / "c1"))
        for a in range(4)
    ]
    second = [
        edits(rig.expand(MutationAgent(seed=2), attempt=a, cache_dir=tmp_path / "c2"))
        for a in range(4)
    ]
    assert first != second


def test_mutation_agent_never_produces_the_same_program_twice_for_a_node(tmp_path: Path) -> None:
    small = Rig(
        tmp_path,
        {
            "flag.py": "def on(x):\n    return x > 1\n",
            "tests/test_flag.py": "from flag import on\n\n\ndef test_on():\n    assert on(1)\n",
        },
    )
    agent = MutationAgent(operators=["compare", "constant"])
    trees = []
    for attempt in range(20):
        result = small.expand(agent, attempt=attempt)
        if result.status is AgentStatus.GAVE_UP:
            break
        assert result.status is AgentStatus.FINISHED
        trees.append(tree(result))
    # 5 comparison swaps and 2 new constants (1 -> 2 and 0): each program exactly once.
    assert len(trees) == 7 and len(set(trees)) == 7
    assert result.status is AgentStatus.GAVE_UP
    assert "every edit of the 1 most suspicious lines was tried" in str(result.reason)
    log = (small.cache / "mutation" / "tried" / f"{small.node}.jsonl").read_text().splitlines()
    assert len(log) == 7 and all(json.loads(line)["key"] for line in log)
    # Running attempt 3 again (a resumed search) repeats its own edit exactly.
    assert tree(small.expand(agent, attempt=3)) == trees[3]
    small.close()


def test_mutation_agent_child_inherits_its_parents_ranking_with_lines_moved(
    tmp_path: Path,
) -> None:
    r = Rig(
        tmp_path,
        {
            "calc.py": "def f(x):\n    y = x\n    y = y * 2\n    return y + 1\n",
            "tests/test_calc.py": "from calc import f\n\n\ndef test_f():\n    assert f(1) == 2\n",
        },
    )
    agent = MutationAgent(operators=["delete"])
    for attempt in range(5):
        parent = r.expand(agent, attempt=attempt)
        if "`y = y * 2`" in edits(parent)[0]:
            break
    child = tree(parent)
    result = r.expand(agent, node=child)
    localized = result.transcript[0]
    assert localized["inherited_from"] == r.node and localized["cached"] is True
    assert "ranking inherited from" in localized["note"]
    # The deleted line 3 is gone from the ranking and line 4 moved up to line 3 (the ``def``
    # line runs at import time only: never ranked).
    assert sorted(t["line"] for t in localized["top"]) == [2, 3]
    fresh = r.expand(MutationAgent(operators=["delete"], relocalize=True), node=child)
    assert fresh.transcript[0]["inherited_from"] is None and fresh.transcript[0]["cached"] is False
    r.close()


@pytest.mark.parametrize("order", ["sampled", "ranked"])
def test_mutation_agent_that_tried_every_edit_of_a_node_says_the_node_is_exhausted(
    tmp_path: Path, order: str
) -> None:
    small = Rig(
        tmp_path,
        {
            "flag.py": "def on(x):\n    return x > 1\n",
            "tests/test_flag.py": "from flag import on\n\n\ndef test_on():\n    assert on(1)\n",
        },
    )
    agent = MutationAgent(operators=["compare", "constant"], order=order)
    results = [small.expand(agent, attempt=attempt) for attempt in range(9)]
    assert [r.status for r in results] == [AgentStatus.FINISHED] * 7 + [AgentStatus.GAVE_UP] * 2
    assert [r.exhausted for r in results] == [False] * 7 + [True] * 2
    assert results[-1].to_json()["exhausted"] is True
    assert "exhausted" not in results[0].to_json()
    small.close()


def test_run_agent_clears_exhausted_on_a_run_that_changed_the_workspace(rig: Rig) -> None:
    class Claims:
        """Edits a file and still says nothing is left (an agent's mistake)."""

        def run(self, ctx: AgentContext) -> AgentResult:
            (ctx.workspace / "grades.py").write_text("X = 1\n")
            return AgentResult(AgentStatus.GAVE_UP, exhausted=True)

    class Fails:
        def run(self, ctx: AgentContext) -> AgentResult:
            return AgentResult(AgentStatus.FAILED, reason="broken", exhausted=True)

    changed = rig.expand(Claims())
    assert changed.steps == 1 and changed.exhausted is False
    assert rig.expand(Fails()).exhausted is False


def test_mutation_agent_chains_edits_up_to_max_steps(rig: Rig) -> None:
    result = rig.expand(MutationAgent(edits=3), max_steps=2)
    assert result.status is AgentStatus.FINISHED
    assert result.steps == 2 and len(edits(result)) == 2


def test_mutation_agent_edits_a_project_whose_tests_crash_on_import(tmp_path: Path) -> None:
    r = Rig(
        tmp_path,
        {
            "rates.py": "BASE = 100\nRATE = BASE / 0\n\n\ndef scaled(x):\n    return x * RATE\n",
            "tests/test_rates.py": "from rates import scaled\n\n\ndef test_scaled():\n    assert scaled(1) == 100\n",
        },
    )
    result = r.expand(MutationAgent(operators=["constant"]))
    assert result.status is AgentStatus.FINISHED
    edit = next(e for e in result.transcript if e["event"] == "edit")
    assert (edit["path"], edit["line"]) == ("rates.py", 2)
    r.close()


def test_mutation_agent_says_when_it_falls_back_to_tracebacks(tmp_path: Path) -> None:
    r = Rig(
        tmp_path,
        {
            "mean.py": "def mean(xs):\n    return sum(xs) / len(xs)\n",
            "tests/test_mean.py": "from mean import mean\n\n\ndef test_empty():\n    assert mean([]) == 0\n",
        },
    )
    shell = TestSpec(command="cd . && python -m pytest -q tests", timeout=60, env=ENV)
    result = r.expand(MutationAgent(), test_spec=shell)
    assert result.status is AgentStatus.FINISHED
    assert "coverage not used" in str(result.reason)
    assert result.transcript[0]["method"] == "traceback"
    r.close()


def test_mutation_agent_gives_up_when_every_test_passes(tmp_path: Path) -> None:
    r = Rig(tmp_path, {"grades.py": GRADES, "tests/test_grades.py": GRADES_TESTS})
    result = r.expand(MutationAgent())
    assert result.status is AgentStatus.GAVE_UP and "no failing tests" in str(result.reason)
    assert result.steps == 0
    r.close()


def test_mutation_agent_without_a_test_spec_fails(rig: Rig) -> None:
    result = rig.expand(MutationAgent(), test_spec=None)
    assert result.status is AgentStatus.FAILED and "needs the search tests" in str(result.reason)


def test_mutation_agent_uses_its_own_tests_field_when_the_search_gives_none(rig: Rig) -> None:
    agent = build_agent(
        {"kind": "mutation", "tests": {"command": "python -m pytest -q tests", "env": ENV}}
    )
    result = rig.expand(agent, test_spec=None)
    assert result.status is AgentStatus.FINISHED


def test_mutation_agent_keeps_its_caches_in_memory_without_a_cache_dir(rig: Rig) -> None:
    agent = MutationAgent(operators=["compare"])
    a = rig.expand(agent, attempt=0, cache_dir=None)
    b = rig.expand(agent, attempt=1, cache_dir=None)
    assert b.transcript[0]["cached"] is True
    assert tree(a) != tree(b)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"operators": ["arith", "teleport"]}, "field 'operators' must list families"),
        ({"operators": "arith"}, "field 'operators' must be a list"),
        ({"formula": "jaccard"}, "field 'formula' must be one of ochiai, tarantula, dstar"),
        ({"top_lines": 0}, "field 'top_lines' must be how many"),
        ({"edits": True}, "field 'edits' must be edits per expansion"),
        ({"coverage": "yes"}, "field 'coverage' must be true"),
        ({"traceback_boost": -1}, "field 'traceback_boost' must be a number >= 0"),
        ({"family_weights": {"insert": -1}}, "field 'family_weights' must map families"),
        ({"family_weights": {"nope": 1}}, "bad: nope"),
        ({"exclude": "tests"}, "field 'exclude' must be a list"),
        ({"tests": {"command": ""}}, "tests.command: must not be empty"),
        ({"samples": 3}, "unknown field 'samples'; allowed fields: operators"),
    ],
)
def test_build_mutation_agent_with_bad_config_names_the_field(
    config: dict[str, Any], message: str
) -> None:
    with pytest.raises(AgentError, match=message):
        build_agent({"kind": "mutation", **config})


def test_build_mutation_agent_from_config() -> None:
    agent = build_agent(
        {
            "kind": "mutation",
            "operators": ["compare", "negate"],
            "formula": "dstar",
            "top_lines": 3,
            "seed": 5,
            "family_weights": {"negate": 2},
        }
    )
    assert isinstance(agent, MutationAgent)
    assert agent.operators == ("compare", "negate") and agent.formula == "dstar"
    assert agent.family_weights["negate"] == 2.0 and agent.family_weights["delete"] == 0.5


HANG = """\
def count_up(n):
    i = 0
    total = 0
    while i < n:
        total += i
        i += 1
    return total + 1
"""
HANG_TESTS = """\
from counter import count_up


def test_zero():
    assert count_up(0) == 0


def test_three():
    assert count_up(3) == 3
"""


def test_a_mutant_that_hangs_is_stopped_by_the_test_timeout_and_scores_zero(tmp_path: Path) -> None:
    r = Rig(tmp_path, {"counter.py": HANG, "tests/test_counter.py": HANG_TESTS})
    agent = MutationAgent(operators=["delete"])
    spec = TestSpec(command="python -m pytest -q tests", timeout=2, env=ENV)
    for attempt in range(10):
        result = r.expand(agent, attempt=attempt)
        if any("`i += 1` -> ``" in d for d in edits(result)):
            break
    else:
        pytest.fail("the agent never deleted `i += 1`")
    run = run_tests(spec, r.workspace)
    assert run.status is RunStatus.TIMEOUT
    assert PassFraction()(run).value == 0.0
    r.close()


@pytest.mark.slow
def test_a_search_scores_a_hanging_mutant_zero_and_goes_on(tmp_path: Path) -> None:
    app = pytest.importorskip("treesearch.app")
    write_project(tmp_path / "bug", {"counter.py": HANG, "tests/test_counter.py": HANG_TESTS})
    config = {
        "workspace": {"path": str(tmp_path / "bug"), "copy": True},
        "store": {"home": str(tmp_path / "home"), "excludes": ["__pycache__/", ".coverage*"]},
        "task": "Make the failing tests pass.",
        "strategies": {"mutate": {"kind": "mutation", "samples": 10, "operators": ["delete"]}},
        "scoring": {
            "search_tests": {"command": "python -m pytest -q tests", "timeout": 2, "env": ENV},
            "score": "pass_fraction",
        },
        "search": {
            "policy": "bfs",
            "seed": 0,
            "stop_on_perfect": True,
            "budget": {"test_runs": 8, "expansions": 20},
        },
        "output": {"runs_dir": str(tmp_path / "runs")},
    }
    out = app.run_from_config(config, base_dir=tmp_path)
    if Path(out.workspace).parent.name.startswith("treesearch-"):  # the search's own copy
        shutil.rmtree(Path(out.workspace).parent, ignore_errors=True)
    hung = [
        n for n, d in out.graph.nodes(data=True) if d.get("tests", {}).get("status") == "timeout"
    ]
    assert hung and all(out.graph.nodes[n]["score"] == 0.0 for n in hung)
    assert out.usage.expansions > len(hung)  # the search went on after the hang


def test_ranked_mutation_agent_tries_the_best_untried_edit_first_and_never_repeats(
    rig: Rig,
) -> None:
    agent = MutationAgent(order="ranked")
    first = rig.expand(agent, attempt=0)
    # Line 4 runs in the failing test and in one passing test of three (line 2 in two): it ranks
    # first, and an operator for its neighbour is the likeliest slip there.
    assert edits(first) == ["grades.py:4 compare (>= -> <=): `>=` -> `<=`"]
    assert first.transcript[1]["event"] == "candidates"
    seen = [edits(first)[0]]
    for attempt in range(1, 6):
        result = rig.expand(agent, attempt=attempt)
        assert result.status is AgentStatus.FINISHED
        seen.append(edits(result)[0])
    assert len(set(seen)) == 6  # each expansion a program not produced before


def test_ranked_mutation_agent_order_ignores_the_seed(tmp_path: Path) -> None:
    files = {"grades.py": GRADES.replace(">= 90", "> 90"), "tests/test_grades.py": GRADES_TESTS}
    orders = []
    for seed in ("1", "2"):
        r = Rig(tmp_path / seed, files)
        agent = MutationAgent(order="ranked", seed=int(seed))
        orders.append([edits(r.expand(agent, attempt=a, seed=seed))[0] for a in range(3)])
        r.close()
    assert orders[0] == orders[1]


def test_ranked_mutation_agent_attempts_run_in_any_order_choose_as_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What makes attempts of one node safe to run at once in a parallel search: attempt ``a``
    takes the ``a``-th edit of the node's ranked list, whatever ran before it."""
    import treesearch.agents.mutation.agent as agent_module

    files = {"grades.py": GRADES.replace(">= 90", "> 90"), "tests/test_grades.py": GRADES_TESTS}
    chosen = []
    for name, attempts in (("in-order", [0, 1, 2, 3]), ("shuffled", [3, 1, 0, 2])):
        monkeypatch.setattr(agent_module, "_RANKED", {})  # as two worker processes
        r = Rig(tmp_path / name, files)
        agent = MutationAgent(order="ranked")
        chosen.append({a: edits(r.expand(agent, attempt=a))[0] for a in attempts})
        r.close()
    assert chosen[0] == chosen[1] and len(set(chosen[0].values())) == 4


def test_ranked_mutation_agent_checks_each_edit_of_a_node_once_over_its_attempts(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: attempt ``a`` checked (parsed, compiled, compared) edits 0..a again, in a
    new agent per expansion as a search builds them: 1653 checks in 57 expansions, 1.8 s."""
    import treesearch.agents.mutation.agent as agent_module

    checked: list[str] = []
    real = agent_module.check

    def counting(src: Any, edit: Any) -> str | None:
        checked.append(edit.describe(src.source))
        return real(src, edit)

    monkeypatch.setattr(agent_module, "check", counting)
    monkeypatch.setattr(agent_module, "_RANKED", {})  # earlier tests listed this same tree
    chosen = [edits(rig.expand(MutationAgent(order="ranked"), attempt=a))[0] for a in range(6)]
    assert len(set(chosen)) == 6
    assert len(checked) == len(set(checked)) == 6


def test_mutation_agent_rejects_an_unknown_order_from_a_config_or_keywords() -> None:
    with pytest.raises(AgentError, match="field 'order'"):
        build_agent({"kind": "mutation", "order": "shuffled"})
    with pytest.raises(AgentError, match="^mutation agent: field 'order' must be sampled"):
        MutationAgent(order="shuffled")
    with pytest.raises(AgentError, match="field 'operators' must list families"):
        MutationAgent(operators=[])


def test_build_ranked_mutation_agent_from_a_strategy_config_regression_order_lost() -> None:
    # Bug: the typed strategy config (agents/configs.py) had no 'order' key and accepted only the
    # classic families, so `order: ranked` and the fix-pattern families were refused by every
    # config file, and the ranked mode could be reached from Python only.
    agent = build_agent(
        {"kind": "mutation", "order": "ranked", "family_weights": {"variable": 2, "clause": 0.5}}
    )
    assert isinstance(agent, MutationAgent) and agent.order == "ranked"
    assert "variable" in agent.operators and agent.family_weights["delete"] < 1
    assert agent.family_weights["variable"] == 2.0
    picked = build_agent({"kind": "mutation", "order": "ranked", "operators": ["wrapper"]})
    assert isinstance(picked, MutationAgent) and picked.operators == ("wrapper",)
    sampled = build_agent({"kind": "mutation"})
    assert isinstance(sampled, MutationAgent) and sampled.order == "sampled"
    assert "variable" not in sampled.operators  # sampled: the classic operators only


def test_ranked_mutation_agent_expanding_one_node_at_once_in_four_workspaces_makes_four_programs(
    tmp_path: Path,
) -> None:
    """Regression (issue 15, repair throughput): the workers of a parallel search expanding the
    same node at once all chose the best untried edit (none had logged it yet) and tested the
    same program several times. The last edit's program is now claimed under the node's lock
    before it is applied."""
    files = {"grades.py": GRADES.replace(">= 90", "> 90"), "tests/test_grades.py": GRADES_TESTS}
    rigs = [Rig(tmp_path / f"w{i}", files) for i in range(4)]
    shared = tmp_path / "agent-cache"
    assert len({r.node for r in rigs}) == 1  # one node, four worker folders
    start = threading.Barrier(len(rigs))
    results: dict[int, AgentResult] = {}

    def expand(i: int) -> None:
        start.wait()
        results[i] = rigs[i].expand(MutationAgent(order="ranked"), attempt=i, cache_dir=shared)

    try:
        threads = [threading.Thread(target=expand, args=(i,)) for i in range(len(rigs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
    finally:
        for r in rigs:
            r.close()
    assert sorted(results) == [0, 1, 2, 3]
    assert all(r.status is AgentStatus.FINISHED for r in results.values())
    assert len({tree(r) for r in results.values()}) == 4
    assert len({edits(r)[0] for r in results.values()}) == 4
