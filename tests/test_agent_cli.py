"""Any agent CLI as a strategy (issue #31, item 3): a ``command`` strategy hands the program the
task, the node's failing tests and their output as files and environment variables, the store
captures its edits, its standard output becomes the transcript, and the tokens it reports count
against the search's budget. The program here is a small fake agent CLI written for the test."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from treesearch.agents.command import read_usage
from treesearch.app import run_from_config

FAKE_CLI = r"""
import json, os, pathlib, sys

env = os.environ
task = pathlib.Path(env["TREESEARCH_TASK_FILE"]).read_text()
feedback = pathlib.Path(env["TREESEARCH_FEEDBACK_FILE"]).read_text()
failing = pathlib.Path(env["TREESEARCH_FAILING_FILE"]).read_text().split()
context = json.loads(pathlib.Path(env["TREESEARCH_CONTEXT_FILE"]).read_text())
print("task:", task.strip())
print("failing:", ",".join(failing))
print("feedback mentions assert:", "assert" in feedback)
print("attempt:", context["attempt"], "workspace:", env["TREESEARCH_WORKSPACE"] == os.getcwd())
ws = pathlib.Path(env["TREESEARCH_WORKSPACE"])
src = (ws / "m.py").read_text()
if any(t.endswith("test_add") for t in failing):
    (ws / "m.py").write_text(src.replace("return a - b", "return a + b", 1))
elif any(t.endswith("test_mul") for t in failing):
    (ws / "m.py").write_text(src.replace("return a + b  # mul", "return a * b  # mul", 1))
print('treesearch-usage: {"tokens_in": 40, "tokens_out": 10, "cost_usd": 0.002}')
print("treesearch-usage: " + sys.argv[1])
"""

M = """def add(a, b):
    return a - b


def mul(a, b):
    return a + b  # mul
"""
TESTS = """from m import add, mul


def test_add():
    assert add(2, 3) == 5


def test_mul():
    assert mul(2, 3) == 6


def test_zero():
    assert add(0, 0) == 0
"""


def setup(tmp_path: Path, extra_usage: str, **search: Any) -> dict[str, Any]:
    proj = tmp_path / "proj"
    (proj / "tests").mkdir(parents=True)
    (proj / "m.py").write_text(M)
    (proj / "tests" / "test_m.py").write_text(TESTS)
    (proj / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    # Where a user's agent CLI lives is visible in the sandbox; under /tmp (as tmp_path is)
    # only what the config names is: the hand-off folder is bound by the agent itself.
    (tmp_path / "cli").mkdir()
    cli = tmp_path / "cli" / "fake_agent.py"
    cli.write_text(FAKE_CLI)
    return {
        "workspace": {"path": str(proj)},
        "store": {"home": str(tmp_path / "home")},
        "task": "Make the failing tests pass.",
        "strategies": {
            "cli": {"kind": "command", "command": [sys.executable, str(cli), extra_usage]},
        },
        "scoring": {
            "search_tests": {
                "command": f"{sys.executable} -m pytest -q -p no:cacheprovider tests",
                "timeout": 60,
                "env": {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
            }
        },
        "search": {"policy": "best_first", "seed": 0, **search},
        "sandbox": {"writable": [str(tmp_path / "cli")]},
        "output": {"runs_dir": str(tmp_path / "runs")},
    }


def transcripts(out: Any) -> list[dict[str, Any]]:
    files = sorted((out.run_dir / "transcripts").glob("*.json"))
    return [json.loads(f.read_text()) for f in files]


def test_an_agent_cli_is_handed_the_task_and_failing_tests_and_its_edits_and_tokens_count(
    tmp_path: Path,
) -> None:
    cfg = setup(tmp_path, '{"tokens_in": 5}', budget={"expansions": 10, "tokens": 1000})
    out = run_from_config(cfg, base_dir=tmp_path)
    # Two expansions: the first fixes add (test_add failing), the second mul.
    assert out.best_score == 1.0 and out.usage.expansions == 2
    assert "return a + b" in out.patch and "return a * b  # mul" in out.patch
    first, second = transcripts(out)
    [start] = [e for e in first["transcript"] if e["event"] == "start"]
    assert start["handed"]["task.md"] > 0 and start["handed"]["failing.txt"] > 0
    [exit_] = [e for e in first["transcript"] if e["event"] == "exit"]
    stdout = exit_["stdout_tail"]
    assert "task: Make the failing tests pass." in stdout
    assert "failing: tests/test_m.py::test_add,tests/test_m.py::test_mul" in stdout
    assert "feedback mentions assert: True" in stdout and "workspace: True" in stdout
    [usage] = [e for e in first["transcript"] if e["event"] == "usage"]
    assert usage["tokens_in"] == 45 and usage["tokens_out"] == 10 and usage["lines"] == 2
    assert usage["cost_usd"] == 0.002
    # Tokens count against the budget and show on the edge.
    assert out.usage.tokens == 2 * 55
    edges = [d for _, _, d in out.graph.edges(data=True)]
    assert [e["tokens"] for e in edges] == [55, 55]
    [exit2] = [e for e in second["transcript"] if e["event"] == "exit"]
    assert "failing: tests/test_m.py::test_mul\n" in exit2["stdout_tail"]


def test_reported_tokens_stop_the_search_at_its_token_budget(tmp_path: Path) -> None:
    cfg = setup(tmp_path, '{"tokens_out": 100}', budget={"expansions": 10, "tokens": 150})
    cfg["search"]["stop_on_perfect"] = False
    out = run_from_config(cfg, base_dir=tmp_path)
    assert out.stop_reason == "tokens" and out.usage.tokens >= 150


def test_a_malformed_usage_line_is_noted_never_a_silent_zero(tmp_path: Path) -> None:
    cfg = setup(tmp_path, "{not json", budget={"expansions": 1})
    out = run_from_config(cfg, base_dir=tmp_path)
    [usage] = [e for e in transcripts(out)[0]["transcript"] if e["event"] == "usage"]
    assert usage["lines"] == 1 and usage["tokens_in"] == 40
    assert "{not json" in usage["problems"][0]


def test_read_usage_sums_lines_and_refuses_bad_ones() -> None:
    text = (
        "hello\n"
        'treesearch-usage: {"tokens_in": 3, "tokens_out": 4}\n'
        'treesearch-usage: {"tokens_in": -1}\n'
        "treesearch-usage: [1, 2]\n"
        '  treesearch-usage: {"cost_usd": 0.5}\n'
    )
    got = read_usage(text)
    assert (got.tokens_in, got.tokens_out, got.cost_usd, got.lines) == (3, 4, 0.5, 2)
    assert len(got.problems) == 2


MODEL_CLI = r"""
import json, os, pathlib, sys, urllib.request

