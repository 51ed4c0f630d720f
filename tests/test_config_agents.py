"""Agent configs are typed end to end: each strategy validates as its kind's pydantic model, a bad
field gets one line naming the file (or the ``-c`` override) and the field, an unknown kind lists
the kinds, and the resolved config (every agent default) validates again.

Real YAML files, the real registry, real agents built from the validated models."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import StrictInt

from treesearch.agents import (
    AgentConfig,
    build_agent,
    known_kinds,
    register_agent,
)
from treesearch.agents.command import CommandAgent
from treesearch.agents.configs import AGENT_MODELS
from treesearch.agents.scripted import ScriptedAgent
from treesearch.config import Config, agent_config, load_config
from treesearch.errors import AgentError, ConfigError

GOOD: dict[str, dict[str, Any]] = {
    "scripted": {"kind": "scripted", "steps": [{"run": "true"}]},
    "patch": {"kind": "patch", "patch": "--- a/x\n+++ b/x\n"},
    "command": {"kind": "command", "command": ["true"]},
    "python": {"kind": "python", "function": "os.path:join"},
    "llm": {"kind": "llm", "model": "m", "api_key_env": None, "cache": False},
    "mutation": {"kind": "mutation", "operators": "all", "tests": {"command": "pytest -q"}},
}
"""A valid strategy of every built-in kind."""

BAD: dict[str, tuple[str, Any, str]] = {
    "scripted": ("observation_chars", 0, "must be an integer > 0"),
    "patch": ("strip", -1, "must be an integer >= 0"),
    "command": ("tail_chars", "many", "must be an integer > 0, got 'many'"),
    "python": ("function", "nodots", "must be a dotted path like 'package.module:function'"),
    "llm": ("temperature", -1, "must be a number >= 0"),
    "mutation": ("top_lines", 0, "must be how many of the most suspicious lines"),
}
"""Per kind: a field, a value it refuses, and what the error says."""


def write(tmp_path: Path, strategies: dict[str, Any], name: str = "cfg.yaml") -> Path:
    path = tmp_path / name
    data = {"workspace": {"path": str(tmp_path)}, "strategies": strategies}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_every_builtin_kind_has_a_model_and_the_bad_cases_cover_them_all() -> None:
    assert set(GOOD) == set(BAD) == set(AGENT_MODELS)
    assert set(AGENT_MODELS) <= set(known_kinds())


@pytest.mark.parametrize("kind", sorted(BAD))
def test_a_bad_agent_field_in_a_file_is_one_line_naming_the_file_and_the_field(
    tmp_path: Path, kind: str
) -> None:
    field, value, says = BAD[kind]
    path = write(tmp_path, {"s": {**GOOD[kind], field: value}})
    with pytest.raises(ConfigError) as err:
        load_config(path)
    text = str(err.value)
    assert len(text.splitlines()) == 1, text
    assert text.startswith(f"{path}: strategies.s.{field}: "), text
    assert says in text, text


@pytest.mark.parametrize("kind", sorted(BAD))
def test_an_unknown_agent_field_lists_the_fields_of_that_kind(tmp_path: Path, kind: str) -> None:
    path = write(tmp_path, {"s": {**GOOD[kind], "bogus": 1}})
    with pytest.raises(
        ConfigError, match=r"strategies\.s\.bogus: unknown key \(allowed: kind, "
    ) as e:
        load_config(path)
    # The strategy keys are allowed alongside the agent's own fields.
    assert "max_steps" in str(e.value) and "samples" in str(e.value)


@pytest.mark.parametrize("kind", sorted(BAD))
def test_build_agent_with_a_bad_field_is_one_line_naming_the_kind_and_field(kind: str) -> None:
    field, value, says = BAD[kind]
    with pytest.raises(AgentError) as err:
        build_agent({**GOOD[kind], field: value})
    assert str(err.value).startswith(f"{kind} agent: field {field!r} {says}"), str(err.value)
    assert len(str(err.value).splitlines()) == 1


@pytest.mark.parametrize(
    ("prompts", "says"),
    [
        ({"sytem": "x"}, "prompts.sytem: unknown key (allowed: system, task, feedback, "),
        ({"task": 3}, "prompts.task: must be text, got 3"),
        ({"task": "{task} {tsk}"}, "prompts.task: unknown placeholder {tsk}; known: {task}, "),
        ("terse", "prompts: must be a mapping of template name to text"),
    ],
)
def test_a_bad_llm_prompt_template_names_its_path_in_the_file(
    tmp_path: Path, prompts: Any, says: str
) -> None:
    path = write(tmp_path, {"s": {**GOOD["llm"], "prompts": prompts}})
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value).startswith(f"{path}: strategies.s.{says}"), str(err.value)


def test_llm_prompt_templates_are_validated_once_into_the_model_the_agent_takes(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, {"s": {**GOOD["llm"], "prompts": {"feedback": "Got:\n{feedback}"}}})
    strategy = load_config(path).config.strategies["s"]
    agent = build_agent(strategy)
    assert agent.config.prompts is strategy.prompts  # type: ignore[attr-defined]
    assert strategy.prompts.feedback == "Got:\n{feedback}"
    assert strategy.prompts.system == type(strategy.prompts)().system  # the rest: the defaults
    assert load_config(write(tmp_path, {"s": {**GOOD["llm"], "prompts": None}})).config


def test_an_unknown_kind_in_a_file_lists_the_registered_kinds(tmp_path: Path) -> None:
    path = write(tmp_path, {"s": {"kind": "telepathy"}})
    with pytest.raises(ConfigError) as err:
        load_config(path)
    text = str(err.value)
    assert text.startswith(f"{path}: strategies.s.kind: unknown agent kind 'telepathy'"), text
    assert f"(known kinds: {', '.join(known_kinds())})" in text
    no_kind = write(tmp_path, {"s": {"steps": []}}, "c.yaml")
    with pytest.raises(
        ConfigError, match=r"c\.yaml: strategies\.s\.kind: missing \(required: one of"
    ):
        load_config(no_kind)
    not_a_mapping = write(tmp_path, {"s": "scripted"}, "b.yaml")
    with pytest.raises(ConfigError, match=r"strategies\.s: must be a mapping with a 'kind'"):
        load_config(not_a_mapping)


def test_an_override_of_an_agent_field_is_validated_and_blamed_on_the_override(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, {"fix": GOOD["scripted"]})
    override = "strategies.fix.observation_chars=-5"
    with pytest.raises(ConfigError) as err:
        load_config(path, [override])
    assert str(err.value).startswith(f"-c {override}: strategies.fix.observation_chars: must be")
    # A good override reaches the agent's constructor.
    loaded = load_config(path, ["strategies.fix.observation_chars=7"])
    agent = build_agent(agent_config(loaded.config.strategies["fix"]))
    assert isinstance(agent, ScriptedAgent) and agent.observation_chars == 7


def test_cli_override_of_an_agent_field_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = write(tmp_path, {"fix": GOOD["command"]})
    r = subprocess.run(
        [sys.executable, "-m", "treesearch", "run", str(path), "-c", "strategies.fix.stdin=3"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=120,
        check=False,
    )
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line, line
    assert "-c strategies.fix.stdin=3: strategies.fix.stdin: must be true or false" in line, line


def test_resolved_config_with_every_kind_validates_again_and_builds_the_same_agents(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, {kind: dict(spec) for kind, spec in GOOD.items()})
    cfg = load_config(path).config
    dumped = cfg.model_dump(mode="json", by_alias=True)
    # Every default of every agent is written out ...
    assert dumped["strategies"]["llm"]["request_timeout"] == 120.0
    assert dumped["strategies"]["mutation"]["tests"]["timeout"] == 600.0
    assert dumped["strategies"]["scripted"]["samples"] == 1
    # ... and reads back as the same config, through YAML as a run directory stores it.
    again = Config.model_validate(yaml.safe_load(yaml.safe_dump(dumped, sort_keys=False)))
    assert again == cfg
    for name, strat in again.strategies.items():
        assert type(build_agent(agent_config(strat))) is type(
            build_agent(agent_config(cfg.strategies[name]))
        )
        assert agent_config(strat)["kind"] == name


def test_strategy_timeout_is_the_strategys_not_the_command_agents(tmp_path: Path) -> None:
    """The strategy keys win over an agent field of the same name, as when they were split off
    by hand: a command strategy's ``timeout`` limits the run, not the command."""
    path = write(tmp_path, {"c": {**GOOD["command"], "timeout": 5, "tail_chars": 9}})
    strat = load_config(path).config.strategies["c"]
    assert strat.timeout == 5
    agent = build_agent(agent_config(strat))
    assert isinstance(agent, CommandAgent) and agent.timeout is None and agent.tail_chars == 9
    assert "timeout" not in agent_config(strat)


