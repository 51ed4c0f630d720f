"""The ``scripted`` agent: a fixed list of actions, one session step each (deterministic).

It is a real agent (the demo and the README use it) and the project's test double: it goes through
exactly the same session tools as a model-driven agent would.

Actions (one per entry of ``steps``)::

    {"run": "pytest -x", "timeout": 30, "check": true}     # shell command (check: exit 0 required)
    {"write": "src/a.py", "content": "..."}                 # create or overwrite a file
    {"replace": "src/a.py", "old": "x = 1", "new": "x = 2"} # exactly one match
                                                            # (check: false: none is no error)
    {"read": "src/a.py"}                                    # read a file (an observation only)
    {"list": "src"}                                         # list a folder
    {"finish": "why"}                                       # stop: finished
    {"give_up": "why"}                                      # stop: gave up

Each action may carry ``"say": "..."``, the assistant text recorded with its tool call. A failing
action ends the run as ``failed`` (its step rolled back) unless it is a ``run`` or a ``replace``
with ``"check": false`` (for a ``replace``: a candidate fix that does not apply to this state
changes nothing, so the expansion is a no-op rather than an agent error). Running out of entries means ``finished``; running out of ``max_steps`` first
means ``limit_reached``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from treesearch.agents import (
    AgentContext,
    AgentCost,
    AgentResult,
    AgentStatus,
)
from treesearch.agents.configs import ScriptedConfig, agent_kwargs, check_action
from treesearch.errors import SessionError
from treesearch.session import SessionDeadlineError, ToolCall

__all__ = ["ScriptedAgent"]


def _call(n: int, action: str, entry: Mapping[str, Any]) -> ToolCall:
    cid = f"scripted-{n}"
    if action == "run":
        args: dict[str, Any] = {"command": entry["run"]}
        if "timeout" in entry:
            args["timeout"] = entry["timeout"]
        return ToolCall(cid, "run", args)
    if action == "write":
        return ToolCall(cid, "write_file", {"path": entry["write"], "content": entry["content"]})
    if action == "replace":
        return ToolCall(
            cid,
            "replace_in_file",
            {"path": entry["replace"], "old": entry["old"], "new": entry["new"]},
        )
    if action == "read":
        return ToolCall(cid, "read_file", {"path": entry["read"]})
    return ToolCall(cid, "list_dir", {"path": entry["list"]})


class ScriptedAgent:
    """Plays a fixed list of actions (see the module docstring)."""

    kind = "scripted"

    def __init__(
        self,
        steps: Sequence[Mapping[str, Any]],
        *,
        rollback_on_error: bool = True,
        observation_chars: int = 2000,
    ) -> None:
        """``steps``: the actions; ``rollback_on_error``: undo a failing action's step on disk;
        ``observation_chars``: how much of each observation goes into the transcript."""
        self._actions = [(check_action(n, e), dict(e)) for n, e in enumerate(steps)]
        self.rollback_on_error = rollback_on_error
        self.observation_chars = observation_chars

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ScriptedAgent:
        """Build from a config mapping, checked by ``ScriptedConfig`` (``AgentError`` names a bad
        field)."""
        return cls(**agent_kwargs(ScriptedConfig, config))

    def run(self, ctx: AgentContext) -> AgentResult:
        """Play the actions as session steps."""
        t0 = time.monotonic()
        transcript: list[dict[str, Any]] = []
        used = 0

        def done(status: AgentStatus, reason: str | None = None) -> AgentResult:
            return AgentResult(status, used, AgentCost(time.monotonic() - t0), transcript, reason)

        for n, (action, entry) in enumerate(self._actions):
            if action in ("finish", "give_up"):
                transcript.append({"event": action, "entry": n, "reason": entry[action]})
                status = AgentStatus.FINISHED if action == "finish" else AgentStatus.GAVE_UP
                return done(status, entry[action] or None)
            if used >= ctx.max_steps:
                return done(
                    AgentStatus.LIMIT_REACHED,
                    f"max_steps={ctx.max_steps} reached "
                    f"with {len(self._actions) - n} action(s) left",
                )
            check = bool(entry.get("check", True))
            call = _call(n, action, entry)
            try:
                step = ctx.session.step(
                    [call],
                    content=entry.get("say"),
                    rollback_on_error=self.rollback_on_error and check,
                )
            except SessionDeadlineError:
                return done(AgentStatus.FAILED, f"timed out after {ctx.timeout:g} s")
            except SessionError as exc:
                transcript.append({"event": "error", "entry": n, "error": str(exc)})
                return done(AgentStatus.FAILED, f"action {n} ({action}): {exc}")
            used += 1
            obs = step.observations[0]
            transcript.append(
                {
                    "event": "step",
                    "entry": n,
                    "action": action,
                    "arguments": call.arguments,
                    "step": step.index,
                    "ok": obs.ok,
                    "observation": obs.content[: self.observation_chars],
                    "rolled_back": step.rolled_back,
                    "diff": step.diff.name_status,
                }
            )
            if not obs.ok and check:
                first = obs.content.splitlines()[0] if obs.content else obs.error
                if obs.error == "timeout":
                    first = f"timed out ({first})"
                return done(
                    AgentStatus.FAILED,
                    f"action {n} ({action} {_target(entry, action)}) failed: {first}",
                )
        return done(AgentStatus.FINISHED)


def _target(entry: Mapping[str, Any], action: str) -> str:
    value = str(entry.get(action, ""))
    return repr(value if len(value) <= 60 else value[:57] + "...")
