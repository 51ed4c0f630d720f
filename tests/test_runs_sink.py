"""``RunDir`` as the controller's ``RunSink``: runs/ writes every file of a run directory (no git:
the search runs on the doubles of ``treesearch.testing``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from treesearch.app import load_run_graph
from treesearch.errors import RunError
from treesearch.runs import RunDir
from treesearch.scoring.results import RunStatus, ScoreResult, TestRun
from treesearch.search import graph as G
from treesearch.search.budget import Budget
from treesearch.search.controller import Controller, Strategy
from treesearch.search.params import make_policy
from treesearch.testing import FunctionScorer, MemoryStore, ScriptedAgent


def test_session_file_sets_aside_the_file_of_an_expansion_cut_short(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "r", {})
    path = run.session_file("0003-fix")
    assert path == run.path / "transcripts" / "0003-fix.session.jsonl" and not path.exists()
    path.write_text('{"type": "header"}\n')
    again = run.session_file("0003-fix")
    assert again == path and not again.exists()
    [aside] = (run.path / "transcripts").glob("0003-fix.aborted-*.jsonl")
    assert aside.read_text() == '{"type": "header"}\n'


def test_write_transcript_returns_the_path_the_edge_records(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "r", {})
    rel = run.write_transcript("0000-a", {"status": "finished", "steps": 2, "at": Path("x")})
    assert rel == "transcripts/0000-a.json"
    text = (run.path / rel).read_text()
    assert text == json.dumps({"at": "x", "status": "finished", "steps": 2}, indent=1) + "\n"


def test_write_test_log_keeps_output_that_is_not_valid_utf8(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "r", {})
    test_run = TestRun(RunStatus.OK, output="bad \ud800 byte", command="pytest")
    result = ScoreResult(1.0, True, "pass_fraction", test_run, cached=True)
    run.write_test_log("ab" * 20, result)
    text = (run.path / "tests" / f"{'ab' * 6}.log").read_text()
    assert text.startswith(f"tree {'ab' * 20}\ncommand pytest\n")
    assert "(cached)\n" in text and "bad ? byte" in text


def test_a_search_records_its_run_only_through_the_run_directory(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("x = 0\n")
    run = RunDir.create(tmp_path / "runs", "r", {})
    agents = {
        "one": ScriptedAgent([{"write": "a.py", "content": "x = 1\n"}]),
        "same": ScriptedAgent([{"write": "a.py", "content": "x = 0\n"}]),
    }
    controller = Controller(
        store=MemoryStore(ws),
        strategies={n: Strategy(n, {}) for n in agents},
        make_agent=lambda st: agents[st.name],
        scorer=FunctionScorer(lambda files: 0.5 if files["a.py"] == "x = 1\n" else 0.0),
        policy=make_policy("bfs"),
        budget=Budget(expansions=2),
        sink=run,
    )
    controller.start()
    out = controller.run()
    run.close()
    files = sorted(str(p.relative_to(run.path)) for p in run.path.rglob("*") if p.is_file())
    root, child = G.root_of(out.graph), out.best
    assert files == sorted(
        [
            "config.yaml",
            "events.jsonl",
            f"tests/{child[:12]}.log",
            f"tests/{root[:12]}.log",
            "timings.jsonl",
            "transcripts/0000-one.json",
            "transcripts/0000-one.session.jsonl",
            "transcripts/0001-same.json",
            "transcripts/0001-same.session.jsonl",
        ]
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs", "ws"]
    _run, g, _ = load_run_graph(run.path)
    assert G.to_json(g) == G.to_json(out.graph)


def test_load_run_graph_says_a_log_without_its_root_is_damaged(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "r", {})
    with pytest.raises(RunError, match="no root node yet"):
        run.append({"event": "run_started"})
        load_run_graph(run.path)
    run.append({"event": "expansion", "parent": "a", "strategy": "s", "child": "b", "path": []})
    run.close()
    with pytest.raises(RunError, match="an expansion before its root: it is damaged"):
        load_run_graph(run.path)
