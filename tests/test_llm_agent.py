"""The llm agent against a real chat-completions server on 127.0.0.1 (tests/fake_llm_server.py):
tool calls on the demo project, malformed replies, retries, timeouts, path escapes, limits, the
context budget, text mode, recording and offline replay. No test reaches the internet."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")

from fake_llm_server import (  # noqa: E402
    FakeLLMServer,
    Reply,
    ScriptFn,
    call,
    error_reply,
    sequence,
    text_reply,
    tool_reply,
)

from treesearch import sandbox  # noqa: E402
from treesearch.agents import (  # noqa: E402
    AgentContext,
    AgentResult,
    AgentStatus,
    build_agent,
    run_agent,
)
from treesearch.agents.llm import LLMAgent, requests_from_transcript  # noqa: E402
from treesearch.session import TransactionalSession  # noqa: E402
from treesearch.store import ShadowStore  # noqa: E402

DEMO = Path(__file__).resolve().parent.parent / "experiments" / "demo" / "project"
KEY = "sk-test-SECRET-0123456789"
KEY_ENV = "TS_TEST_LLM_KEY"
PARSE_FIX = {"path": "invoice/parse.py", "old": "text.splitlines()[1:]", "new": "text.splitlines()"}


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    # A proxy configured on the machine must not capture loopback traffic.
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    target = tmp_path / "ws"
    shutil.copytree(DEMO, target, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    return target


@pytest.fixture
def store(ws: Path, tmp_path: Path) -> Iterator[ShadowStore]:
    s = ShadowStore.open(ws, home=tmp_path / "home")
    yield s
    s.close()


@pytest.fixture
def session(store: ShadowStore, tmp_path: Path) -> TransactionalSession:
    return TransactionalSession.create(store, tmp_path / "session.jsonl", timeout=30)


@pytest.fixture
def serve() -> Iterator[Callable[[ScriptFn], FakeLLMServer]]:
    servers: list[FakeLLMServer] = []

    def start(script: ScriptFn) -> FakeLLMServer:
        server = FakeLLMServer(script)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def agent_for(server: FakeLLMServer | None, tmp_path: Path, **fields: Any) -> LLMAgent:
    config: dict[str, Any] = {
        "kind": "llm",
        "model": "fake-model",
        "base_url": server.base_url if server else "http://127.0.0.1:9/v1",
        "api_key_env": KEY_ENV,
        "cache": str(tmp_path / "llm-cache"),
        "retry_backoff": 0.01,
        "request_timeout": 10,
    }
    config.update(fields)
    agent = build_agent(config)
    assert isinstance(agent, LLMAgent)
    return agent


def pytest_feedback(workspace: Path) -> str:
    """A real test run of the demo project (what the controller's run_tests gives, roughly)."""
    # No __pycache__ in the workspace, as the scorer's runs (else the tree depends on the path).
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    res = sandbox.run(
        ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x"],
        workspace,
        timeout=60,
        env=env,
    )
    return f"exit code {res.exit_code}\n{res.stdout[-2000:]}"


def run(agent: LLMAgent, session: TransactionalSession, **kw: Any) -> AgentResult:
    kw.setdefault("task", "Fix the failing tests.")
    kw.setdefault("timeout", 60.0)
    kw.setdefault("max_steps", 8)
    return run_agent(agent, AgentContext(session=session, **kw))


def tool_messages(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def events(result: AgentResult, kind: str) -> list[dict[str, Any]]:
    return [e for e in result.transcript if e["event"] == kind]


# --- the normal path --------------------------------------------------------------------------------


def test_llm_agent_fixes_the_demo_bug_through_tool_calls(
    serve: Callable[[ScriptFn], FakeLLMServer],
    session: TransactionalSession,
    ws: Path,
    tmp_path: Path,
) -> None:
    """Read, edit, run the tests, finish: the edit lands on disk as a session step, tokens and
    cost are counted, and the transcript rebuilds exactly the requests the server received."""
    server = serve(
        sequence(
            [
                tool_reply(call("read_file", path="invoice/parse.py"), usage=(1000, 50)),
                tool_reply(
                    call("replace_in_file", **PARSE_FIX), content="Off by one.", usage=(1200, 60)
                ),
                tool_reply(call("run_tests"), usage=(1300, 10)),
                tool_reply(call("finish", summary="parse keeps the first line"), usage=(1400, 20)),
            ]
        )
    )
    agent = agent_for(server, tmp_path, input_price=2.0, output_price=10.0)
    result = run(agent, session, run_tests=lambda: pytest_feedback(ws), feedback=("3 failed",))

    assert result.status is AgentStatus.FINISHED, result.reason
    assert "text.splitlines():" in (ws / "invoice" / "parse.py").read_text()
    assert result.steps == 4
    assert (result.cost.tokens_in, result.cost.tokens_out) == (4900, 140)
    usage = events(result, "usage")[-1]
    assert usage["cost_usd"] == pytest.approx((4900 * 2.0 + 140 * 10.0) / 1e6)
    assert usage["requests"] == 4 and usage["from_cache"] == 0
    assert events(result, "finish")[0]["summary"] == "parse keeps the first line"
    # The model saw the file, then the test results after its edit.
    assert "splitlines()[1:]" in tool_messages(server.requests[1])[0]
    assert "Test results of the current code" in tool_messages(server.requests[3])[-1]
    assert "exit code 1" in tool_messages(server.requests[3])[-1]  # two bugs are left
    # Recording: the transcript holds every request as sent, and every response.
    assert requests_from_transcript(result.transcript) == server.requests
    assert [e["response"] for e in events(result, "response")][0]["usage"]["prompt_tokens"] == 1000
    # The task prompt carries the task and the current test feedback.
    first_user = server.requests[0]["messages"][1]["content"]
    assert "Fix the failing tests." in first_user and "3 failed" in first_user
    assert [t["function"]["name"] for t in server.requests[0]["tools"]] == [
        "read_file",
        "list_dir",
        "write_file",
        "replace_in_file",
        "run",
        "run_tests",
        "finish",
    ]


def test_llm_agent_sends_the_key_but_never_records_it(
    serve: Callable[[ScriptFn], FakeLLMServer], session: TransactionalSession, tmp_path: Path
) -> None:
    """The key from the api_key_env variable is the bearer token; it is in no transcript, cache
    entry or session file."""
    server = serve(sequence([tool_reply(call("finish", summary="nothing to do"))]))
    result = run(agent_for(server, tmp_path), session)
    assert result.status is AgentStatus.FINISHED, result.reason
    auth = {k.lower(): v for k, v in server.headers[0].items()}["authorization"]
    assert auth == f"Bearer {KEY}"
    written = [p for p in tmp_path.rglob("*") if p.is_file() and "home" not in p.parts]
    assert any(p.suffix == ".json" for p in written)  # the cache entry
    for path in written:
        assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in json.dumps(result.to_json())


def test_llm_agent_prompt_carries_history_siblings_and_instructions(
    serve: Callable[[ScriptFn], FakeLLMServer], session: TransactionalSession, tmp_path: Path
) -> None:
    """A re-expanded node's prompt tells the model what its siblings tried, so it can differ."""
    server = serve(sequence([tool_reply(call("finish", summary="-"))] * 2))
    agent = agent_for(server, tmp_path, instructions="Change as few lines as possible.")
    history = (
        {
            "strategy": "minimal",
            "score": 0.5,
            "summary": "4 failed, 6 passed (failed)",
            "diffstat": "1 files, +1 -1",
        },
    )
    run(agent, session, history=history, feedback=("old", "FAILED tests/test_pricing.py::t"))
    siblings = ({"strategy": "rewrite", "outcome": "noop", "score": 0.5, "summary": ""},)
    run(agent, session, history=history, siblings=siblings, attempt=1, feedback=("x",))

    system = server.requests[0]["messages"][0]["content"]
    first = server.requests[0]["messages"][1]["content"]
    second = server.requests[1]["messages"][1]["content"]
    assert "Change as few lines as possible." in system
    assert "1. minimal: score 0.50; tests 4 failed, 6 passed (failed); changed 1 files" in first
    assert "FAILED tests/test_pricing.py::t" in first and "old" not in first
    assert "Other attempts" not in first
    assert "Other attempts already made from this same state" in second
    assert "- rewrite: changed nothing, score 0.50" in second


# --- malformed replies and bad paths -----------------------------------------------------------


def test_llm_agent_answers_malformed_tool_calls_with_error_observations(
    serve: Callable[[ScriptFn], FakeLLMServer],
    session: TransactionalSession,
    ws: Path,
    tmp_path: Path,
) -> None:
    """Invalid JSON arguments, a call without a name and an unknown tool go back to the model as
    errors; nothing crashes and nothing is written."""
    bad_json = call("write_file", _raw='{"path": "new.py", "content": "x = ', _id="c-bad")
    no_name = {"id": "c-anon", "type": "function", "function": {"arguments": "{}"}}
    not_object = call("read_file", _raw='["invoice/parse.py"]', _id="c-list")
    unknown = call("delete_everything", _id="c-unknown")
    server = serve(
        sequence(
            [
                tool_reply(bad_json, no_name, not_object, unknown),
                tool_reply(call("finish", summary="gave it a go")),
            ]
        )
    )
    result = run(agent_for(server, tmp_path), session)

    assert result.status is AgentStatus.FINISHED, result.reason
    assert not (ws / "new.py").exists()
    seen = tool_messages(server.requests[1])
    assert len(seen) == 4
    assert "arguments are not valid JSON" in seen[0] and '"content": "x = ' in seen[0]
    assert "names no function" in seen[1]
    assert "arguments must be a JSON object" in seen[2]
    assert "unknown tool 'delete_everything'" in seen[3] and "read_file" in seen[3]
    # The calls sent back to the model carry valid JSON, so strict servers accept the history.
    sent_calls = server.requests[1]["messages"][-5]["tool_calls"]
    assert [c["id"] for c in sent_calls] == ["c-bad", "c-anon", "c-list", "c-unknown"]
    assert all(json.loads(c["function"]["arguments"]) == {} for c in sent_calls)


def test_llm_agent_refuses_paths_outside_the_workspace(
    serve: Callable[[ScriptFn], FakeLLMServer],
    session: TransactionalSession,
    ws: Path,
    tmp_path: Path,
) -> None:
    """A model asking for ../ or absolute paths gets an error observation; nothing outside the
    workspace is read or written."""
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-CONTENT")
    server = serve(
        sequence(
            [
                tool_reply(
                    call("read_file", path="../secret.txt"),
                    call("read_file", path=str(secret)),
                    call("write_file", path="../escaped.txt", content="x"),
                    call("replace_in_file", path="../secret.txt", old="TOP", new="NO"),
                    call("list_dir", path=".."),
                ),
                tool_reply(call("finish", summary="-")),
            ]
        )
    )
    result = run(agent_for(server, tmp_path), session)

    assert result.status is AgentStatus.FINISHED, result.reason
    seen = tool_messages(server.requests[1])
    assert len(seen) == 5
    assert all("refusing path" in text for text in seen), seen
    assert "TOP-SECRET" not in json.dumps(server.requests[1])
    assert secret.read_text() == "TOP-SECRET-CONTENT"
    assert not (tmp_path / "escaped.txt").exists()


# --- transport: retries and timeouts ---------------------------------------------------------------


def test_llm_agent_retries_after_429_then_succeeds(
    serve: Callable[[ScriptFn], FakeLLMServer], session: TransactionalSession, tmp_path: Path
) -> None:
    """A 429 (with Retry-After) and a 503 are retried; the third attempt's answer is used."""
    server = serve(
        sequence(
            [
                error_reply(429, "slow down", retry_after=0),
                error_reply(503, "overloaded"),
                tool_reply(call("finish", summary="done")),
            ]
        )
    )
    result = run(agent_for(server, tmp_path, retries=2), session)

    assert result.status is AgentStatus.FINISHED, result.reason
    assert len(server.requests) == 3
    assert server.requests[0] == server.requests[2]
    retries = events(result, "retry")
    assert [r["error"] for r in retries] == ["HTTP 429: slow down", "HTTP 503: overloaded"]
    assert retries[0]["wait"] == 0  # Retry-After wins over the backoff
    assert events(result, "response")[0]["attempts"] == 3


def test_llm_agent_fails_when_retries_run_out(
    serve: Callable[[ScriptFn], FakeLLMServer], session: TransactionalSession, tmp_path: Path
) -> None:
    server = serve(lambda body, n: error_reply(500, "broken"))
    result = run(agent_for(server, tmp_path, retries=2), session)
    assert result.status is AgentStatus.FAILED
    assert result.reason is not None and "failed 3 time(s)" in result.reason
    assert "HTTP 500: broken" in result.reason
    assert len(server.requests) == 3


def test_llm_agent_does_not_retry_an_authentication_error_and_scrubs_the_key(
    serve: Callable[[ScriptFn], FakeLLMServer], session: TransactionalSession, tmp_path: Path
) -> None:
    """A 401 fails the run at once; a server echoing the key does not get it into the reason."""
    server = serve(lambda body, n: error_reply(401, f"invalid key {KEY}"))
    result = run(agent_for(server, tmp_path), session)
    assert result.status is AgentStatus.FAILED
    assert result.reason is not None and "HTTP 401" in result.reason
    assert KEY not in result.reason and "invalid key ***" in result.reason
    assert len(server.requests) == 1


def test_llm_agent_retries_a_reply_slower_than_the_request_timeout(
    serve: Callable[[ScriptFn], FakeLLMServer], session: TransactionalSession, tmp_path: Path
) -> None:
    """The first reply takes longer than request_timeout: the request is abandoned and retried."""
    server = serve(sequence([Reply(delay=30.0), tool_reply(call("finish", summary="in time"))]))
    t0 = time.monotonic()
    result = run(agent_for(server, tmp_path, request_timeout=0.5, retries=1), session)
    assert time.monotonic() - t0 < 10
    assert result.status is AgentStatus.FINISHED, result.reason
    assert "no answer within 0.5 s" in events(result, "retry")[0]["error"]


def test_llm_agent_run_deadline_cuts_a_slow_model(
    serve: Callable[[ScriptFn], FakeLLMServer], session: TransactionalSession, tmp_path: Path
) -> None:
    """The run's own timeout bounds the model requests, whatever request_timeout says."""
    server = serve(lambda body, n: Reply(delay=30.0))
    t0 = time.monotonic()
    result = run(agent_for(server, tmp_path, request_timeout=60, retries=5), session, timeout=1.0)
    assert time.monotonic() - t0 < 5
    assert result.status is AgentStatus.FAILED
    assert result.reason is not None and result.reason.startswith("timed out after 1 s")


def test_llm_agent_without_its_key_variable_fails_before_any_request(
    serve: Callable[[ScriptFn], FakeLLMServer],
    session: TransactionalSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(KEY_ENV)
    server = serve(sequence([tool_reply(call("finish", summary="-"))]))
    result = run(agent_for(server, tmp_path), session)
    assert result.status is AgentStatus.FAILED
    assert result.reason is not None and KEY_ENV in result.reason and "not set" in result.reason
    assert server.requests == []


# --- limits ---------------------------------------------------------------------------------------


def test_llm_agent_stops_at_max_steps(
    serve: Callable[[ScriptFn], FakeLLMServer], session: TransactionalSession, tmp_path: Path
) -> None:
    server = serve(lambda body, n: tool_reply(call("list_dir", path=".")))
    result = run(agent_for(server, tmp_path), session, max_steps=3)
    assert result.status is AgentStatus.LIMIT_REACHED
    assert result.reason == "max_steps=3 turns reached"
    assert result.steps == 3 and len(server.requests) == 3


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"token_limit": 2500}, "token_limit=2500 reached (3300 tokens used)"),
        ({"cost_limit": 0.0025, "input_price": 1.0}, "cost_limit=0.0025 USD reached (0.0030"),
    ],
)
def test_llm_agent_stops_at_the_token_and_cost_limits(
    serve: Callable[[ScriptFn], FakeLLMServer],
    session: TransactionalSession,
    tmp_path: Path,
    fields: dict[str, Any],
    reason: str,
) -> None:
    server = serve(lambda body, n: tool_reply(call("list_dir", path="."), usage=(1000, 100)))
    result = run(agent_for(server, tmp_path, **fields), session)
    assert result.status is AgentStatus.LIMIT_REACHED
    assert result.reason is not None and result.reason.startswith(reason)
    assert len(server.requests) == 3 and result.steps == 3


