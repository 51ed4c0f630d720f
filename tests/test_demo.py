"""The README's demo: the search repairs the bundled project (one bug of three only the mutation
agent fixes); a sequential agent does not."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from treesearch.agents import AgentContext, AgentStatus, build_agent, run_agent
from treesearch.app import SearchOutcome, run_from_config
from treesearch.config import agent_config, load_config
from treesearch.scoring import Scorer
from treesearch.search import render
from treesearch.search.graph import path_to
from treesearch.session import TransactionalSession
from treesearch.store import ShadowStore

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "experiments" / "demo" / "project"
DEMO = ROOT / "configs" / "demo.yaml"

# The three one-line fixes, and nothing else: (file, buggy line, fixed line).
FIXES = [
    (
        "invoice/parse.py",
        "    for line in text.splitlines()[1:]:",
        "    for line in text.splitlines():",
    ),
    (
        "invoice/pricing.py",
        "    if item.qty > BULK_THRESHOLD:",
        "    if item.qty >= BULK_THRESHOLD:",
    ),
    (
        "invoice/report.py",
        "    for item in sorted(items, key=line_total, reverse=False):",
        "    for item in sorted(items, key=line_total, reverse=True):",
    ),
]
MUTATION_ONLY = FIXES[2]  # no scripted strategy of the demo touches report.py


@pytest.fixture(scope="module")
def before() -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in BUNDLED.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def demo(
    tmp_path_factory: pytest.TempPathFactory, before: dict[Path, bytes]
) -> Iterator[SearchOutcome]:
    """One run of the demo, shared by the tests that inspect it."""
    tmp = tmp_path_factory.mktemp("demo")
    loaded = load_config(DEMO, [f"store.home={tmp / 'home'}"])
    out = run_from_config(loaded, runs_dir=tmp / "runs")
    yield out
    shutil.rmtree(out.workspace.parent, ignore_errors=True)


def test_demo_search_fixes_every_bug_and_leaves_the_bundled_project_alone(
    demo: SearchOutcome, before: dict[Path, bytes]
) -> None:
    out = demo
    assert out.best_score == 1.0 and out.stop_reason == "perfect_score"
    assert out.workspace != BUNDLED and out.workspace.is_dir()
    assert out.usage.test_runs <= 25
    # A real fix: exactly the three one-line fixes, no stray mutant along the way.
    for rel, buggy, fixed in FIXES:
        expected = (BUNDLED / rel).read_text().replace(buggy + "\n", fixed + "\n", 1)
        assert (out.workspace / rel).read_text() == expected, rel
    changed = sorted(
        line
        for line in out.patch.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    )
    assert changed == sorted([f"-{b}" for _, b, _ in FIXES] + [f"+{f}" for _, _, f in FIXES])
    assert {p: p.read_bytes() for p in BUNDLED.rglob("*") if p.is_file()} == before


def test_demo_needs_the_mutation_agent_for_the_report_fix(demo: SearchOutcome) -> None:
    strategies = load_config(DEMO).config.strategies
    mutation = {name for name, s in strategies.items() if s.kind == "mutation"}
    assert mutation, "the demo has no mutation strategy"
    rel, _, fixed = MUTATION_ONLY
    # No other strategy could have made the fix ...
    for name, s in strategies.items():
        if name not in mutation:
            assert rel not in json.dumps(agent_config(s)), (
                f"{name} edits {rel}: the mutation agent is not needed"
            )
    # ... which the fixed copy holds, reached through an edge of the best path whose mutation
    # step made exactly that edit.
    assert fixed in (demo.workspace / rel).read_text()
    g = demo.graph
    nodes = path_to(g, demo.best)
    edges = [g.edges[a, b] for a, b in zip(nodes, nodes[1:], strict=False)]
    assert [e["strategy"] for e in edges] == demo.summary["best"]["path"]
    made = [
        e
        for edge in edges
        if edge["strategy"] in mutation
        for e in json.loads((demo.run_dir / edge["transcript"]).read_text())["transcript"]
        if e.get("event") == "edit"
    ]
    assert [(e["path"], e["operator"]) for e in made] == [(rel, "False -> True")], (
        f"mutation edits on the best path {demo.summary['best']['path']}: {made}"
    )


def test_a_second_demo_run_writes_the_same_graph_and_exports_byte_for_byte(
    demo: SearchOutcome, tmp_path: Path
) -> None:
    """Regression (#12 item 12): the README promises the same graph for the same seed, byte for
    byte; edge seconds and clock-dated snapshot commits made every run differ."""
    loaded = load_config(DEMO, [f"store.home={tmp_path / 'home'}"])
    again = run_from_config(loaded, runs_dir=tmp_path / "runs")
    try:
        first = (demo.run_dir / "graph.json").read_bytes()
        assert (again.run_dir / "graph.json").read_bytes() == first
        for fmt in ("graphml", "dot"):
            assert render.export(again.graph, fmt) == render.export(demo.graph, fmt), fmt
    finally:
        shutil.rmtree(again.workspace.parent, ignore_errors=True)


def test_sequential_agent_applying_the_demo_strategies_in_order_does_not_fix_it(
    tmp_path: Path,
) -> None:
    loaded = load_config(DEMO)
    ws = tmp_path / "project"
    shutil.copytree(loaded.workspace_path(), ws)
    store = ShadowStore.open(ws, home=tmp_path / "home")
    session = TransactionalSession.create(store)
    scorer = Scorer.from_config(loaded.config.scoring.model_dump(), "demo.yaml")
    kinds = []
    for strat in loaded.config.strategies.values():
        ctx = AgentContext(
            session=session,
            task="fix",
            max_steps=strat.max_steps or loaded.config.search.steps,
            test_spec=scorer.search_spec,  # as the search gives it, so the mutation agent runs
        )
        result = run_agent(build_agent(agent_config(strat)), ctx)
        kinds.append((strat.kind, result.status))
    assert ("mutation", AgentStatus.FINISHED) in kinds  # the mutation agent made its edit too
    final = scorer.score(ws)
    assert final.score < 1.0  # one line of edits, no going back: stuck below a full pass
