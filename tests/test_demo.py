"""The README's demo: the search repairs the bundled project; a sequential agent does not."""

from __future__ import annotations

import shutil
from pathlib import Path

from treesearch.agents import AgentContext, build_agent, run_agent
from treesearch.app import run_from_config
from treesearch.config import agent_config, load_config
from treesearch.scoring import Scorer
from treesearch.session import TransactionalSession
from treesearch.store import ShadowStore

ROOT = Path(__file__).resolve().parents[1]


def test_demo_search_fixes_every_bug_and_leaves_the_bundled_project_alone(tmp_path: Path) -> None:
    bundled = ROOT / "experiments" / "demo" / "project"
    before = {p: p.read_bytes() for p in bundled.rglob("*") if p.is_file()}
    loaded = load_config(ROOT / "configs" / "demo.yaml", [f"store.home={tmp_path / 'home'}"])
    out = run_from_config(loaded, runs_dir=tmp_path / "runs")
    assert out.best_score == 1.0 and out.stop_reason == "perfect_score"
    assert out.workspace != bundled and out.workspace.is_dir()
    assert "reverse=True" in (out.workspace / "invoice" / "report.py").read_text()
    assert out.usage.test_runs <= 25
    assert {p: p.read_bytes() for p in bundled.rglob("*") if p.is_file()} == before
    shutil.rmtree(out.workspace.parent, ignore_errors=True)


def test_sequential_agent_applying_the_demo_strategies_in_order_does_not_fix_it(
    tmp_path: Path,
) -> None:
    loaded = load_config(ROOT / "configs" / "demo.yaml")
    ws = tmp_path / "project"
    shutil.copytree(loaded.workspace_path(), ws)
    store = ShadowStore.open(ws, home=tmp_path / "home")
    session = TransactionalSession.create(store)
    for strat in loaded.config.strategies.values():
        run_agent(build_agent(agent_config(strat)), AgentContext(session=session, task="fix"))
    scorer = Scorer.from_config(loaded.config.scoring.model_dump(), "demo.yaml")
    final = scorer.score(ws)
    assert final.score < 1.0  # one line of edits, no going back: stuck below a full pass
