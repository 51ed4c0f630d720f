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
from treesearch.agents.configs import (
    Action,
    Finish,
    GiveUp,
    Read,
    Replace,
    Run,
    ScriptedConfig,
    Write,
    agent_kwargs,
    parse_steps,
)
from treesearch.errors import AgentError, SessionError
from treesearch.session import SessionDeadlineError, ToolCall

__all__ = ["ScriptedAgent"]


def _call(n: int, step: Action) -> ToolCall:
    cid = f"scripted-{n}"
    if isinstance(step, Run):
        args: dict[str, Any] = {"command": step.run}
        if step.timeout is not None:
            args["timeout"] = step.timeout
        return ToolCall(cid, "run", args)
    if isinstance(step, Write):
        return ToolCall(cid, "write_file", {"path": step.write, "content": step.content})
    if isinstance(step, Replace):
        return ToolCall(
            cid, "replace_in_file", {"path": step.replace, "old": step.old, "new": step.new}
        )
    if isinstance(step, Read):
        return ToolCall(cid, "read_file", {"path": step.read})
    return ToolCall(cid, "list_dir", {"path": step.target})


class ScriptedAgent:
    """Plays a fixed list of actions (see the module docstring)."""

    kind = "scripted"

    def __init__(
        self,
        steps: Sequence[Mapping[str, Any] | Action],
        *,
        rollback_on_error: bool = True,
        observation_chars: int = 2000,
    ) -> None:
        """``steps``: the actions (mappings, checked now, or ``Action`` models, as
        ``ScriptedConfig`` validated them); ``rollback_on_error``: undo a failing action's step
        on disk; ``observation_chars``: how much of each observation goes into the transcript.
        ``AgentError`` names a bad step."""
        try:
            self._steps = parse_steps(steps)
        except ValueError as exc:
            raise AgentError(f"scripted agent: {exc}") from None
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

        for n, entry in enumerate(self._steps):
            action = entry.action
            if isinstance(entry, (Finish, GiveUp)):
                transcript.append({"event": action, "entry": n, "reason": entry.target})
                status = AgentStatus.FINISHED if action == "finish" else AgentStatus.GAVE_UP
                return done(status, entry.target or None)
            if used >= ctx.max_steps:
                return done(
                    AgentStatus.LIMIT_REACHED,
                    f"max_steps={ctx.max_steps} reached with {len(self._steps) - n} action(s) left",
                )
            check = entry.check if isinstance(entry, (Run, Replace)) else True
            call = _call(n, entry)
            try:
                step = ctx.session.step(
                    [call],
                    content=entry.say,
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
                    f"action {n} ({action} {_target(entry)}) failed: {first}",
                )
        return done(AgentStatus.FINISHED)


def _target(entry: Action) -> str:
    value = entry.target
    return repr(value if len(value) <= 60 else value[:57] + "...")
