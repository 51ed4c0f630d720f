"""The search controller end to end: real store, real scripted agents, real pytest runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import tree_digest

from treesearch.app import checkout, load_run_graph, resume, run_from_config
from treesearch.config import load_config
from treesearch.errors import ConfigError
from treesearch.search.graph import to_json

GOLDEN = Path(__file__).parent / "golden"
CALC = """\
def add(a, b):
    return a - b


def mul(a, b):
    return a + b


def neg(a):
    return a
"""
CALC_TESTS = """\
from calc import add, mul, neg


def test_add():
    assert add(2, 3) == 5


def test_mul():
    assert mul(2, 3) == 6


def test_neg():
    assert neg(0) == 0


def test_add_zero():
    assert add(0, 0) == 0
"""


def replace(path: str, old: str, new: str) -> dict[str, Any]:
    return {"kind": "scripted", "steps": [{"replace": path, "old": old, "new": new}]}


def make_project(root: Path) -> Path:
    proj = root / "calc_project"
    proj.mkdir(parents=True)
    (proj / "calc.py").write_text(CALC)
    (proj / "test_calc.py").write_text(CALC_TESTS)
    (proj / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    return proj


def config(tmp_path: Path, proj: Path, **search: Any) -> dict[str, Any]:
    """Strategies: two good fixes, one harmful edit, one that never applies, and a duplicate of
    a good fix spelled differently (a transposition)."""
    cfg: dict[str, Any] = {
        "workspace": {"path": str(proj)},
        "store": {"home": str(tmp_path / "home")},
        "task": "make the tests pass",
        "strategies": {
            "fix-add": replace("calc.py", "return a - b", "return a + b"),
            "fix-mul": replace("calc.py", "return a + b\n\n\ndef neg", "return a * b\n\n\ndef neg"),
            "break-neg": replace("calc.py", "    return a\n", "    return a + 1\n"),
            "never-applies": replace("calc.py", "no such text", "x"),
            "fix-add-too": {
                "kind": "scripted",
                "steps": [
                    {"write": "calc.py", "content": CALC.replace("return a - b", "return a + b")}
                ],
            },
        },
        "scoring": {
            "search_tests": {
                "command": "python -m pytest -q",
                "timeout": 60,
                "env": {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
            }
        },
        "search": {"seed": 7, "steps": 3, "budget": {"expansions": 12}, **search},
        "output": {"runs_dir": str(tmp_path / "runs"), "instance_id": "calc"},
    }
    return cfg


def run(cfg: dict[str, Any], tmp_path: Path) -> Any:
    return run_from_config(cfg, base_dir=tmp_path)


# ------------------------------------------------------------------------------- golden graphs

# Golden file name -> (policy, params, scoring.order). The files are rewritten only by the
# explicit command ``python tests/update_golden.py``; a test run never writes them.
GOLDEN_CASES: dict[str, tuple[str, dict[str, Any], str]] = {
    # Pinned to full runs: the golden graphs were recorded with full runs only. The calc root
    # fails tests (a repair search), so the default order (auto) would screen failing tests
    # first and mark partial nodes; the failing_first cases cover that order.
    "calc-bfs.json": ("bfs", {}, "all"),
    "calc-best_first.json": ("best_first", {}, "all"),
    "calc-best_first-patience3.json": ("best_first", {"patience": 3}, "all"),
    "calc-beam.json": ("beam", {"width": 2}, "all"),
    "calc-mcts.json": ("mcts", {"c": 1.0}, "all"),
    "calc-random.json": ("random", {}, "all"),
    "calc-best_first-failing_first.json": ("best_first", {}, "failing_first"),
    "calc-mcts-failing_first.json": ("mcts", {"c": 1.0}, "failing_first"),
    # Policies with priors, beside the ranked mutation agent (the strategy that gives them).
    "calc-best_first-priors10.json": ("best_first", {"priors": 10}, "all"),
    "calc-puct.json": ("puct", {"c": 1.0}, "all"),
}
WITH_PRIORS = ("calc-best_first-priors10.json", "calc-puct.json")
"""Golden cases whose search has ``mutate`` (the mutation agent in ranked order, whose runs give
each node's priors: ``AgentResult.priors``) beside one scripted fix (no priors)."""


def build_golden_graph(name: str, tmp_path: Path) -> Any:
    """Run the search of golden case ``name`` in ``tmp_path``; its outcome (``.graph``...)."""
    policy, params, order = GOLDEN_CASES[name]
    proj = make_project(tmp_path)
    cfg = config(tmp_path, proj, policy=policy, params=params, stop_on_perfect=False)
    cfg["scoring"]["order"] = order
    if name in WITH_PRIORS:  # calc's two bugs need two edits: the priors steer between them
        cfg["strategies"] = {
            "mutate": {"kind": "mutation", "order": "ranked", "samples": 20, "max_steps": 1},
            "fix-add": cfg["strategies"]["fix-add"],
        }
        cfg["search"]["budget"] = {"expansions": 16}
    return run(cfg, tmp_path)


@pytest.mark.parametrize("name", [n for n, case in GOLDEN_CASES.items() if case[2] == "all"])
def test_policy_builds_the_golden_graph(tmp_path: Path, name: str) -> None:
    got = to_json(build_golden_graph(name, tmp_path).graph, stable=True)
    golden = GOLDEN / name
    expected = json.loads(golden.read_text())
    actual = json.loads(got)
    # Node by node, then edge by edge, so a failure names the first difference.
    assert [n["id"] for n in actual["nodes"]] == [n["id"] for n in expected["nodes"]]
    for a, e in zip(actual["nodes"], expected["nodes"], strict=True):
        assert a == e, f"node #{e['order']} differs"
    assert actual["edges"] == expected["edges"]
    assert got == golden.read_text()
    if name in WITH_PRIORS:  # the priors steered it: the agent's ranked list is on the nodes
        assert any("mutate" in n.get("priors", {}) for n in actual["nodes"])


@pytest.mark.parametrize(
    "name", [n for n, case in GOLDEN_CASES.items() if case[2] == "failing_first"]
)
def test_failing_first_builds_its_golden_graph(tmp_path: Path, name: str) -> None:
    """scoring.order failing_first on the calc repair search: partial nodes, in a graph that
    the same seed rebuilds byte for byte."""
    out = build_golden_graph(name, tmp_path)
    got = to_json(out.graph, stable=True)
    partial = [n for n, d in out.graph.nodes(data=True) if d.get("partial")]
    assert partial, "the screen should leave some nodes partial"
    assert out.best not in partial
    assert got == (GOLDEN / name).read_text()


def test_golden_files_are_exactly_the_golden_cases() -> None:
    """Every golden file is checked by a case and every case has its file (a case added without
    running ``python tests/update_golden.py`` fails here, not silently)."""
    assert sorted(p.name for p in GOLDEN.glob("*.json")) == sorted(GOLDEN_CASES)


def test_same_seed_gives_byte_identical_graph_and_other_seed_may_differ(tmp_path: Path) -> None:
    outs = []
    for i, seed in enumerate((3, 3)):
        proj = make_project(tmp_path / f"p{i}")
        cfg = config(tmp_path / f"p{i}", proj, policy="random", seed=seed, stop_on_perfect=False)
        outs.append(to_json(run(cfg, tmp_path).graph, stable=True))
    assert outs[0] == outs[1]


# ------------------------------------------------------------------------------- graph semantics


def test_transposition_two_strategies_same_files_one_node_one_test_run(tmp_path: Path) -> None:
    proj = make_project(tmp_path)
    cfg = config(tmp_path, proj, policy="bfs", stop_on_perfect=False, budget={"expansions": 5})
    # Pinned to full runs: this counts one test run per state; under the default (auto: a
    # repair search screens progress_first) a child that fixes a failing test costs two.
    cfg["scoring"]["order"] = "all"
    out = run(cfg, tmp_path)
    g = out.graph
    root = g.graph["root"]
    kids = {g.edges[root, c]["strategy"]: c for c in g.successors(root)}
    also = [a["strategy"] for a in g.edges[root, kids["fix-add"]].get("also", [])]
    assert also == ["fix-add-too"]  # one node, reached by both strategies
    # Root + fix-add + fix-mul + break-neg: 4 states tested, the duplicate cost nothing.
    assert out.usage.test_runs == 4
    assert g.number_of_nodes() == 4
    assert g.nodes[root]["noops"] == []
    errors = g.nodes[root]["errors"]  # the replace whose text is missing: an agent error
    assert [n["strategy"] for n in errors] == ["never-applies"]


def test_noop_and_return_to_ancestor_add_no_node_and_no_cycle(tmp_path: Path) -> None:
    import networkx as nx

    proj = make_project(tmp_path)
    cfg = config(tmp_path, proj, policy="bfs", stop_on_perfect=False, budget={"expansions": 40})
    cfg["strategies"]["undo-add"] = replace(
        "calc.py", "return a + b\n\n\ndef mul", "return a - b\n\n\ndef mul"
    )
    out = run(cfg, tmp_path)
    assert nx.is_directed_acyclic_graph(out.graph)
    back = [
        n
        for _, d in out.graph.nodes(data=True)
        for n in d["noops"]
        if n["strategy"] == "undo-add" and n["to"] == out.graph.graph["root"]
    ]
    assert back, "undo-add after fix-add returns to the root: recorded as a no-op"


def test_search_restores_best_node_and_writes_run_directory(tmp_path: Path) -> None:
    proj = make_project(tmp_path)
    before = tree_digest(proj)
    cfg = config(tmp_path, proj, policy="best_first", budget={"expansions": 20})
    cfg["output"]["model_name"] = "my-model"
    out = run(cfg, tmp_path)
    assert out.best_score == 1.0 and out.stop_reason == "perfect_score"
    assert "return a + b" in (proj / "calc.py").read_text()
    assert "return a * b" in (proj / "calc.py").read_text()
    rd = out.run_dir
    for name in (
        "config.yaml",
        "events.jsonl",
        "graph.json",
        "best.patch",
        "predictions.jsonl",
        "summary.json",
    ):
        assert (rd / name).is_file(), name
    pred = json.loads((rd / "predictions.jsonl").read_text())
    assert pred == {
        "instance_id": "calc",
        "model_name_or_path": "my-model",
        "model_patch": (rd / "best.patch").read_text(),
    }
    assert "+    return a * b" in pred["model_patch"]
    assert list((rd / "transcripts").glob("*.json")) and list((rd / "tests").glob("*.log"))
    summary = json.loads((rd / "summary.json").read_text())
    assert summary["best"]["score"] == 1.0 and summary["usage"]["test_runs"] >= 3
    # The patch applies to the original project and gives the best node's files.
    subprocess.run(
        [
            "git",
            "apply",
            "--unsafe-paths",
            "--directory",
            str(proj.relative_to("/")),
            "-R",
            str(rd / "best.patch"),
        ],
        cwd="/",
        check=True,
    )
    assert tree_digest(proj) == before


def test_held_out_grade_is_reported_apart(tmp_path: Path) -> None:
    proj = make_project(tmp_path)
    (proj / "heldout").mkdir()
    (proj / "heldout" / "test_more.py").write_text(
        "from calc import neg\n\ndef test_neg_of_one():\n    assert neg(1) == -1\n"
    )
    cfg = config(tmp_path, proj, policy="best_first")
    cfg["scoring"]["search_tests"]["command"] = "python -m pytest -q test_calc.py"
    cfg["scoring"]["grade_tests"] = {
        "command": "python -m pytest -q heldout",
        "timeout": 60,
        "env": {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    }
    out = run(cfg, tmp_path)
    assert out.best_score == 1.0  # plausible: the search tests pass
    assert out.grade is not None and out.grade.score == 0.0  # not correct: held-out test fails
    summary = json.loads((out.run_dir / "summary.json").read_text())
    assert summary["grade"]["score"] == 0.0


# ------------------------------------------------------------------------------- budgets


@pytest.mark.parametrize(
    "budget,check",
    [
        ({"expansions": 3}, lambda o: o.usage.expansions == 3 and o.stop_reason == "expansions"),
        ({"test_runs": 2}, lambda o: o.usage.test_runs == 2 and o.stop_reason == "test_runs"),
        (
            {"max_depth": 1, "expansions": 50},
            lambda o: (
                max(d["depth"] for _, d in o.graph.nodes(data=True)) == 1
                and o.stop_reason == "search_space_exhausted"
            ),
        ),
    ],
)
def test_budget_stops_where_it_says(tmp_path: Path, budget: dict, check: Any) -> None:
    proj = make_project(tmp_path)
    out = run(config(tmp_path, proj, policy="bfs", stop_on_perfect=False, budget=budget), tmp_path)
    assert check(out), (out.usage, out.stop_reason)


# ------------------------------------------------------------------------------- bad configs


def write_yaml(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_config_errors_name_file_key_and_allowed_values(tmp_path: Path) -> None:
    proj = make_project(tmp_path)
    cfg = config(tmp_path, proj)
    bad_policy = write_yaml(tmp_path / "a.yaml", {**cfg, "search": {"policy": "dfs"}})
    with pytest.raises(ConfigError, match=r"a\.yaml: search\.policy: .*'bfs'.*'mcts'"):
        load_config(bad_policy)
    bad_kind = dict(cfg, strategies={"x": {"kind": "telepathy"}})
    path = write_yaml(tmp_path / "b.yaml", bad_kind)
    with pytest.raises(
        ConfigError,
        match=r"b\.yaml: strategies\.x\.kind: unknown agent kind "
        r"'telepathy' \(known kinds: .*scripted",
    ):
        load_config(path)
    no_ws = {k: v for k, v in cfg.items() if k != "workspace"}
    with pytest.raises(ConfigError, match=r"c\.yaml: workspace: missing"):
        load_config(write_yaml(tmp_path / "c.yaml", no_ws))
    typo = dict(cfg, search={"polcy": "bfs"})
    with pytest.raises(ConfigError, match=r"search\.polcy: unknown key \(allowed: policy"):
        load_config(write_yaml(tmp_path / "d.yaml", typo))
    with pytest.raises(ConfigError, match=r"search\.params\.c: not a parameter of policy 'bfs'"):
        load_config(
            write_yaml(tmp_path / "e.yaml", cfg), ["search.policy=bfs", "search.params.c=2"]
        )
    missing = dict(cfg, workspace={"path": str(tmp_path / "nowhere")})
    with pytest.raises(Exception, match="nowhere.*not a folder"):
        run_from_config(missing, base_dir=tmp_path)


def test_overrides_merge_into_nested_keys(tmp_path: Path) -> None:
    proj = make_project(tmp_path)
    path = write_yaml(tmp_path / "cfg.yaml", config(tmp_path, proj))
    loaded = load_config(
        path, ["search.policy=mcts", "search.params.c=0.5", "search.budget.expansions=4"]
    )
    s = loaded.config.search
    assert (s.policy, s.params.c, s.budget.expansions, s.seed) == ("mcts", 0.5, 4, 7)
    assert dict(s.params) == {"c": 0.5, "pw_k": 1.0, "pw_alpha": 0.5}  # the policy's defaults


@pytest.mark.parametrize(
    ("search", "says"),
    [
        (
            {"policy": "bfs", "params": {"c": 2}},
            ".c: not a parameter of policy 'bfs' (allowed: none)",
        ),
        (
            {"policy": "best_first", "params": {"c": 2}},
            ".c: not a parameter of policy 'best_first' (allowed: patience, priors)",
        ),
        ({"policy": "mcts", "params": {"c": "x"}}, ".c: must be a number >= 0, got 'x'"),
        ({"policy": "mcts", "params": {"pw_k": -1}}, ".pw_k: must be a number >= 0, got -1"),
        ({"policy": "puct", "params": {"c": True}}, ".c: must be a number >= 0, got True"),
        ({"policy": "beam", "params": {"width": 0}}, ".width: must be a whole number of nodes"),
        ({"policy": "beam", "params": {"width": 1.5}}, ".width: must be a whole number of nodes"),
        ({"params": {"priors": -1}}, ".priors: must be a number >= 0, or null, got -1"),
        ({"policy": "beam", "params": "wide"}, ": must be a mapping, got 'wide'"),
    ],
)
def test_policy_params_are_checked_by_the_policys_model_naming_the_key(
    tmp_path: Path, search: dict[str, Any], says: str
) -> None:
    scripted = {"s": {"kind": "scripted", "steps": []}}
    path = write_yaml(
        tmp_path / "p.yaml",
        {"workspace": {"path": str(tmp_path)}, "strategies": scripted, "search": search},
    )
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value).startswith(f"{path}: search.params{says}"), str(err.value)


# ------------------------------------------------------------------------------- interrupt & resume


def cli(*args: str, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "treesearch", *args],
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        **kw,
    )


def slow_config(tmp_path: Path, proj: Path) -> dict[str, Any]:
    cfg = config(tmp_path, proj, policy="bfs", stop_on_perfect=False, budget={"expansions": 10})
    for strat in cfg["strategies"].values():  # each expansion takes a moment: room to interrupt
        strat["steps"].insert(0, {"run": "sleep 0.3"})
    return cfg


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_interrupted_search_resumes_to_the_same_result(tmp_path: Path, sig: int) -> None:
    ref_proj = make_project(tmp_path / "ref")
    reference = run(slow_config(tmp_path / "ref", ref_proj), tmp_path)

    proj = make_project(tmp_path / "int")
    cfg = slow_config(tmp_path / "int", proj)
    cfg["output"]["run_id"] = "interrupted"
    cfg_path = write_yaml(tmp_path / "int.yaml", cfg)
    proc = cli("run", str(cfg_path))
    run_dir = tmp_path / "int" / "runs" / "interrupted"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait until a few expansions are on record
        events = (
            (run_dir / "events.jsonl").read_text() if (run_dir / "events.jsonl").exists() else ""
        )
        if events.count('"expansion"') >= 3:
            break
        time.sleep(0.05)
    time.sleep(0.15)  # land inside an expansion
    if sig == signal.SIGKILL:
        os.killpg(proc.pid, signal.SIGKILL)
    else:
        proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    if sig == signal.SIGTERM:
        assert proc.returncode == 130, err
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["status"] == "interrupted"
        # The workspace was left at the best node found so far.
        _run, g, _ = load_run_graph(run_dir)
        from treesearch.config import DEFAULT_EXCLUDES
        from treesearch.store import ShadowStore

        store = ShadowStore.open(proj, home=tmp_path / "int" / "home", excludes=DEFAULT_EXCLUDES)
        now = store.capture().tree
        assert now == summary["best"]["tree"], store.diff(summary["best"]["tree"]).patch
    resumed = resume(run_dir)
    assert resumed.best == reference.best
    assert to_json(resumed.graph, stable=True) == to_json(reference.graph, stable=True)
    assert resumed.usage.expansions == reference.usage.expansions


# ------------------------------------------------------------------------------- CLI views


def test_cli_show_export_and_checkout(tmp_path: Path) -> None:
    proj = make_project(tmp_path)
    out = run(config(tmp_path, proj, policy="best_first"), tmp_path)
    show = subprocess.run(
        [sys.executable, "-m", "treesearch", "show", str(out.run_dir)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "* #0" in show.stdout and "fix-add" in show.stdout and "score 1.000" in show.stdout
    for fmt, needle in (("graphml", "<graphml"), ("dot", "digraph search"), ("json", '"nodes"')):
        exp = subprocess.run(
            [sys.executable, "-m", "treesearch", "export", str(out.run_dir), "--format", fmt],
            capture_output=True,
            text=True,
            check=True,
        )
        assert needle in exp.stdout
    node, result, ws = checkout(out.run_dir, "#0")
    assert (proj / "calc.py").read_text() == CALC and ws == proj.resolve()
    assert result.written == ("calc.py",)
