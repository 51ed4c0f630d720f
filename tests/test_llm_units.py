"""The llm agent's pieces without a server: config checking, prompt templates, text-mode parsing,
request keys (deterministic across processes, blind to volatile text only), the response cache,
reply parsing, and the package's public names."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import treesearch.agents.llm as llm
from treesearch.agents import build_agent
from treesearch.agents.llm.client import ModelRequestError, parse_reply
from treesearch.agents.llm.prompts import Prompts, parse_text_reply, render
from treesearch.agents.llm.replay import ResponseCache, mask_volatile, request_key
from treesearch.config import agent_config, load_config
from treesearch.errors import AgentError

ROOT = Path(__file__).resolve().parent.parent

REQUEST: dict[str, Any] = {
    "model": "m",
    "temperature": 0.2,
    "max_tokens": 512,
    "seed": 7,
    "messages": [
        {"role": "system", "content": "Be brief. Ünïcode ✓"},
        {"role": "user", "content": "Tests: 2 failed (status failed, exit code 1, 0.3 s)"},
        {"role": "tool", "tool_call_id": "a", "content": "/tmp/ws-1/x.py failed in 0.05s"},
    ],
    "tools": [{"type": "function", "function": {"name": "finish", "parameters": {}}}],
}


def test_public_names_are_exactly_all() -> None:
    public = {n for n in dir(llm) if not n.startswith("_")} - {
        "agent",
        "client",
        "config",
        "judge",
        "prompts",
        "replay",
        "annotations",
    }
    assert public == set(llm.__all__)


# --- config ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, "field 'model' is required"),
        ({"model": "m", "temprature": 0}, "unknown field 'temprature'; allowed fields: model:"),
        ({"model": "m", "temperature": -1}, "field 'temperature' must be a number >= 0"),
        ({"model": "m", "temperature": True}, "field 'temperature' must be a number"),
        ({"model": "m", "retries": 1.5}, "field 'retries' must be an integer >= 0"),
        ({"model": "m", "request_timeout": 0}, "field 'request_timeout' must be a number > 0"),
        ({"model": "m", "mode": "chat"}, "field 'mode' must be 'tools'"),
        ({"model": "m", "api_key_env": ""}, "field 'api_key_env' must be"),
        ({"model": "m", "extra_body": {"messages": []}}, "extra_body may not set messages"),
        (
            {"model": "m", "prompts": {"sytem": "x"}},
            "prompts.sytem: unknown field; allowed: system, task,",
        ),
        ({"model": "m", "prompts": {"task": "{task} {tsk}"}}, "unknown placeholder {tsk}"),
        ({"model": "m", "cache": 3}, "field 'cache' must be a folder path or false"),
        ({"model": "m", "cache": False, "replay": True}, "'replay: true' needs a cache"),
        ({"model": "m", "replay": "yes"}, "field 'replay' must be true or false"),
    ],
)
def test_llm_config_errors_name_the_field(fields: dict[str, Any], expected: str) -> None:
    with pytest.raises(AgentError) as err:
        build_agent({"kind": "llm", **fields})
    assert expected in str(err.value)


def test_llm_config_reads_every_documented_field() -> None:
    agent = build_agent(
        {
            "kind": "llm",
            "model": "m",
            "base_url": "http://127.0.0.1:1/v1",
            "api_key_env": None,
            "temperature": 0.5,
            "max_tokens": None,
            "seed": 3,
            "extra_body": {"top_p": 0.9},
            "request_timeout": 5,
            "retries": 0,
            "retry_backoff": 0,
            "retry_max_wait": 2,
            "input_price": 3,
            "output_price": 15,
            "token_limit": 1000,
            "cost_limit": 0.5,
            "context_tokens": 9000,
            "observation_chars": 500,
            "command_timeout": 20,
            "mode": "text",
            "instructions": "Be bold.",
            "prompts": {"feedback": "Results:\n{feedback}"},
            "cache": "~/llm-cache",
            "replay": True,
        }
    )
    cfg = agent.config  # type: ignore[attr-defined]
    assert cfg.api_key_env is None and cfg.max_tokens is None and cfg.mode == "text"
    assert cfg.prompts.feedback == "Results:\n{feedback}"
    assert cfg.prompts.system == Prompts().system
    assert cfg.cache_folder == Path("~/llm-cache").expanduser() and cfg.replay


def test_bundled_llm_config_validates_with_three_strategies_on_one_model() -> None:
    loaded = load_config(ROOT / "configs" / "llm.yaml")
    agents = {name: agent_config(s) for name, s in loaded.config.strategies.items()}
    assert set(agents) == {"minimal", "rewrite", "test-first"}
    assert len({a["model"] for a in agents.values()}) == 1
    assert len({a["instructions"] for a in agents.values()}) == 3
    assert all(a["kind"] == "llm" for a in agents.values())


# --- prompts --------------------------------------------------------------------------------------


def test_render_replaces_known_placeholders_only() -> None:
    text = render("{task}: {x} {} {'a': 1} {task}", {"task": "T"})
    assert text == "T: {x} {} {'a': 1} T"


@pytest.mark.parametrize(
    ("content", "kind", "text"),
    [
        ("Look:\n```bash\nls -la\n```", "run", "ls -la"),
        ("```\nfinish\n```", "finish", ""),
        ("```sh\n  run_tests \n```", "run_tests", ""),
        ("no block here", "error", "holds 0 fenced code blocks"),
        ("```\na\n```\n```\nb\n```", "error", "holds 2 fenced code blocks"),
        ("```bash\n\n```", "error", "empty"),
        (None, "error", "holds 0"),
    ],
)
def test_parse_text_reply(content: str | None, kind: str, text: str) -> None:
    action = parse_text_reply(content)
    assert action.kind == kind
    assert text in action.text if text else action.text == ""


# --- request keys ---------------------------------------------------------------------------------


def test_request_key_is_the_same_in_another_process() -> None:
    """Canonical JSON: a fresh interpreter (other hash seed, other dict history) agrees."""
    here = request_key(REQUEST, sample={"node": "ab", "attempt": 1}, volatile_paths=["/tmp/ws-1"])
    code = (
        "import json, sys\n"
        "from treesearch.agents.llm.replay import request_key\n"
        "req = json.loads(sys.stdin.read())\n"
        "req = dict(reversed(list(req.items())))\n"
        "print(request_key(req, sample={'attempt': 1, 'node': 'ab'},"
        " volatile_paths=['/tmp/ws-1']))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(REQUEST),
        capture_output=True,
        text=True,
        env={"PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin"},
        cwd=ROOT,
        check=True,
        timeout=60,
    )
    assert proc.stdout.strip() == here


def variant(**changes: Any) -> dict[str, Any]:
    req = json.loads(json.dumps(REQUEST))
    req.update(changes)
    return req


def test_request_key_ignores_only_volatile_text() -> None:
    base = request_key(REQUEST, volatile_paths=["/tmp/ws-1"])
    moved = json.loads(json.dumps(REQUEST).replace("/tmp/ws-1", "/var/tmp/other"))
    moved["messages"][1]["content"] = moved["messages"][1]["content"].replace("0.3 s", "12.9 s")
    moved["messages"][2]["content"] = moved["messages"][2]["content"].replace("0.05s", "1.2s")
    assert request_key(moved, volatile_paths=["/var/tmp/other"]) == base
    changed = [
        variant(temperature=0.3),
        variant(model="m2"),
        variant(seed=8),
        variant(max_tokens=513),
        variant(tools=[]),
        variant(top_p=0.9),
        variant(messages=REQUEST["messages"][:2]),
        variant(messages=[*REQUEST["messages"][:2], {"role": "tool", "content": "2 failed"}]),
    ]
    keys = {request_key(r, volatile_paths=["/tmp/ws-1"]) for r in changed}
    assert base not in keys and len(keys) == len(changed)
    assert request_key(REQUEST, sample={"attempt": 1}, volatile_paths=["/tmp/ws-1"]) != base


def test_mask_volatile_masks_paths_durations_and_addresses() -> None:
    text = "/w/x.py: <Item at 0x7f3a2b1c4d50> took 0.31 s, in 0.05s, 12ms; keep 3 items, v0.3"
    assert mask_volatile(text, ["/w"]) == (
        "<workspace>/x.py: <Item at <address>> took <duration>, in <duration>, <duration>; "
        "keep 3 items, v0.3"
    )


def test_mask_volatile_masks_the_test_runners_own_report_files() -> None:
    """pytest -v prints the JUnit file the runner asked for: a new name in every run, so a
    replayed search whose feedback holds it would never find its recording."""
    one = "- generated xml file: /tmp/treesearch-0/score-29011-4200577-f3-jyie4zli/junit-29011-1.xml -"
    two = "- generated xml file: /tmp/treesearch-0/score-29134-4202533-f3-w_oz3a3s/junit-29134-1.xml -"
    assert mask_volatile(one) == mask_volatile(two) == "- generated xml file: <report> -"
    # A project's own report under a folder of another name stays as it is.
    assert mask_volatile("wrote /w/reports/junit-1.xml") == "wrote /w/reports/junit-1.xml"


# --- cache and replies ----------------------------------------------------------------------------


def test_response_cache_round_trip_and_damaged_entries(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c")
    key = request_key(REQUEST)
    assert cache.get(key) is None
    path = cache.put(key, REQUEST, {"choices": []})
    assert cache.get(key) == {"choices": []} and cache.keys() == [key]
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left
    path.write_text("{not json")
    assert cache.get(key) is None
    with pytest.raises(AgentError):
        cache.get("../../etc/passwd")


def test_parse_reply_estimates_missing_usage_and_refuses_non_completions() -> None:
    reply = parse_reply(
        {"choices": [{"message": {"content": "x" * 40}, "finish_reason": "stop"}]}, 400
    )
    assert (reply.tokens_in, reply.tokens_out, reply.estimated) == (100, 11, True)
    assert reply.tool_calls == [] and reply.finish_reason == "stop"
    bad_replies: list[Any] = [
        {"choices": []},
        {"error": "x"},
        {"choices": [{"message": None}]},
        [1],
    ]
    for bad in bad_replies:
        with pytest.raises(ModelRequestError):
            parse_reply(bad, 10)
