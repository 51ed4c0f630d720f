"""A whole search over the demo project driven by the llm agent and a real chat-completions
server on 127.0.0.1; then the same search replayed offline from the recording, server off."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")

from fake_llm_server import FakeLLMServer, Reply, call, tool_reply  # noqa: E402

from treesearch.app import run_from_config  # noqa: E402
from treesearch.search import graph as G  # noqa: E402

DEMO = Path(__file__).resolve().parent.parent / "experiments" / "demo" / "project"
KEY = "sk-test-SECRET-search-42"
KEY_ENV = "TS_TEST_LLM_KEY"
FIXES = {
    "tests/test_parse.py": ("invoice/parse.py", "text.splitlines()[1:]", "text.splitlines()"),
    "tests/test_pricing.py": ("invoice/pricing.py", "item.qty > BULK", "item.qty >= BULK"),
    "tests/test_report.py": ("invoice/report.py", "reverse=False", "reverse=True"),
}


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


def one_fix_per_expansion(body: dict[str, Any], n: int) -> Reply:
    """A model that runs the tests, fixes the bug behind the first failing test file, finishes."""
    tools = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    if not tools:
        return tool_reply(call("run_tests", _id=f"c{n}"), usage=(700, 10))
    if len(tools) == 1:
        for test_file, (path, old, new) in FIXES.items():
            if test_file in tools[0]:
                return tool_reply(
                    call("replace_in_file", _id=f"c{n}", path=path, old=old, new=new),
                    content=f"{test_file} fails; fixing {path}.",
                    usage=(900, 40),
                )
    return tool_reply(call("finish", _id=f"c{n}", summary="one fix"), usage=(1000, 5))


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(one_fix_per_expansion) as s:
        yield s


def config(tmp_path: Path, base_url: str, **agent: Any) -> dict[str, Any]:
    return {
        "workspace": {"path": str(DEMO), "copy": True},
        "store": {
            "home": str(tmp_path / "home"),
            "excludes": ["__pycache__/", ".pytest_cache/", "*.pyc"],
        },
        "task": "Fix the failing tests.",
        "strategies": {
            "minimal": {
                "kind": "llm",
                "model": "fake-model",
                "base_url": base_url,
                "api_key_env": KEY_ENV,
                "instructions": "Make the smallest change that fixes the first failing test.",
                "cache": str(tmp_path / "llm-cache"),
                "retry_backoff": 0.01,
                "max_steps": 8,
                "samples": 1,
                **agent,
            }
        },
        "scoring": {
            "search_tests": {
                "command": "python -m pytest -q",
                "timeout": 60,
                "env": {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
            },
            "score": "pass_fraction",
        },
        "search": {
            "policy": "best_first",
            "seed": 0,
            "stop_on_perfect": True,
            "budget": {"expansions": 4},
        },
        "output": {"runs_dir": str(tmp_path / "runs")},
    }


def test_llm_search_fixes_the_demo_project_and_replays_it_offline(
    server: FakeLLMServer, tmp_path: Path
) -> None:
    """Three expansions each fix one bug (score rises to 1.0); with the server switched off,
    replay: true rebuilds the identical graph from the recording."""
    recorded = run_from_config(
        config(tmp_path, server.base_url), base_dir=tmp_path, runs_dir=tmp_path / "runs-1"
    )
    assert recorded.best_score == 1.0, recorded.stop_reason
    path = G.path_to(recorded.graph, recorded.best)
    assert len(path) == 4  # root and one node per fixed bug
    for file, _, new in FIXES.values():
        assert f"+++ b/{file}" in recorded.patch and new in recorded.patch
    assert recorded.usage.tokens == 3 * (710 + 940 + 1005)
    requests_sent = len(server.requests)
    assert requests_sent == 9

    # The first expansion's prompt is the root's; later ones carry the path from the root.
    later = [b["messages"][1]["content"] for b in server.requests if len(b["messages"]) == 2]
    assert "This is the original code" in later[0]
    assert "1. minimal: score" in later[1] and "2. minimal: score" in later[2]

    # Nothing in the run directory holds the key.
    for written in recorded.run_dir.rglob("*"):
        if written.is_file():
            assert KEY.encode() not in written.read_bytes(), written
    transcripts = sorted((recorded.run_dir / "transcripts").glob("*-minimal.json"))
    assert len(transcripts) == 3
    first = json.loads(transcripts[0].read_text())
    assert [e["event"] for e in first["transcript"]].count("request") == 3
    assert first["transcript"][-1]["event"] == "usage"

    server.stop()
    replayed = run_from_config(
        config(tmp_path, server.base_url, replay=True),
        base_dir=tmp_path,
        runs_dir=tmp_path / "runs-2",
    )
    assert replayed.workspace != recorded.workspace
    assert G.to_json(replayed.graph, stable=True) == G.to_json(recorded.graph, stable=True)
    assert replayed.best == recorded.best and replayed.patch == recorded.patch
    assert replayed.usage.tokens == recorded.usage.tokens
    assert len(server.requests) == requests_sent


def test_llm_search_replay_without_a_recording_fails_each_expansion_clearly(
    tmp_path: Path,
) -> None:
    """Replay of a search never recorded: no request is sent, each edge fails naming the miss."""
    outcome = run_from_config(
        config(tmp_path, "http://127.0.0.1:9/v1", replay=True),
        base_dir=tmp_path,
        runs_dir=tmp_path / "runs",
    )
    edges = list(outcome.graph.nodes(data=True))
    assert outcome.best_score is not None and outcome.best_score < 1.0
    reasons = [
        e.get("reason") or ""
        for _, data in edges
        for e in data.get("noops", []) + data.get("errors", [])
    ]
    reasons += [d.get("reason") or "" for _, _, d in outcome.graph.edges(data=True)]
    assert reasons and all("replay: the recording has no response" in r for r in reasons)


def _dead_url() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


@pytest.mark.parametrize("problem", ["unreachable", "wrong_model", "missing_key"])
def test_llm_search_with_a_broken_model_setup_records_agent_errors_not_noops(
    problem: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (issue #12 item 7): a dead server, an unknown model (HTTP 404) and a missing
    API key each showed as a silent ``noop``; each is an ``error`` with its reason."""

    def not_found(body: dict[str, Any], n: int) -> Reply:
        message = f"The model `{body['model']}` does not exist"
        return Reply({"error": {"message": message, "code": "model_not_found"}}, 404)

    with FakeLLMServer(not_found) as s404:
        url = _dead_url() if problem == "unreachable" else s404.base_url
        if problem == "missing_key":
            monkeypatch.delenv(KEY_ENV)
        cfg = config(tmp_path, url, cache=False, samples=5)
        cfg["search"]["budget"] = {"expansions": 2}
        out = run_from_config(cfg)
    expected = {
        "unreachable": "connection refused",
        "wrong_model": "HTTP 404",
        "missing_key": f"{KEY_ENV} (config field api_key_env) is not set",
    }[problem]
    root = G.root_of(out.graph)
    assert out.graph.nodes[root]["noops"] == []
    reasons = [e["reason"] for e in out.graph.nodes[root]["errors"]]
    assert len(reasons) == 2 and all(expected in r for r in reasons), reasons
    summary = json.loads((out.run_dir / "summary.json").read_text())
    assert summary["agent_errors"]["every_expansion_failed"] is True
    [(reason, count)] = summary["agent_errors"]["by_reason"].items()
    assert count == 2 and expected in reason