class _EchoConfig(AgentConfig):
    kind: str = "test-echo-model"
    lines: StrictInt = 1


def test_a_kind_registered_with_a_model_is_validated_by_it_and_one_without_passes_through(
    tmp_path: Path,
) -> None:
    register_agent(
        "test-echo-model",
        lambda lines: ScriptedAgent([{"run": "echo x"}] * lines),
        model=_EchoConfig,
        replace=True,
    )
    with pytest.raises(AgentError, match="test-echo-model agent: field 'lines'"):
        build_agent({"kind": "test-echo-model", "lines": "two"})
    register_agent("test-echo-raw", lambda cfg: ScriptedAgent(cfg.get("steps", [])), replace=True)
    path = write(
        tmp_path,
        {
            "a": {"kind": "test-echo-model", "lines": 2, "samples": 2},
            "b": {"kind": "test-echo-raw", "steps": [{"finish": "ok"}], "max_steps": 3},
        },
    )
    cfg = load_config(path).config
    assert cfg.strategies["a"].samples == 2 and cfg.strategies["b"].max_steps == 3
    assert agent_config(cfg.strategies["b"]) == {
        "kind": "test-echo-raw",
        "steps": [{"finish": "ok"}],
    }
    bad = write(tmp_path, {"a": {"kind": "test-echo-model", "lines": "two"}}, "bad.yaml")
    with pytest.raises(
        ConfigError, match=r"bad\.yaml: strategies\.a: test-echo-model agent: field"
    ):
        load_config(bad)


