"""Priors over edits and screening that keeps the ranking (issue #29): the gcd-like and
``or``/``and`` wrong-partial-fix traps, fixed within 30 test runs by the recommended repair
config (``configs/repair.yaml``) and by best_first with screening on; the priors and completed
runs recorded in ``events.jsonl`` so a resumed search builds the same graph."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_search_patience import CASES, repair_config

from treesearch.app import resume, run_from_config
from treesearch.search import graph as G

ROOT = Path(__file__).resolve().parent.parent


def recommended(tmp_path: Path, case: str) -> dict[str, Any]:
    """``configs/repair.yaml`` as a user runs it, on ``case``'s project."""
    cfg = yaml.safe_load((ROOT / "configs" / "repair.yaml").read_text())
    base = repair_config(tmp_path, case)  # writes the project
    cfg["workspace"] = base["workspace"]
    cfg["store"] = base["store"]
    cfg["output"] = base["output"]
    cfg["scoring"]["search_tests"] = base["scoring"]["search_tests"]
    cfg["search"]["budget"]["test_runs"] = 30  # its other limits as they are
    return cfg


def events(out: Any) -> list[dict[str, Any]]:
    lines = (out.run_dir / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_recommended_repair_config_fixes_a_wrong_partial_fix_trap(
    tmp_path: Path, case: str
) -> None:
    out = run_from_config(recommended(tmp_path, case), base_dir=tmp_path)
    assert out.best_score == 1.0 and out.stop_reason == "perfect_score"
    assert out.usage.test_runs <= 30
    assert out.summary["scoring_order"]["repair_search"] is True
    assert out.summary["scoring_order"]["screened"] is True  # best_first: auto screens


@pytest.mark.parametrize("case", sorted(CASES))
def test_best_first_with_priors_and_screening_fixes_a_wrong_partial_fix_trap(
    tmp_path: Path, case: str
) -> None:
    """The same search without priors spends all 30 runs under the wrong partial fix
    (``test_search_patience``); with them the root's better-ranked edits win the budget."""
    cfg = repair_config(tmp_path, case, priors=5)
    out = run_from_config(cfg, base_dir=tmp_path)
    assert out.best_score == 1.0 and out.usage.test_runs <= 30
    log = events(out)
    root = G.root_of(out.graph)
    # The ranked list of the root was recorded once, with the root's first expansion.
    [first] = [e for e in log if e["event"] == "expansion" and e["parent"] == root][:1]
    assert len(first["priors"]) > 10 and first["priors"] == sorted(first["priors"], reverse=True)
    assert out.graph.nodes[root]["priors"]["mutate"] == first["priors"]
    with_priors = [e for e in log if e.get("priors")]
    assert len(with_priors) == len({(e["parent"], e["strategy"]) for e in with_priors})


@pytest.mark.slow
def test_a_resumed_search_with_priors_and_completed_runs_builds_the_same_graph(
    tmp_path: Path,
) -> None:
    # MCTS on gcd walks into partial nodes (valued at their bound) and so completes them; the
    # agent's priors are recorded whatever the policy. (auto runs every test under MCTS: the
    # screens are asked for.)
    def mcts(where: Path) -> dict[str, Any]:
        cfg = repair_config(where, "gcd")
        cfg["search"]["policy"] = "mcts"
        cfg["scoring"]["order"] = "progress_first"
        return cfg

    ref = run_from_config(mcts(tmp_path / "ref"), base_dir=tmp_path)
    kinds = [e["event"] for e in events(ref)]
    assert "completed" in kinds  # a partial node was chosen and completed
    assert any(e.get("priors") for e in events(ref))
    cfg = mcts(tmp_path / "int")
    cfg["search"]["budget"] = {"test_runs": 30, "expansions": 6}
    first = run_from_config(cfg, base_dir=tmp_path)
    again = resume(first.run_dir, ["search.budget.expansions=1000"])
    assert G.to_json(again.graph, stable=True) == G.to_json(ref.graph, stable=True)
    assert again.usage.test_runs == ref.usage.test_runs
    # Completed runs count in the test-run budget: every run is in some event.
    kinds = ("root", "expansion", "completed")
    spent = sum(e.get("test_runs", 0) for e in events(ref) if e["event"] in kinds)
    assert spent == ref.usage.test_runs


@pytest.mark.slow
def test_a_parallel_search_completes_partial_nodes_in_its_own_workspace(tmp_path: Path) -> None:
    cfg = repair_config(tmp_path, "gcd")
    cfg["search"]["policy"] = "mcts"
    cfg["scoring"]["order"] = "progress_first"  # auto runs every test under MCTS
    cfg["search"]["workers"] = 2
    out = run_from_config(cfg, base_dir=tmp_path)
    log = events(out)
    done = [e for e in log if e["event"] == "completed"]
    assert done, "MCTS walks into partial nodes: they are completed before they are expanded"
    for e in done:
        node = out.graph.nodes[e["node"]]
        assert not node.get("partial") and node["score"] == e["score"]
        assert e["tests"]["status"] == "ok" and "not_run" not in e["tests"]
        # completed before any expansion of it was chosen or recorded
        after = [
            i
            for i, x in enumerate(log)
            if x["event"] in ("dispatch", "expansion")
            and (x.get("parent") or x.get("node")) == e["node"]
        ]
        assert all(log.index(e) < i for i in after)
    kinds = ("root", "expansion", "completed")  # a dispatch event's test_runs is a share
    spent = sum(e.get("test_runs", 0) for e in log if e["event"] in kinds)
    assert spent == out.usage.test_runs <= 30


@pytest.mark.slow
@pytest.mark.parametrize("priors", [None, 5])
@pytest.mark.parametrize("case", sorted(CASES))
def test_screening_expands_what_a_search_running_every_test_expands(
    tmp_path: Path, case: str, priors: int | None
) -> None:
    """Partial nodes ranked by their bound and completed when chosen: best_first with screening
    chooses the same (node, attempt) sequence as with ``order: all`` and reaches the fix at the
    same expansion. A candidate costs one test run in both (a screen that passes goes on to the
    rest of the suite in the same run); screening spends one more for each partial node a
    policy chose to build on (its ``completed`` run). With or without priors, the two searches
    are the same search."""
    seqs, runs, completed, best = [], [], [], []
    for order in ("auto", "all"):
        cfg = repair_config(tmp_path / order, case, **({"priors": priors} if priors else {}))
        cfg["scoring"]["order"] = order
        out = run_from_config(cfg, base_dir=tmp_path)
        log = events(out)
        best.append(out.best_score)
        seqs.append([(e["parent"], e["attempt"]) for e in log if e["event"] == "expansion"])
        runs.append(out.usage.test_runs)
        completed.append(sum(1 for e in log if e["event"] == "completed"))
    assert len(seqs[0]) >= 5 and seqs[0] == seqs[1] and best[0] == best[1]
    assert completed[1] == 0 and runs[0] == runs[1] + completed[0]


@pytest.mark.parametrize(
    "spec", ["repair-policies.yaml", "repair-policies-bugs.yaml", "repair-recommended.yaml"]
)
def test_the_repair_benchmark_specs_and_the_recommended_config_load(
    tmp_path: Path, spec: str
) -> None:
    """The SPECs behind the choice check every contender's config as ``compare`` does (their
    instance set, built by experiments/instances/, stands in as an empty file), and
    ``configs/repair.yaml`` is an eval config as it is (no workspace)."""
    from treesearch.compare.spec import load_spec
    from treesearch.eval.batch import load_eval_config

    bench = ROOT / "experiments" / "benchmarks"
    raw = yaml.safe_load((bench / spec).read_text())
    (tmp_path / "instances.jsonl").write_text("")
    (tmp_path / "repos").mkdir()
    raw["instances"], raw["repos"] = str(tmp_path / "instances.jsonl"), str(tmp_path / "repos")
    for c in raw["contenders"]:
        c["config"] = str(bench / c["config"])
    (tmp_path / spec).write_text(yaml.safe_dump(raw))
    loaded = load_spec(tmp_path / spec)
    assert len(loaded.contenders) == len(raw["contenders"]) >= 2
    search, _, _, _ = load_eval_config(ROOT / "configs" / "repair.yaml")
    assert search["search"]["params"] == {"patience": 3}
    assert search["strategies"]["mutate"]["order"] == "ranked"


@pytest.mark.slow
def test_mcts_with_screens_fixes_the_or_and_trap_and_leaves_only_proven_worse_nodes_partial(
    tmp_path: Path,
) -> None:
    """Under ``progress_first`` a screen stops a candidate only once more of its tests failed
    than its parent's: every node left partial has a bound below its parent's score (a neutral
    edit runs to the end), and MCTS with screens fixes the trap within 30 test runs, as it does
    running every test."""
    outs = {}
    for order in ("progress_first", "all"):
        cfg = repair_config(tmp_path / order, "orand")
        cfg["scoring"]["order"] = order
        cfg["search"]["policy"] = "mcts"
        outs[order] = run_from_config(cfg, base_dir=tmp_path)
        assert outs[order].best_score == 1.0 and outs[order].usage.test_runs <= 30
    g = outs["progress_first"].graph
    ever = [e for e in events(outs["progress_first"]) if e["event"] == "expansion"]
    assert len(ever) >= 5
    screened = [e for e in ever if (e.get("node") or {}).get("tests", {}).get("partial")]
    assert screened, "some candidate should have been stopped by its screen"
    for e in screened:
        tests = e["node"]["tests"]
        parent_score = g.nodes[e["parent"]]["score"]
        assert tests["upper"] < parent_score, (e["child"], tests)
        assert "more tests fail than in the parent" in tests["partial_reason"]
