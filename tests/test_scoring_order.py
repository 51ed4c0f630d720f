"""scoring.order (failing tests first) and per-test time limits: real pytest runs in real
workspaces, a real search, the policies' ranking of partial nodes."""

from __future__ import annotations

import json
import random
import shutil
import sys
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from treesearch.app import resume, run_from_config
from treesearch.config import validate
from treesearch.errors import ConfigError
from treesearch.scoring import ScoreCache, Scorer, TestSpec
from treesearch.scoring.envkey import environment_key
from treesearch.scoring.order import TIMEOUT_MARK, is_repair, screen_ids
from treesearch.scoring.results import RunStatus, from_summary
from treesearch.search import graph as G
from treesearch.search.events import replay
from treesearch.search.policies import beam, best_first

BUGS = Path(__file__).resolve().parent.parent / "experiments" / "bugs"
ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}

# Four functions, four tests; a conftest logs every test it starts and every pytest session to
# the file named by ORDER_LOG (outside the workspace), so a test can see what ran, in order.
CONFTEST = """\
import os


def _log(line):
    path = os.environ.get("ORDER_LOG")
    if path:
        with open(path, "a") as handle:
            handle.write(line + "\\n")


def pytest_sessionstart(session):
    _log("session")


def pytest_runtest_setup(item):
    _log(item.name)
"""
TESTS = """\
from m import a, b, c, d


def test_a():
    assert a() == 1


def test_b():
    assert b() == 2


def test_c():
    assert c() == 3


def test_d():
    assert d() == 4
"""


def module(a: int = 0, b: int = 2, c: int = 0, d: int = 4) -> str:
    """``m.py`` whose functions return these values (the right ones are 1, 2, 3, 4)."""
    return "".join(
        f"def {n}():\n    return {v}\n\n\n" for n, v in zip("abcd", (a, b, c, d), strict=True)
    )