def test_scoring_sections_are_typed_and_errors_name_the_nested_key(tmp_path: Path) -> None:
    base = {"workspace": {"path": str(tmp_path)}, "strategies": {"s": GOOD["scripted"]}}
    path = tmp_path / "cfg.yaml"
    for scoring, says in (
        ({"grade_tests": {"comand": "pytest"}}, r"scoring\.grade_tests\.comand: unknown key "),
        ({"grade_tests": {"reruns": 99}}, r"scoring\.grade_tests\.reruns: must be an integer"),
        ({"cache_inputs": ["../up"]}, r"scoring\.cache_inputs: '\.\./up' must be a path relative"),
        ({"search_tests": {"cwd": "/abs"}}, r"scoring\.search_tests\.cwd: must be a relative path"),
    ):
        path.write_text(yaml.safe_dump({**base, "scoring": scoring}))
        with pytest.raises(ConfigError, match=rf"^{path}: {says}") as err:
            load_config(path)
        assert len(str(err.value).splitlines()) == 1
    path.write_text(yaml.safe_dump({**base, "scoring": {"grade_tests": {"command": ["pytest"]}}}))
    typed = load_config(path).config.scoring
    assert typed.grade_tests is not None and typed.grade_tests.command == ("pytest",)
    assert typed.search_tests.command == "python -m pytest -q"
