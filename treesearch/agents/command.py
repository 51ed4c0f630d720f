"""The ``command`` agent: runs an external agent CLI in the workspace as one session step.

The command is an argv list (or a shell string) in which ``{task}``, ``{feedback}``,
``{workspace}`` and ``{max_steps}`` are replaced (plain text replacement, other braces are left
alone); with ``stdin: true`` the task text is also fed on standard input. It runs through the
sandbox: own process group, the run's timeout (or a shorter ``timeout``), resource ``limits``, and
output cut to a budget. Exit code 0 means ``finished``; any other exit, a timeout or a command
that cannot start means ``failed``, and the step is rolled back (the workspace is as before).
The tails of stdout and stderr go into the transcript. Under the session's isolation
(``sandbox.isolation``, see ``treesearch.isolation``) the command can write only in the workspace
(and a private ``/tmp``) and has no network unless the config allows it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from treesearch import sandbox
from treesearch.agents import (
    AgentContext,
    AgentCost,
    AgentResult,
    AgentStatus,
)
from treesearch.agents.configs import CommandConfig, agent_kwargs
from treesearch.errors import AgentError, SessionError
from treesearch.session import SessionDeadlineError, ToolCall, ToolEnv, ToolOutcome

__all__ = ["CommandAgent"]

_PLACEHOLDERS = ("{task}", "{feedback}", "{workspace}", "{max_steps}")


def _tail(text: str, chars: int) -> str:
    return text if len(text) <= chars else "..." + text[-chars:]


class CommandAgent:
    """Runs ``command`` once per ``run`` (see the module docstring)."""

    kind = "command"

    def __init__(
        self,
        command: str | Sequence[str],
        *,
        stdin: bool = False,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        limits: sandbox.Limits | None = None,
        tail_chars: int = 4000,
    ) -> None:
        """``command``: argv list, or a string run by ``/bin/sh -c``; ``stdin``: feed the task
        text on standard input; ``env``: variables added to the inherited environment;
        ``timeout``: seconds (default and upper bound: the run's ``ctx.timeout``); ``limits``:
        resource limits (default: the context's, else the session's); ``tail_chars``: how much of
        the end of stdout/stderr the transcript keeps."""
        if isinstance(command, str):
            if not command.strip():
                raise AgentError("command agent: field 'command' must not be empty")
        elif not command or not all(isinstance(c, str) for c in command):
            raise AgentError(
                "command agent: field 'command' must be a string or a non-empty list of strings"
            )
        self.command: str | list[str] = command if isinstance(command, str) else list(command)
        self.stdin = stdin
        self.env = dict(env or {})
        self.timeout = timeout
        self.limits = limits
        self.tail_chars = tail_chars

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> CommandAgent:
        """Build from a config mapping, checked by ``CommandConfig`` (``AgentError`` names a bad
        field)."""
        return cls(**agent_kwargs(CommandConfig, config))

    def argv(self, ctx: AgentContext) -> str | list[str]:
        """The command with its placeholders replaced for ``ctx``."""
        values = {
            "{task}": ctx.task,
            "{feedback}": "\n\n".join(ctx.feedback),
            "{workspace}": str(ctx.workspace),
            "{max_steps}": str(ctx.max_steps),
        }

        def fill(text: str) -> str:
            for key in _PLACEHOLDERS:
                text = text.replace(key, values[key])
            return text

        if isinstance(self.command, str):
            return fill(self.command)
        return [fill(part) for part in self.command]

    def run(self, ctx: AgentContext) -> AgentResult:
        """Run the command once, as one session step rolled back on failure."""
        t0 = time.monotonic()
        command = self.argv(ctx)
        timeout = min(self.timeout, ctx.timeout) if self.timeout else ctx.timeout
        limits = self.limits or ctx.limits or ctx.session.limits
        # Extra variables go through env(1), so the parent's environment is passed on untouched.
        full: list[str] = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        if self.env:
            full = ["env", *(f"{k}={v}" for k, v in self.env.items()), *full]
        stdin = ctx.task if self.stdin else None
        captured: dict[str, Any] = {}

        def tool(env: ToolEnv, _args: Mapping[str, Any]) -> ToolOutcome:
            result = sandbox.run(
                full,
                env.workspace,
                timeout=env.timeout,
                limits=limits,
                stdin=stdin,
                output_limit=env.output_limit,
                isolation=env.isolation,
            )
            captured["result"] = result
            captured["timeout"] = env.timeout
            if result.exit_code is None:
                text, error = f"could not start: {result.stderr.strip()}", "not started"
            elif result.timed_out:
                text, error = f"timed out after {env.timeout:g} s", "timeout"
            else:
                text, error = f"exit code {result.exit_code}", f"exit {result.exit_code}"
            text += f" ({result.seconds:.2f} s)"
            tails = (
                f"\n[stdout tail]\n{_tail(result.stdout, self.tail_chars)}"
                f"\n[stderr tail]\n{_tail(result.stderr, self.tail_chars)}"
            )
            return ToolOutcome(
                text + tails,
                ok=result.ok,
                error=None if result.ok else error,
                data={"exit_code": result.exit_code, "timed_out": result.timed_out},
            )

        shown = command if isinstance(command, str) else list(command)
        call = ToolCall("command-1", "agent_command", {"command": shown})
        transcript: list[dict[str, Any]] = [
            {"event": "start", "command": shown, "stdin": self.stdin, "timeout": timeout}
        ]

        def done(status: AgentStatus, steps: int, reason: str | None = None) -> AgentResult:
            return AgentResult(status, steps, AgentCost(time.monotonic() - t0), transcript, reason)

        if ctx.max_steps < 1:
            return done(AgentStatus.LIMIT_REACHED, 0, "max_steps=0: the command was not run")
        try:
            step = ctx.session.step(
                [call], tools={"agent_command": tool}, timeout=timeout, rollback_on_error=True
            )
        except SessionDeadlineError:
            return done(AgentStatus.FAILED, 0, f"timed out after {ctx.timeout:g} s")
        except SessionError as exc:
            return done(AgentStatus.FAILED, 0, f"the session refused the step: {exc}")
        res = captured.get("result")
        obs = step.observations[0]
        if res is None:  # the tool itself raised (e.g. a bad working folder)
            transcript.append({"event": "error", "error": obs.content})
            return done(AgentStatus.FAILED, 1, obs.content)
        transcript.append(
            {
                "event": "exit",
                "exit_code": res.exit_code,
                "timed_out": res.timed_out,
                "seconds": round(res.seconds, 3),
                "stdout_tail": _tail(res.stdout, self.tail_chars),
                "stderr_tail": _tail(res.stderr, self.tail_chars),
                "stdout_dropped": res.stdout_dropped,
                "stderr_dropped": res.stderr_dropped,
                "step": step.index,
                "rolled_back": step.rolled_back,
                "diff": step.diff.name_status,
            }
        )
        if res.ok:
            return done(AgentStatus.FINISHED, 1)
        last = (res.stderr.strip().splitlines() or [""])[-1][:300]
        if res.exit_code is None:
            reason = f"the command could not start: {last}"
        elif res.timed_out:
            reason = f"timed out after {captured['timeout']:g} s (process group killed)"
        else:
            reason = f"the command exited with code {res.exit_code}" + (f": {last}" if last else "")
        return done(AgentStatus.FAILED, 1, reason)