def make_suite(root: Path, **values: int) -> Path:
    ws = root / "suite"
    (ws / "tests").mkdir(parents=True)
    (ws / "m.py").write_text(module(**values))
    (ws / "tests" / "test_m.py").write_text(TESTS)
    (ws / "tests" / "conftest.py").write_text(CONFTEST)
    (ws / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    return ws


def spec_for(log: Path | None = None, **kw: Any) -> TestSpec:
    env = dict(ENV)
    if log is not None:
        env["ORDER_LOG"] = str(log)
    # A command that names its folder: the screen must still run only the chosen tests.
    return TestSpec(command=f"{sys.executable} -m pytest -q tests", timeout=120, env=env, **kw)


def logged(log: Path) -> list[str]:
    lines = log.read_text().splitlines() if log.exists() else []
    log.write_text("")
    return lines


# ------------------------------------------------------------------------ the order of runs


def test_screen_runs_parent_failures_first_and_stops_at_the_first_still_failing(
    tmp_path: Path,
) -> None:
    log = tmp_path / "order.log"
    ws = make_suite(tmp_path)  # a and c wrong: test_a and test_c fail
    scorer = Scorer(spec_for(log), order="failing_first")
    root = scorer.score(ws)
    assert [t.id for t in root.run.failing] == [
        "tests/test_m.py::test_a",
        "tests/test_m.py::test_c",
    ]
    assert root.partial is None
    assert logged(log) == ["session", "test_a", "test_b", "test_c", "test_d"]

    # Nothing fixed: the screen stops at test_a, the first of the parent's failures.
    runs = scorer.test_runs
    same = scorer.score(ws, parent=root)
    assert logged(log) == ["session", "test_a"]
    assert scorer.test_runs == runs + 1
    assert same.partial is not None
    assert [t.id for t in same.run.tests] == ["tests/test_m.py::test_a"]
    assert same.partial.not_run == 3
    assert "test_a failed in the parent and still fails" in same.partial.reason
    assert same.score == 0.0 and not same.resolved

    # a fixed, c not: test_a passes, test_c still fails; the rest never runs.
    (ws / "m.py").write_text(module(a=1))
    half = scorer.score(ws, parent=root)
    assert logged(log) == ["session", "test_a", "test_c"]
    assert half.partial is not None and half.partial.not_run == 2
    assert [(t.name, t.outcome.value) for t in half.run.tests] == [
        ("test_a", "passed"),
        ("test_c", "failed"),
    ]
    # The score is a lower bound: tests that did not run count as failed (1 of 4 known to pass).
    assert half.score == pytest.approx(0.25)
    feedback = half.feedback()
    assert "Known: 1 passed, 1 failed; 2 other test(s) did not run" in feedback
    assert "FAILED tests/test_m.py::test_c" in feedback


def test_the_rest_of_the_suite_runs_in_the_same_session_when_every_screened_test_passes(
    tmp_path: Path,
) -> None:
    log = tmp_path / "order.log"
    ws = make_suite(tmp_path)
    scorer = Scorer(spec_for(log), order="failing_first")
    root = scorer.score(ws)
    logged(log)
    (ws / "m.py").write_text(module(a=1, c=3, b=5))  # fixes a and c, breaks b
    runs = scorer.test_runs
    child = scorer.score(ws, parent=root)
    # The parent's failures first, then the rest in the suite's order: one pytest session.
    assert logged(log) == ["session", "test_a", "test_c", "test_b", "test_d"]
    assert scorer.test_runs == runs + 1
    assert child.partial is None
    assert child.run.totals["passed"] == 3 and [t.name for t in child.run.failing] == ["test_b"]
    assert child.score == pytest.approx(0.75)
    # The same result as order: all gives (test order aside), so it is the node's result.
    full = Scorer(spec_for(), order="all").score(ws, parent=root)
    assert sorted((t.id, t.outcome) for t in child.run.tests) == sorted(
        (t.id, t.outcome) for t in full.run.tests
    )
    assert child.score == full.score and child.run.exit_code == full.run.exit_code


def test_progress_first_runs_the_rest_when_any_parent_failure_passes_now(tmp_path: Path) -> None:
    log = tmp_path / "order.log"
    ws = make_suite(tmp_path)  # test_a and test_c fail
    scorer = Scorer(spec_for(log), order="progress_first")
    root = scorer.score(ws)
    logged(log)
    # Nothing fixed, nothing broken: both failing tests run (no stop at the first), then the
    # rest, since the candidate may still tie its parent: a full run, the parent's score.
    same = scorer.score(ws, parent=root)
    assert logged(log) == ["session", "test_a", "test_c", "test_b", "test_d"]
    assert same.partial is None and same.score == pytest.approx(0.5)
    # Nothing fixed and b broken: the session stops at test_b, the third failure (the parent
    # failed two): the candidate scores below its parent whatever test_d does.
    (ws / "m.py").write_text(module(b=5))
    worse = scorer.score(ws, parent=root)
    assert logged(log) == ["session", "test_a", "test_c", "test_b"]
    assert worse.partial is not None and worse.partial.not_run == 1
    assert "none of the 2 test(s) that failed in the parent passes now" in worse.partial.reason
    assert "tests/test_m.py::test_b fails too" in worse.partial.reason
    assert worse.score == 0.0 and worse.partial.upper == pytest.approx(0.25)
    assert worse.partial.upper < root.score
    # Broken at the suite's last test: the stop leaves nothing out, so the run is a full one.
    (ws / "m.py").write_text(module(d=5))
    last = scorer.score(ws, parent=root)
    assert logged(log) == ["session", "test_a", "test_c", "test_b", "test_d"]
    assert last.partial is None and last.score == pytest.approx(0.25)
    # c fixed, a not: progress, so the whole suite runs and the node is fully run (3 of 4).
    (ws / "m.py").write_text(module(c=3))
    runs = scorer.test_runs
    half = scorer.score(ws, parent=root)
    assert logged(log) == ["session", "test_a", "test_c", "test_b", "test_d"]
    assert scorer.test_runs == runs + 1
    assert half.partial is None and half.score == pytest.approx(0.75)


def test_a_parent_rebuilt_from_its_summary_still_counts_every_failing_test() -> None:
    # A summary lists 50 failing ids; its totals count 60. The stand-in fails 60 tests (the
    # first 50 by id), so a screen after a resume stops where one that never stopped does.
    listed = [f"tests/test_m.py::test_{i}" for i in range(50)]
    tests = {"status": "ok", "totals": {"failed": 55, "error": 5, "passed": 3}, "failing": listed}
    parent = from_summary("t", tests)
    assert parent is not None
    assert len(parent.run.failing) == 60
    assert [t.id for t in parent.run.failing[:50]] == listed
    assert screen_ids(parent.run) == tuple(listed)


def test_order_all_runs_every_test_every_time(tmp_path: Path) -> None:
    log = tmp_path / "order.log"
    ws = make_suite(tmp_path)
    scorer = Scorer(spec_for(log), order="all")
    root = scorer.score(ws)
    logged(log)
    child = scorer.score(ws, parent=root)
    assert logged(log) == ["session", "test_a", "test_b", "test_c", "test_d"]
    assert child.partial is None and scorer.test_runs == 2


def test_auto_order_screens_only_in_a_repair_search(tmp_path: Path) -> None:
    log = tmp_path / "order.log"
    ws = make_suite(tmp_path)
    scorer = Scorer(spec_for(log))  # order: auto
    root = scorer.score(ws)
    logged(log)
    scorer.repair = False
    assert scorer.score(ws, parent=root).partial is None
    assert len(logged(log)) == 5
    scorer.repair = True  # auto screens as progress_first: every failing test, no stop
    (ws / "m.py").write_text(module(b=5, d=5))  # worse than the root: stops at test_b
    assert scorer.score(ws, parent=root).partial is not None
    assert logged(log) == ["session", "test_a", "test_c", "test_b"]
    assert is_repair({"status": "ok", "failing": ["t"]})
    assert not is_repair({"status": "ok", "failing": []})
    assert not is_repair({"status": "error", "failing": ["tests/test_m.py"]})


def test_a_passing_screen_costs_one_test_run_so_a_budget_of_one_still_resolves(
    tmp_path: Path,
) -> None:
    ws = make_suite(tmp_path, a=1, c=3)
    root_ws = make_suite(tmp_path / "root")
    scorer = Scorer(spec_for(), order="failing_first")
    root = scorer.score(root_ws)
    runs = scorer.test_runs
    child = scorer.score(ws, parent=root, max_runs=1)
    assert scorer.test_runs == runs + 1
    assert child.partial is None and child.resolved and child.score == 1.0


def test_a_screen_the_plugin_could_not_run_is_followed_by_a_whole_run(tmp_path: Path) -> None:
    # -p no:... keeps the plugin from loading: no report, so the screen's run proves nothing
    # (it is "void") and the whole suite runs again.
    log = tmp_path / "order.log"
    ws = make_suite(tmp_path)
    env = {**ENV, "ORDER_LOG": str(log)}
    command = f"{sys.executable} -m pytest -q -p no:_treesearch_pytest_order tests"
    scorer = Scorer(TestSpec(command=command, timeout=120, env=env), order="failing_first")
    root = scorer.score(ws)
    logged(log)
    runs = scorer.test_runs
    child = scorer.score(ws, parent=root)
    assert scorer.test_runs == runs + 2
    assert logged(log) == ["session", "test_a", "test_b", "test_c", "test_d"] * 2
    assert child.partial is None and child.score == pytest.approx(0.5)


# ------------------------------------------------------------------------ the cache


def test_cache_never_serves_a_screen_as_a_full_run(tmp_path: Path) -> None:
    ws = make_suite(tmp_path)
    spec = spec_for()
    cache = ScoreCache(tmp_path / "scores.sqlite")
    scorer = Scorer(spec, order="failing_first", cache=cache)
    root = scorer.score(ws, "1" * 40)
    (ws / "m.py").write_text(module(a=1))  # still fails test_c: a partial node
    tree = "2" * 40
    partial = scorer.score(ws, tree, parent=root)
    assert partial.partial is not None
    env = environment_key(spec.command, spec.env, ws, ())
    assert cache.get(tree, spec.fingerprint(), env) is None
    # A scorer that wants the full result runs the tests.
    full = Scorer(spec, order="all", cache=cache).score(ws, tree, parent=root)
    assert not full.cached and full.partial is None and len(full.run.tests) == 4
    # That full result is now what a failing-first scorer gets for the same state: no screen.
    again = Scorer(spec, order="failing_first", cache=cache)
    served = again.score(ws, tree, parent=root)
    assert served.cached and served.partial is None and again.test_runs == 0


# ------------------------------------------------------------------------ per-test limits

LOOP = """\
def bisect_left(xs, target):
    while True:
        pass


def contains(xs, target):
    i = bisect_left(xs, target)
    return i < len(xs) and xs[i] == target
"""


def bisect_copy(tmp_path: Path) -> Path:
    ws = tmp_path / "arith_bisect"
    shutil.copytree(BUGS / "arith_bisect", ws)
    return ws


def test_looping_candidate_fails_its_first_screened_test_on_the_per_test_limit(
    tmp_path: Path,
) -> None:
    ws = bisect_copy(tmp_path)
    cache = ScoreCache(tmp_path / "scores.sqlite")
    spec = spec_for()
    scorer = Scorer(spec, order="failing_first", cache=cache)
    root = scorer.score(ws, "1" * 40)
    assert root.status is RunStatus.OK and root.run.failing
    (ws / "bisect_search.py").write_text(LOOP)
    looping = scorer.score(ws, "2" * 40, parent=root)
    # Cut on its first test by the per-test limit, not by the run's 120 s timeout.
    assert looping.status is RunStatus.OK and not looping.run.timed_out
    assert looping.partial is not None
    [cut] = looping.run.tests
    assert cut.outcome.value == "failed" and TIMEOUT_MARK in cut.message
    assert cut.id == root.run.failing[0].id
    assert "per-test time limit" in looping.run.problem
    assert looping.score == 0.0
    # A full run with a cut test is not cached either (another limit could let it finish).
    full = Scorer(spec, order="all", cache=cache).score(ws, "2" * 40, parent=root)
    assert not full.cached and full.partial is None
    assert all(TIMEOUT_MARK in t.message for t in full.run.tests if t.outcome.is_failure)
    assert sum(1 for t in full.run.tests if TIMEOUT_MARK in t.message) == 4  # every test loops
    env = environment_key(spec.command, spec.env, ws, ())
    assert cache.get("2" * 40, spec.fingerprint(), env) is None


def test_per_test_limit_off_leaves_a_loop_to_the_run_timeout(tmp_path: Path) -> None:
    ws = bisect_copy(tmp_path)
    scorer = Scorer(replace_timeout(spec_for(), 3), order="all", per_test_timeout="off")
    root = scorer.score(ws)
    (ws / "bisect_search.py").write_text(LOOP)
    looping = scorer.score(ws, parent=root)
    assert looping.status is RunStatus.TIMEOUT and looping.score == 0.0


def replace_timeout(spec: TestSpec, seconds: float) -> TestSpec:
    return spec.model_copy(update={"timeout": seconds})


SWALLOW = """\
def test_swallows_everything():
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass
"""


def test_a_test_that_swallows_its_timeout_stops_pytest_and_is_never_a_pass(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    (ws / "tests").mkdir(parents=True)
    (ws / "tests" / "test_swallow.py").write_text(SWALLOW)
    scorer = Scorer(spec_for(), per_test_timeout=0.5)  # a fixed limit: even without a parent
    result = scorer.score(ws)
    assert result.status is not RunStatus.OK
    assert result.score == 0.0 and not result.resolved
    assert TIMEOUT_MARK in result.run.output
    assert "swallowed the timeout" in result.run.problem


# ------------------------------------------------------------------------ config


def test_config_rejects_an_order_or_limit_the_test_command_cannot_honour(tmp_path: Path) -> None:
    base = {
        "workspace": {"path": str(tmp_path)},
        "strategies": {"s": {"kind": "scripted", "steps": []}},
    }
    with pytest.raises(ConfigError, match=r"scoring.order: must be"):
        validate({**base, "scoring": {"order": "fast"}}, source="c.yaml", base_dir=tmp_path)
    generic = {"search_tests": {"command": "make test"}}
    with pytest.raises(
        ConfigError, match=r"c.yaml: scoring.order: failing_first: it needs a pytest"
    ):
        validate(
            {**base, "scoring": {**generic, "order": "failing_first"}},
            source="c.yaml",
            base_dir=tmp_path,
        )
    with pytest.raises(ConfigError, match=r"per_test_timeout: it needs a pytest"):
        validate(
            {**base, "scoring": {**generic, "per_test_timeout": 5}},
            source="c.yaml",
            base_dir=tmp_path,
        )
    with pytest.raises(ConfigError, match=r"scoring.per_test_timeout"):
        validate({**base, "scoring": {"per_test_timeout": -1}}, source="c.yaml", base_dir=tmp_path)
    # auto quietly falls back to full runs with another runner.
    ok = validate({**base, "scoring": generic}, source="c.yaml", base_dir=tmp_path)
    assert ok.config.scoring.order == "auto" and ok.config.scoring.per_test_timeout == "auto"


# ------------------------------------------------------------------------ ranking (pure)


def ranked_graph() -> nx.DiGraph:
    """root (0.25) -> partial P (0.5, found first) and full F (0.5); partial Q (0.75)."""
    g = G.new_graph("root", commit=None, score=0.25, tests={"status": "ok"})
    for name, score, partial in (("P", 0.5, True), ("F", 0.5, False), ("Q", 0.75, True)):
        node: dict[str, Any] = {"score": score, "tests": {}, "diff_size": 1}
        if partial:
            node["partial"] = True
        G.add_result(g, "root", name, strategy=f"s-{name}", edge={}, node=node)
    return g


def _node(choice: Any) -> Any:
    assert choice is not None
    return choice.node


def test_partial_node_ranks_below_a_full_node_with_the_same_score() -> None:
    g = ranked_graph()
    strategies = {"x": 1}
    # Q (partial, 0.75) knows more passes than anything else: it comes first.
    assert _node(best_first(g, random.Random(0), strategies=strategies)) == "Q"
    g.nodes["Q"]["tried"]["x"] = 1
    # P and F tie on score; F is fully run, so it goes before P although P was found first.
    assert _node(best_first(g, random.Random(0), strategies=strategies)) == "F"
    g.nodes["root"]["tried"]["x"] = 1
    g.remove_node("Q")  # the beam keeps one node of the layer {P, F}: the fully-run one
    chosen = beam(g, random.Random(0), strategies=strategies, width=1)
    assert chosen is not None and chosen.node == "F"


def test_final_answer_is_the_best_fully_run_node() -> None:
    g = ranked_graph()
    assert G.best_node(g) == "F"
    g.remove_node("F")
    assert G.best_node(g) == "root"  # never a partial node, whatever its score


# ------------------------------------------------------------------------ a whole search


def search_config(tmp_path: Path, ws: Path, log: Path, **search: Any) -> dict[str, Any]:
    """The root (``make_suite(b=0)``) fails test_a, test_b and test_c."""

    def write(**values: int) -> dict[str, Any]:
        return {"kind": "scripted", "steps": [{"write": "m.py", "content": module(**values)}]}

    return {
        "workspace": {"path": str(ws)},
        "store": {"home": str(tmp_path / "home")},
        "strategies": {
            "fix-ab": write(a=1, b=2, c=0),  # most of a fix: test_c still fails -> partial
            "fix-abc": write(a=1, b=2, c=3),  # the whole fix
        },
        "scoring": {
            "search_tests": {
                "command": f"{sys.executable} -m pytest -q tests",
                "timeout": 120,
                "env": {**ENV, "ORDER_LOG": str(log)},
            },
            "order": "failing_first",
            # The tests count pytest sessions: warm `auto` checks its first run against a cold
            # one (two sessions for one test run).
            "warm": "off",
        },
        "search": {"policy": "best_first", "seed": 1, **search},
        "output": {"runs_dir": str(tmp_path / "runs"), "instance_id": "suite"},
    }


@pytest.mark.parametrize(
    ("policy", "screened"),
    [("best_first", True), ("puct", True), ("mcts", False), ("random", False)],
)
def test_auto_screens_a_repair_search_under_the_policies_that_seldom_build_on_partial_nodes(
    tmp_path: Path, policy: str, screened: bool
) -> None:
    """MCTS and random build on screened-out candidates often, each time after a completing run
    that ``order: all`` does not make: auto runs every test for them."""
    log = tmp_path / "order.log"
    ws = make_suite(tmp_path, a=1, c=0, d=0)  # the root fails test_c and test_d
    cfg = search_config(tmp_path, ws, log, budget={"expansions": 1}, policy=policy)
    cfg["scoring"]["order"] = "auto"
    out = run_from_config(cfg, base_dir=tmp_path)
    runs = "\n".join(logged(log)).split("session\n")[1:]
    assert runs[0].split() == ["test_a", "test_b", "test_c", "test_d"]  # the root
    child = ["test_c", "test_d", "test_a", "test_b"] if screened else runs[0].split()
    assert runs[1].split() == child  # the parent's failing tests first, or the suite's order
    marks = out.summary["scoring_order"]
    assert marks["repair_search"] is True and marks["screened"] is screened


def test_search_marks_partial_nodes_counts_each_run_and_ends_on_a_full_node(
    tmp_path: Path,
) -> None:
    log = tmp_path / "order.log"
    ws = make_suite(tmp_path, b=0)
    cfg = search_config(tmp_path, ws, log, budget={"expansions": 1})
    out = run_from_config(cfg, base_dir=tmp_path)
    g = out.graph
    root = G.root_of(g)
    [child] = list(g.successors(root))
    node = g.nodes[child]
    assert node["partial"] is True
    tests = node["tests"]
    assert tests["partial"] is True
    assert (tests["known_passed"], tests["known_failed"], tests["not_run"]) == (2, 1, 1)
    assert tests["failing"] == ["tests/test_m.py::test_c"]
    assert "partial: 1 not run" in tests["summary"]
    assert "partial" not in g.nodes[root] and "partial" not in g.nodes[root]["tests"]
    # The partial child is known to pass 2 of 4 tests (0.5), the root 1 of 4 (0.25); the
    # answer is still the root: the only fully-run node.
    assert node["score"] == pytest.approx(0.5) and g.nodes[root]["score"] == pytest.approx(0.25)
    assert out.best == root and out.patch == ""
    assert out.summary["best"]["tree"] == root
    assert (out.run_dir / "best.patch").read_text() == ""
    assert out.summary["scoring_order"] == {
        "order": "failing_first",
        "repair_search": True,
        "screened": True,
        "partial_nodes": 1,
        "completed_nodes": 0,
    }
    sessions = logged(log).count("session")
    assert out.usage.test_runs == sessions == 2  # the root's run and the child's screen
    # The event log rebuilds the same marks.
    events = [json.loads(line) for line in (out.run_dir / "events.jsonl").read_text().splitlines()]
    rebuilt = replay(events).graph
    assert rebuilt is not None
    assert G.to_json(rebuilt, stable=True) == G.to_json(g, stable=True)


def test_resumed_failing_first_search_reaches_the_graph_of_one_never_stopped(
    tmp_path: Path,
) -> None:
    ref_log = tmp_path / "ref.log"
    ref_ws = make_suite(tmp_path / "ref", b=0)
    ref_cfg = search_config(tmp_path / "ref", ref_ws, ref_log, budget={"expansions": 4})
    ref_cfg["search"]["stop_on_perfect"] = False
    reference = run_from_config(ref_cfg, base_dir=tmp_path)
    ref_events = [
        json.loads(line) for line in (reference.run_dir / "events.jsonl").read_text().splitlines()
    ]
    # The partial child ranks by its bound (0.75: the test not run passing), above the root:
    # best_first chose it, so its run was completed first (one more test run), then expanded.
    [done] = [e for e in ref_events if e["event"] == "completed"]
    assert done["test_runs"] == 1 and not reference.graph.nodes[done["node"]].get("partial")

    log = tmp_path / "int.log"
    ws = make_suite(tmp_path / "int", b=0)
    cfg = search_config(tmp_path / "int", ws, log, budget={"expansions": 1})
    cfg["search"]["stop_on_perfect"] = False
    first = run_from_config(cfg, base_dir=tmp_path)
    resumed = resume(first.run_dir, ["search.budget.expansions=4"])
    assert G.to_json(resumed.graph, stable=True) == G.to_json(reference.graph, stable=True)
    assert resumed.best == reference.best
    assert not resumed.graph.nodes[resumed.best].get("partial")
    assert resumed.usage.test_runs == reference.usage.test_runs
    assert reference.graph.nodes[reference.best]["score"] == 1.0