env = os.environ
failing = pathlib.Path(env["TREESEARCH_FAILING_FILE"]).read_text()
body = {
    "model": "fake-model",
    "messages": [
        {"role": "system", "content": "Answer with JSON: the text to replace in m.py."},
        {"role": "user", "content": pathlib.Path(env["TREESEARCH_TASK_FILE"]).read_text()
         + "\nFailing tests:\n" + failing},
    ],
}
request = urllib.request.Request(
    sys.argv[1] + "/chat/completions",
    data=json.dumps(body).encode(),
    headers={"Content-Type": "application/json", "Authorization": "Bearer none"},
)
with urllib.request.urlopen(request, timeout=30) as response:
    reply = json.loads(response.read())
edit = json.loads(reply["choices"][0]["message"]["content"])
ws = pathlib.Path(env["TREESEARCH_WORKSPACE"])
(ws / "m.py").write_text((ws / "m.py").read_text().replace(edit["old"], edit["new"], 1))
print("model says:", edit)
usage = reply["usage"]
print("treesearch-usage: " + json.dumps(
    {"tokens_in": usage["prompt_tokens"], "tokens_out": usage["completion_tokens"]}))
"""


def test_an_agent_cli_that_asks_a_model_on_the_loopback_server(tmp_path: Path) -> None:
    """The fake CLI asks a chat-completions server on 127.0.0.1 (scripted answers) what to
    change, as an agent CLI asks its model: the edits the answers name are captured, the tokens
    the server reported count against the budget."""
    pytest.importorskip("openai")  # the loopback server's helpers
    from fake_llm_server import FakeLLMServer, text_reply

    def model(body: dict[str, Any], n: int) -> Any:
        user = body["messages"][-1]["content"]
        if "test_add" in user:
            return text_reply('{"old": "return a - b", "new": "return a + b"}', usage=(120, 30))
        return text_reply(
            '{"old": "return a + b  # mul", "new": "return a * b  # mul"}', usage=(90, 20)
        )

    with FakeLLMServer(model) as server:
        cfg = setup(tmp_path, "", budget={"expansions": 5})
        cli = tmp_path / "cli" / "model_agent.py"
        cli.write_text(MODEL_CLI)
        cfg["strategies"]["cli"]["command"] = [sys.executable, str(cli), server.base_url]
        cfg["sandbox"]["network"] = True  # the program talks to its model
        out = run_from_config(cfg, base_dir=tmp_path)
        asked = len(server.requests)
    assert out.best_score == 1.0 and asked == 2
    assert "return a + b" in out.patch and "return a * b  # mul" in out.patch
    assert out.usage.tokens == 150 + 110
    assert [d["tokens"] for _, _, d in out.graph.edges(data=True)] == [150, 110]
