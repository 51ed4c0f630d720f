"""Patience (issue #29, item 3): a best-first search that has spent ``patience`` expansions
under a node without finding anything better than it moves on, so a wrong partial fix found first
does not keep the whole budget."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from treesearch.app import run_from_config
from treesearch.config import validate
from treesearch.errors import ConfigError
from treesearch.search import graph as G
from treesearch.search.policies import best_first, stale_nodes

# A recursive Euclid whose base case tests the wrong value: every test fails at first, and the
# first edits that help are wrong partial fixes (half the tests pass).
GCD = '''"""Number theory."""


def gcd(a, b):
    """Greatest common divisor (Euclid)."""
    if b == 1:
        return a
    return gcd(b, a % b)
'''
GCD_TESTS = """from arith import gcd


def test_same():
    assert gcd(6, 6) == 6


def test_divides():
    assert gcd(12, 4) == 4


def test_common():
    assert gcd(12, 18) == 6


def test_coprime():
    assert gcd(7, 3) == 1


def test_zero():
    assert gcd(5, 0) == 5


def test_order():
    assert gcd(4, 12) == 4
"""
# `or` for `and`: the root's first edit makes three of four tests pass, the wrong way.
ORAND = '''"""Ranges."""


def in_range(x, lo, hi):
    """Whether lo <= x <= hi."""
    return x >= lo or x <= hi
'''
ORAND_TESTS = """from ranges import in_range


def test_inside():
    assert in_range(5, 1, 10)


def test_below():
    assert not in_range(0, 1, 10)


def test_above():
    assert not in_range(11, 1, 10)


def test_edge():
    assert in_range(1, 1, 10)
"""
CASES = {
    "gcd": {"arith.py": GCD, "tests/test_gcd.py": GCD_TESTS},
    "orand": {"ranges.py": ORAND, "tests/test_ranges.py": ORAND_TESTS},
}


def repair_config(tmp_path: Path, case: str, **params: float) -> dict[str, Any]:
    proj = tmp_path / case
    for rel, text in CASES[case].items():
        (proj / rel).parent.mkdir(parents=True, exist_ok=True)
        (proj / rel).write_text(text)
    return {
        "workspace": {"path": str(proj)},
        "store": {"home": str(tmp_path / "home")},
        "task": "Make the failing tests pass.",
        "strategies": {
            "mutate": {"kind": "mutation", "samples": 200, "max_steps": 1, "order": "ranked"}
        },
        "scoring": {
            "search_tests": {
                "command": "python -m pytest -q -p no:cacheprovider tests",
                "timeout": 30,
                "env": {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"},
            },
            "score": "pass_fraction",
            "order": "auto",  # a repair search: progress-first screens
        },
        "search": {
            "policy": "best_first",
            "params": params,
            "seed": 0,
            "stop_on_perfect": True,
            "budget": {"test_runs": 30, "expansions": 1000},
        },
        "output": {"runs_dir": str(tmp_path / "runs")},
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_best_first_with_screening_and_patience_fixes_a_wrong_partial_fix_trap(
    tmp_path: Path, case: str
) -> None:
    """Without patience (main before it) the same search spends all 30 test runs under the
    first, wrong, partial fix; with patience 3 it goes back and finds the fix."""
    trapped = run_from_config(repair_config(tmp_path / "off", case), base_dir=tmp_path)
    assert trapped.best_score < 1.0 and trapped.stop_reason == "test_runs"
    out = run_from_config(repair_config(tmp_path / "on", case, patience=3), base_dir=tmp_path)
    assert out.best_score == 1.0 and out.stop_reason == "perfect_score"
    assert out.usage.test_runs <= 30


def chain() -> nx.DiGraph:
    """root 0.5 -> a 0.75 (4 attempts under it, nothing better) -> a1 0.75, a2 0.25;
    root -> b 0.5 (fresh)."""
    g = G.new_graph("root", commit=None, score=0.5, tests={})
    for parent, child, score in (
        ("root", "a", 0.75),
        ("a", "a1", 0.75),
        ("a", "a2", 0.25),
        ("root", "b", 0.5),
    ):
        G.add_result(g, parent, child, strategy="m", edge={}, node={"score": score, "tests": {}})
        g.nodes[parent]["tried"]["m"] = g.nodes[parent]["tried"].get("m", 0) + 1
    g.nodes["a"]["tried"]["m"] = 3
    g.nodes["a1"]["tried"]["m"] = 1
    return g


def test_stale_nodes_are_the_subtrees_that_found_nothing_better_within_patience() -> None:
    g = chain()
    assert stale_nodes(g, None) == frozenset() and stale_nodes(g, 0) == frozenset()
    assert stale_nodes(g, 4) == {"a", "a1", "a2"}  # 3 attempts of a, 1 of a1: 4 under a
    assert stale_nodes(g, 5) == frozenset()
    # The root is never stale: moving on from the root would be moving nowhere.
    assert "root" not in stale_nodes(g, 1)


def test_best_first_with_patience_chooses_outside_a_stale_subtree() -> None:
    g = chain()
    strategies = {"m": 10}
    assert best_first(g, random.Random(0), strategies=strategies).node == "a"
    moved = best_first(g, random.Random(0), strategies=strategies, patience=4)
    assert moved is not None and moved.node == "root"


def test_patience_must_be_a_whole_number() -> None:
    cfg: dict[str, Any] = {
        "workspace": {"path": "."},
        "strategies": {"s": {"kind": "scripted", "steps": []}},
        "scoring": {"search_tests": {"command": "true"}},
        "search": {"policy": "best_first", "params": {"patience": 2.5}},
    }
    with pytest.raises(ConfigError, match=r"search\.params\.patience: must be a whole number"):
        validate(cfg, source="cfg.yaml", base_dir=Path("."))
