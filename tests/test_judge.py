"""A value judge (``scoring.judge``): a model rates each state beside its tests. Real searches,
a real chat-completions server on 127.0.0.1 standing in for the model, replayed with the server
off; a judge that fails is said, never a silent 0."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("openai")

from fake_llm_server import FakeLLMServer, Reply, text_reply  # noqa: E402

from treesearch.agents.llm.judge import TIE_STEP, parse_verdict  # noqa: E402
from treesearch.app import run_from_config  # noqa: E402
from treesearch.search import graph as G  # noqa: E402

KEY_ENV = "TS_TEST_JUDGE_KEY"
GREET = "def greet(name):\n    return 'Hello ' + name\n"
TESTS = (
    "from greet import greet\n\n\n"
    "def test_comma():\n    assert greet('Ada').startswith('Hello,')\n\n\n"
    "def test_exact():\n    assert greet('Ada') == 'Hello, Ada! Welcome.'\n"
)
COMMA = {"replace": "greet.py", "old": "'Hello ' + name", "new": "'Hello, ' + name"}
BANG = {"replace": "greet.py", "old": "'Hello ' + name", "new": "'Hello, ' + name + '!'"}


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-judge")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


def judge_model(body: dict[str, Any], n: int) -> Reply:
    """Rates the state with the '!' highest, the root lowest."""
    user = body["messages"][-1]["content"]
    assert body["messages"][0]["content"].startswith("You judge states")
    if "(none: the original code)" in user:
        return text_reply('{"value": 0.1, "reason": "nothing changed yet"}', usage=(400, 20))
    if "+ name + '!'" in user:
        return text_reply(
            'Verdict: {"value": 0.9, "reason": "adds the comma and the bang"}', usage=(450, 25)
        )
    return text_reply('{"value": 0.3, "reason": "only the comma"}', usage=(450, 20))


def bad_model(body: dict[str, Any], n: int) -> Reply:
    return text_reply("It looks fine to me.", usage=(400, 10))


def project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    (proj / "tests").mkdir(parents=True, exist_ok=True)
    (proj / "greet.py").write_text(GREET)
    (proj / "tests" / "test_greet.py").write_text(TESTS)
    return proj


def config(tmp_path: Path, base_url: str, **judge: Any) -> dict[str, Any]:
    return {
        "workspace": {"path": str(project(tmp_path)), "copy": True},
        "store": {"home": str(tmp_path / "home")},
        "task": "greet() must greet with a comma and an exclamation mark.",
        "strategies": {
            "comma": {"kind": "scripted", "steps": [COMMA]},
            "bang": {"kind": "scripted", "steps": [BANG]},
        },
        "scoring": {
            "search_tests": {"command": f"{sys.executable} -m pytest -q -p no:cacheprovider tests"},
            "order": "all",
            "judge": {
                "model": "judge",
                "base_url": base_url,
                "api_key_env": KEY_ENV,
                "cache": str(tmp_path / "judge-cache"),
                "retry_backoff": 0.01,
                "retries": 0,
                "input_price": 1.0,
                "output_price": 2.0,
                **judge,
            },
        },
        "search": {"policy": "bfs", "budget": {"expansions": 2}},
        "output": {"runs_dir": str(tmp_path / "runs")},
    }


def test_the_judge_breaks_a_tie_of_the_tests_and_replays_offline(tmp_path: Path) -> None:
    with FakeLLMServer(judge_model) as server:
        out = run_from_config(config(tmp_path, server.base_url), base_dir=tmp_path)
        url = server.base_url
        calls = len(server.requests)
    g = out.graph
    root = G.root_of(g)
    assert calls == 3  # the root and the two states: each judged once
    by_strategy = {d["strategy"]: child for _, child, d in g.edges(data=True)}
    comma, bang = g.nodes[by_strategy["comma"]], g.nodes[by_strategy["bang"]]
    # The tests score both 1 of 2; the judge orders them (tie_break: at most TIE_STEP).
    assert comma["score"] == pytest.approx(0.5 + TIE_STEP * 0.3)
    assert bang["score"] == pytest.approx(0.5 + TIE_STEP * 0.9)
    assert g.nodes[root]["score"] == pytest.approx(TIE_STEP * 0.1)
    assert out.best == by_strategy["bang"]
    assert bang["tests"]["judge"] == {"value": 0.9, "reason": "adds the comma and the bang"}
    assert "judge 0.90: adds the comma and the bang" in bang["tests"]["summary"]
    assert out.usage.tokens == 420 + 475 + 470  # the judge's tokens count against the budget
    assert out.summary["judge"]["calls"] == 3 and out.summary["judge"]["errors"] == 0
    # At $1 / $2 per million prompt / completion tokens.
    assert out.summary["judge"]["usd"] == pytest.approx(((400 + 450 + 450) + 2 * 65) / 1e6)
    from treesearch.report.run_page import run_page_data

    notes = run_page_data(out.run_dir, None)["notes"]
    assert "value judge judge (tie_break): 3 states judged, 0 verdict(s) failed" in notes

    again = run_from_config(config(tmp_path, url, replay=True), base_dir=tmp_path)  # server off
    assert G.to_json(again.graph, stable=True) == G.to_json(g, stable=True)
    assert again.usage.tokens == out.usage.tokens


def test_weight_mixes_the_judge_into_the_score(tmp_path: Path) -> None:
    with FakeLLMServer(judge_model) as server:
        out = run_from_config(
            config(tmp_path, server.base_url, combine="weight", weight=0.5), base_dir=tmp_path
        )
    scores = sorted(d["score"] for _, d in out.graph.nodes(data=True))
    assert scores == pytest.approx([0.05, 0.4, 0.7])  # 0.5 x tests + 0.5 x judge


def test_a_judge_that_fails_is_said_and_leaves_the_tests_score(tmp_path: Path) -> None:
    with FakeLLMServer(bad_model) as server:
        out = run_from_config(config(tmp_path, server.base_url), base_dir=tmp_path)
    for _, d in out.graph.nodes(data=True):
        assert d["score"] in (0.0, 0.5)
        assert "the judge's answer is not a verdict" in d["tests"]["judge"]["error"]
        assert "judge failed" in d["tests"]["summary"]
    assert out.summary["judge"]["errors"] == 3
    # A replay with nothing recorded is a failure too, never a verdict of 0.
    miss = run_from_config(
        config(tmp_path / "m", "http://127.0.0.1:9/v1", replay=True), base_dir=tmp_path
    )
    assert miss.summary["judge"]["errors_by_kind"] == {"replay": 3}


def test_the_command_line_exits_3_when_every_verdict_failed(tmp_path: Path) -> None:
    with FakeLLMServer(bad_model) as server:
        cfg = config(tmp_path, server.base_url)
        path = tmp_path / "judge.yaml"
        path.write_text(yaml.safe_dump(cfg))
        env = {**__import__("os").environ, KEY_ENV: "sk-test-judge"}
        proc = subprocess.run(
            [sys.executable, "-m", "treesearch", "run", str(path)],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
    assert proc.returncode == 3, proc.stderr
    assert "every verdict of the value judge failed" in proc.stderr
    assert "3 FAILED" in proc.stdout


def test_parse_verdict_refuses_what_is_not_a_value_and_a_reason() -> None:
    assert parse_verdict('ok {"value": 1, "reason": "done"}') == (1.0, "done")
    for bad in ("nothing", '{"value": 2}', '{"value": true}', '{"value": 0.5, "reason": 3}', "{x}"):
        with pytest.raises(ValueError):
            parse_verdict(bad)
