"""Agent errors in a search: an error is its own outcome, counted, shown, and never exit 0 when
it is all the search did (issue #12, items 7 and 8). Real store, real agents, real subprocesses."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from test_search import config, make_project, replace, run

from treesearch.app import load_run_graph


def _free_port() -> int:
    """A loopback port nothing listens on (bound, then closed: connecting is refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _only(cfg: dict[str, Any], **strategies: dict[str, Any]) -> dict[str, Any]:
    cfg["strategies"] = strategies
    return cfg


def _cli_run(cfg: dict[str, Any], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "search.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return subprocess.run(
        [sys.executable, "-m", "treesearch", "run", str(path), "--no-patch"],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_scripted_replace_of_missing_text_is_an_error_outcome_not_a_noop(tmp_path: Path) -> None:
    proj = make_project(tmp_path)
    cfg = _only(
        config(tmp_path, proj, policy="bfs", stop_on_perfect=False, budget={"expansions": 2}),
        **{"never-applies": dict(replace("calc.py", "no such text", "x"), samples=2)},
    )
    cfg["search"]["max_consecutive_errors"] = None
    out = run(cfg, tmp_path)
    root = out.graph.graph["root"]
    assert out.graph.nodes[root]["noops"] == []
    errors = out.graph.nodes[root]["errors"]
    assert [e["strategy"] for e in errors] == ["never-applies", "never-applies"]
    assert all("found 0 matches" in e["reason"] for e in errors)
    events = [
        json.loads(line)
        for line in (out.run_dir / "events.jsonl").read_text().splitlines()
        if '"expansion"' in line
    ]
    assert [e["outcome"] for e in events] == ["error", "error"]
    summary = json.loads((out.run_dir / "summary.json").read_text())
    errs = summary["agent_errors"]
    assert errs["count"] == 2 and errs["expansions"] == 2 and errs["every_expansion_failed"]
    assert list(errs["by_reason"].values()) == [2]
    # The graph rebuilt from the events (``show``, ``resume``) keeps them as errors.
    _run, g, _ = load_run_graph(out.run_dir)
    assert len(g.nodes[root]["errors"]) == 2 and g.nodes[root]["noops"] == []


def test_scripted_replace_with_check_false_that_does_not_apply_is_a_noop_not_an_error(
    tmp_path: Path,
) -> None:
    """A candidate fix declared ``check: false`` (the demo's) that finds no text to replace
    changes nothing: a no-op edge, never an agent error."""
    proj = make_project(tmp_path)
    strategy = replace("calc.py", "no such text", "x")
    strategy["steps"][0]["check"] = False
    cfg = _only(
        config(tmp_path, proj, policy="bfs", stop_on_perfect=False, budget={"expansions": 2}),
        **{"not-here": dict(strategy, samples=2)},
    )
    out = run(cfg, tmp_path)
    root = out.graph.graph["root"]
    assert out.graph.nodes[root]["errors"] == []
    assert [n["strategy"] for n in out.graph.nodes[root]["noops"]] == ["not-here", "not-here"]
    summary = json.loads((out.run_dir / "summary.json").read_text())
    assert summary["agent_errors"]["count"] == 0


def test_cli_search_where_every_expansion_errors_exits_3_and_says_why(tmp_path: Path) -> None:
    proj = make_project(tmp_path)
    cfg = _only(
        config(tmp_path, proj, policy="bfs", stop_on_perfect=False, budget={"expansions": 2}),
        missing=dict(replace("nosuchfile.py", "a", "b"), samples=2),
    )
    done = _cli_run(cfg, tmp_path)
    assert done.returncode == 3, done.stderr
    assert "missing -> error: " in done.stderr  # the progress line
    assert "every expansion failed with an agent error" in done.stderr
    assert "agent errors: 2 of 2 expansions failed" in done.stdout
    assert "nosuchfile.py" in done.stdout
    run_dir = Path(done.stdout.split("run directory: ")[1].split()[0])
    show = subprocess.run(
        [sys.executable, "-m", "treesearch", "show", str(run_dir)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "(2 error)" in show.stdout
    assert "! error x2 via missing: " in show.stdout and "nosuchfile.py" in show.stdout


def test_cli_search_with_some_errors_and_some_progress_exits_0_and_counts_them(
    tmp_path: Path,
) -> None:
    proj = make_project(tmp_path)
    cfg = _only(
        config(tmp_path, proj, policy="bfs", stop_on_perfect=False, budget={"expansions": 2}),
        **{
            "fix-add": replace("calc.py", "return a - b", "return a + b"),
            "never-applies": replace("calc.py", "no such text", "x"),
        },
    )
    done = _cli_run(cfg, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "agent errors: 1 of 2 expansions failed" in done.stdout


def test_search_stops_after_max_consecutive_identical_agent_errors(tmp_path: Path) -> None:
    proj = make_project(tmp_path)
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    llm = {"kind": "llm", "model": "m", "base_url": dead, "api_key_env": None, "cache": False}
    cfg = _only(
        config(tmp_path, proj, policy="bfs", stop_on_perfect=False, budget={"expansions": 10}),
        llm=dict(llm, samples=10),
    )
    out = run(cfg, tmp_path)
    assert out.stop_reason == "max_consecutive_errors"
    assert out.usage.expansions == 3  # the default
    summary = json.loads((out.run_dir / "summary.json").read_text())
    assert "3 times in a row" in summary["stop_detail"]
    assert "connection refused" in summary["stop_detail"].lower()
    assert summary["agent_errors"]["every_expansion_failed"]


def test_max_consecutive_errors_counts_only_identical_errors_in_a_row(tmp_path: Path) -> None:
    proj = make_project(tmp_path)
    cfg = _only(
        config(tmp_path, proj, policy="bfs", stop_on_perfect=False, budget={"expansions": 6}),
        **{
            "a-missing": replace("nosuch-a.py", "a", "b"),
            "b-missing": replace("nosuch-b.py", "a", "b"),
        },
    )
    cfg["search"]["max_consecutive_errors"] = 2
    out = run(cfg, tmp_path)
    # a, b, (a and b exhausted at the root: search space exhausted) - never two alike in a row
    assert out.stop_reason != "max_consecutive_errors"
    cfg2 = _only(
        config(
            tmp_path / "two", make_project(tmp_path / "two"), policy="bfs", stop_on_perfect=False
        ),
        same=dict(replace("nosuch.py", "a", "b"), samples=5),
    )
    cfg2["search"]["max_consecutive_errors"] = 2
    out2 = run(cfg2, tmp_path)
    assert out2.stop_reason == "max_consecutive_errors" and out2.usage.expansions == 2


def test_resume_after_a_stop_on_repeated_errors_counts_errors_again_from_zero(
    tmp_path: Path,
) -> None:
    """A user who fixed the cause (e.g. started the server) and resumes gets a search, not the
    same stop at once."""
    from treesearch.app import resume

    proj = make_project(tmp_path)
    cfg = _only(
        config(tmp_path, proj, policy="bfs", stop_on_perfect=False, budget={"expansions": 10}),
        same=dict(replace("nosuch.py", "a", "b"), samples=10),
    )
    cfg["search"]["max_consecutive_errors"] = 2
    out = run(cfg, tmp_path)
    assert out.stop_reason == "max_consecutive_errors" and out.usage.expansions == 2
    again = resume(out.run_dir)
    assert again.stop_reason == "max_consecutive_errors" and again.usage.expansions == 4


def test_failed_run_that_kept_completed_steps_is_a_new_node_counted_as_an_agent_error(
    tmp_path: Path,
) -> None:
    """A run that failed after useful steps keeps them (a new, scored node): its failure is
    counted, but the search did search, so it is not "every expansion failed"."""
    proj = make_project(tmp_path)
    partial = {
        "kind": "scripted",
        "steps": [
            {"replace": "calc.py", "old": "return a - b", "new": "return a + b"},
            {"replace": "calc.py", "old": "no such text", "new": "x"},
        ],
    }
    cfg = _only(
        config(tmp_path, proj, policy="bfs", stop_on_perfect=False, budget={"expansions": 1}),
        partial=partial,
    )
    out = run(cfg, tmp_path)
    root = out.graph.graph["root"]
    [child] = list(out.graph.successors(root))
    edge = out.graph.edges[root, child]
    assert edge["status"] == "failed" and "found 0 matches" in edge["reason"]
    errs = json.loads((out.run_dir / "summary.json").read_text())["agent_errors"]
    assert errs["count"] == 1 and errs["without_new_state"] == 0
    assert errs["every_expansion_failed"] is False


def test_failed_runs_that_keep_useful_steps_do_not_count_toward_max_consecutive_errors(
    tmp_path: Path,
) -> None:
    """A run that timed out or failed after useful steps made progress: not a stop reason."""
    proj = make_project(tmp_path)
    steps = [
        {"write": "notes.txt", "content": "attempt\n"},
        {"replace": "calc.py", "old": "no such text", "new": "x"},
    ]
    cfg = _only(
        config(tmp_path, proj, policy="bfs", stop_on_perfect=False, budget={"expansions": 3}),
        partial={"kind": "scripted", "steps": steps, "samples": 3},
    )
    cfg["search"]["max_consecutive_errors"] = 2
    out = run(cfg, tmp_path)
    assert out.stop_reason != "max_consecutive_errors" and out.usage.expansions == 3