def test_llm_agent_gives_up_after_two_replies_without_action(
    serve: Callable[[ScriptFn], FakeLLMServer], session: TransactionalSession, tmp_path: Path
) -> None:
    server = serve(lambda body, n: text_reply("I am not sure what to do."))
    result = run(agent_for(server, tmp_path), session)
    assert result.status is AgentStatus.GAVE_UP
    assert result.reason is not None and "I am not sure" in result.reason
    assert len(server.requests) == 2
    assert server.requests[1]["messages"][-1]["content"].startswith("You did not call a tool")


def test_llm_agent_shortens_old_observations_to_fit_the_context_budget(
    serve: Callable[[ScriptFn], FakeLLMServer],
    session: TransactionalSession,
    ws: Path,
    tmp_path: Path,
) -> None:
    """Old tool results are cut to head and tail; the latest turns stay whole."""
    (ws / "big.txt").write_text("".join(f"line {i:05d} of a long file\n" for i in range(600)))
    server = serve(
        lambda body, n: tool_reply(
            call("read_file", path="big.txt"), usage=(len(json.dumps(body)) // 4, 10)
        )
    )
    agent = agent_for(server, tmp_path, context_tokens=6000, observation_chars=20000)
    result = run(agent, session, max_steps=5)

    assert result.status is AgentStatus.LIMIT_REACHED
    last = tool_messages(server.requests[-1])
    assert len(last) == 4
    assert "removed to fit the context budget" in last[0]
    assert last[0].startswith("line 00000") and last[0].rstrip().endswith(
        "line 00599 of a long file"
    )
    assert "removed" not in last[-1] and len(last[-1]) > 15000
    assert events(result, "context_shortened")
    # Earlier shortening is kept as it was (a stable prefix), not redone differently.
    assert tool_messages(server.requests[-2])[0] == last[0]


# --- text mode ------------------------------------------------------------------------------------


def test_llm_agent_text_mode_runs_one_shell_block_per_turn(
    serve: Callable[[ScriptFn], FakeLLMServer],
    session: TransactionalSession,
    ws: Path,
    tmp_path: Path,
) -> None:
    fix = "sed -i 's/text.splitlines()\\[1:\\]/text.splitlines()/' invoice/parse.py"
    server = serve(
        sequence(
            [
                text_reply(f"The loop skips a line.\n```bash\n{fix}\n```"),
                text_reply("I think it is fixed now."),
                text_reply("```\nrun_tests\n```"),
                text_reply("```\nfinish\n```"),
            ]
        )
    )
    result = run(
        agent_for(server, tmp_path, mode="text"), session, run_tests=lambda: "2 failed, 8 passed"
    )

    assert result.status is AgentStatus.FINISHED, result.reason
    assert "text.splitlines():" in (ws / "invoice" / "parse.py").read_text()
    assert all("tools" not in body for body in server.requests)
    assert "one fenced shell block" in server.requests[0]["messages"][0]["content"]
    assert server.requests[1]["messages"][-1]["content"].startswith("Output:\nexit code 0")
    assert "exactly one" in server.requests[2]["messages"][-1]["content"]
    assert "2 failed, 8 passed" in server.requests[3]["messages"][-1]["content"]
    assert result.steps == 2


# --- recording and replay -------------------------------------------------------------------------


def fixing_script(body: dict[str, Any], n: int) -> Reply:
    """Run the tests, fix what the first failure points at, run them again, finish."""
    tools = [m for m in body["messages"] if m["role"] == "tool"]
    if not tools:
        return tool_reply(call("run_tests", _id="t1"), usage=(500, 10))
    if len(tools) == 1:
        return tool_reply(call("replace_in_file", _id="t2", **PARSE_FIX), usage=(800, 30))
    if len(tools) == 2:
        # Output that differs between two runs: the folder, and a time figure.
        command = "pwd && python -c 'import time; print(f\"took {time.time() % 9:.4f} s\")'"
        return tool_reply(call("run", _id="t3", command=command), usage=(900, 5))
    return tool_reply(call("finish", _id="t4", summary="fixed parse"), usage=(1000, 5))


def test_llm_agent_replays_a_recorded_run_offline_in_another_folder(
    serve: Callable[[ScriptFn], FakeLLMServer], tmp_path: Path
) -> None:
    """Record against the server, switch it off, replay in a fresh copy at another path (test
    output with other timings and paths): same requests, same tree, same token counts."""
    server = serve(fixing_script)
    results = []
    for name, extra in (("one", {}), ("two", {"replay": True})):
        ws = tmp_path / name / "project"
        shutil.copytree(DEMO, ws, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
        with ShadowStore.open(ws, home=tmp_path / name / "home") as store:
            session = TransactionalSession.create(store)
            agent = agent_for(server, tmp_path, **extra)
            results.append(run(agent, session, run_tests=lambda ws=ws: pytest_feedback(ws)))
        server.stop()

    first, second = results
    assert first.status is second.status is AgentStatus.FINISHED
    assert first.tree == second.tree
    assert (first.cost.tokens_in, first.cost.tokens_out) == (3200, 50)
    assert (second.cost.tokens_in, second.cost.tokens_out) == (3200, 50)
    assert [e["key"] for e in events(first, "request")] == [
        e["key"] for e in events(second, "request")
    ]
    assert events(second, "usage")[0]["from_cache"] == 4
    assert events(second, "usage")[0]["cost_usd_live"] == 0
    assert len(server.requests) == 4  # the replay sent nothing
    outputs = [
        [m["content"] for m in body["messages"] if m["role"] == "tool"][-1]
        for body in (requests_from_transcript(r.transcript)[-1] for r in results)
    ]
    assert outputs[0] != outputs[1] and "took" in outputs[0]  # yet the keys matched


def test_llm_agent_replay_fails_clearly_on_an_unrecorded_request(
    session: TransactionalSession, tmp_path: Path
) -> None:
    agent = agent_for(None, tmp_path, replay=True)
    result = run(agent, session, node="ab" * 20)
    assert result.status is AgentStatus.FAILED
    assert result.reason is not None
    assert result.reason.startswith("replay: the recording has no response for request")
    assert "turn 1 at node abababababab" in result.reason
    assert events(result, "replay_miss")
    assert result.steps == 0


def test_llm_agent_cache_answers_a_repeated_request_without_the_server(
    serve: Callable[[ScriptFn], FakeLLMServer], session: TransactionalSession, tmp_path: Path
) -> None:
    """Outside replay mode the cache is used too; a new sample (attempt) is a new request."""
    server = serve(lambda body, n: tool_reply(call("finish", summary=f"reply {n}")))
    agent = agent_for(server, tmp_path)
    a = run(agent, session, node="c" * 40)
    b = run(agent, session, node="c" * 40)
    c = run(agent, session, node="c" * 40, attempt=1)
    summaries = [events(r, "finish")[0]["summary"] for r in (a, b, c)]
    assert summaries == ["reply 0", "reply 0", "reply 1"]
    assert len(server.requests) == 2
    assert [events(r, "response")[0]["source"] for r in (a, b, c)] == ["live", "cache", "live"]


def test_llm_agent_fails_fast_on_a_refused_connection_without_retrying(
    session: TransactionalSession, tmp_path: Path
) -> None:
    """Regression (issue #12 item 8): a dead server cost 15 s of retries per expansion."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    agent = agent_for(None, tmp_path, base_url=f"http://127.0.0.1:{port}/v1", retries=4)
    result = run(agent, session)
    assert result.status is AgentStatus.FAILED
    assert result.reason is not None and "connection refused" in result.reason
    assert f"127.0.0.1:{port}" in result.reason
    assert events(result, "retry") == []


# --- the context window (issue #12 item 9) ---------------------------------------------------------


def test_llm_agent_shortens_the_history_and_retries_once_on_a_context_length_error(
    session: TransactionalSession, ws: Path, tmp_path: Path
) -> None:
    """Regression: an HTTP 400 context_length_exceeded failed the expansion."""
    (ws / "big.txt").write_text("".join(f"line {i:05d} of a long file\n" for i in range(2000)))
    script = sequence(
        [
            tool_reply(call("read_file", path="big.txt")),
            tool_reply(call("read_file", path="big.txt")),
            tool_reply(call("finish", summary="read it twice")),
        ]
    )
    with FakeLLMServer(script, max_request_chars=40_000) as server:
        # No shortening by the agent's own budget: only the server's refusal triggers it.
        agent = agent_for(server, tmp_path, observation_chars=20_000, context_tokens=10**6)
        result = run(agent, session)
    assert result.status is AgentStatus.FINISHED, result.reason
    assert len(server.too_long) == 1  # the third request, refused once
    [event] = events(result, "context_exceeded")
    assert "context_length_exceeded" in event["error"] or "maximum context" in event["error"]
    assert event["cut"] and event["cut"][0]["role"] == "tool"  # the oldest observation first
    assert all(c["kept"] < c["chars"] for c in event["cut"])
    resent = server.requests[-1]
    assert len(json.dumps(resent)) <= 40_000
    first = tool_messages(resent)[0]
    assert "removed to fit the context budget" in first
    assert first.startswith("line 00000")  # head and tail kept


def test_llm_agent_fails_clearly_when_shortening_once_is_not_enough(
    session: TransactionalSession, tmp_path: Path
) -> None:
    with FakeLLMServer(lambda body, n: tool_reply(call("finish")), max_request_chars=200) as srv:
        result = run(agent_for(srv, tmp_path), session)
    assert result.status is AgentStatus.FAILED
    assert result.reason is not None and "longer than the model's context" in result.reason
    assert len(srv.too_long) <= 2 and srv.requests == []  # asked at most twice, never more


def test_llm_agent_caps_observations_and_text_replies_in_what_it_resends(
    serve: Callable[[ScriptFn], FakeLLMServer],
    session: TransactionalSession,
    ws: Path,
    tmp_path: Path,
) -> None:
    """Regression: a text-only reply was resent whole on every later turn, never shortened."""
    (ws / "big.txt").write_text("B" * 1_000_000)
    long_text = "thinking " * 50_000  # 450 000 characters
    server = serve(
        sequence(
            [
                tool_reply(call("read_file", path="big.txt")),
                text_reply(long_text),
                tool_reply(call("list_dir", path=".")),
                tool_reply(call("finish", summary="done")),
            ]
        )
    )
    result = run(agent_for(server, tmp_path, observation_chars=5000), session)
    assert result.status is AgentStatus.FINISHED, result.reason
    last = server.requests[-1]
    for m in last["messages"]:
        text = m.get("content") or ""
        assert len(text) <= 5000 + 100, (m["role"], len(text))
    [said] = [
        m
        for m in last["messages"]
        if m["role"] == "assistant" and "thinking" in (m["content"] or "")
    ]
    assert "characters cut" in said["content"]
    assert said["content"].startswith("thinking") and said["content"].rstrip().endswith("thinking")
    [obs] = [t for t in tool_messages(last) if t.startswith("B")]
    assert "characters cut" in obs and obs.rstrip().endswith("B")
    # The session keeps the model's reply whole.
    assert any(m.get("content") == long_text for m in session.messages)
