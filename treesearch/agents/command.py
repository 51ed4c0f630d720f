"""The ``command`` agent: runs an external agent CLI in the workspace as one session step.

The command is an argv list (or a shell string) in which ``{task}``, ``{feedback}``,
``{workspace}``, ``{max_steps}``, ``{handoff}``, ``{task_file}``, ``{feedback_file}`` and
``{failing_file}`` are replaced (plain text replacement, other braces are left alone); with
``stdin: true`` the task text is also fed on standard input.

What the program is handed, as files in a fresh folder outside the workspace (removed after the
run; readable inside the sandbox) and as environment variables (``HANDOFF_FILES``):
``task.md`` (``TREESEARCH_TASK_FILE``: the task text), ``feedback.md``
(``TREESEARCH_FEEDBACK_FILE``: the node's test feedback, its failing tests with their messages
and output), ``failing.txt`` (``TREESEARCH_FAILING_FILE``: their ids, one per line) and
``context.json`` (``TREESEARCH_CONTEXT_FILE``: node, attempt, max_steps, the path from the root
and what earlier attempts here did); ``TREESEARCH_HANDOFF`` names the folder,
``TREESEARCH_WORKSPACE`` the workspace. Whatever the program changes in the workspace is the
step (captured by the store). A program that uses a model reports what it spent with lines
``treesearch-usage: {"tokens_in": N, "tokens_out": M, "cost_usd": X}`` on standard output (any
number of them, summed; any key may be left out): the tokens count against the search's
``tokens`` budget and show on the edge, the cost in the transcript. A malformed usage line is
noted in the transcript, never a silent 0. It runs through the
sandbox: own process group, the run's timeout (or a shorter ``timeout``), resource ``limits``, and
output cut to a budget. Exit code 0 means ``finished``; any other exit, a timeout or a command
that cannot start means ``failed``, and the step is rolled back (the workspace is as before).
The tails of stdout and stderr go into the transcript. Under the session's isolation
(``sandbox.isolation``, see ``treesearch.isolation``) the command can write only in the workspace
(and a private ``/tmp``) and has no network unless the config allows it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from treesearch import lifecycle, sandbox
from treesearch.agents import (
    AgentContext,
    AgentCost,
    AgentResult,
    AgentStatus,
)
from treesearch.agents.configs import CommandConfig, agent_kwargs
from treesearch.errors import AgentError, SessionError
from treesearch.isolation import HANDOFF_ENV
from treesearch.session import SessionDeadlineError, ToolCall, ToolEnv, ToolOutcome

__all__ = ["HANDOFF_FILES", "USAGE_MARK", "CommandAgent", "Usage", "read_usage", "write_handoff"]

_PLACEHOLDERS = (
    "{task_file}",
    "{feedback_file}",
    "{failing_file}",
    "{handoff}",
    "{task}",
    "{feedback}",
    "{workspace}",
    "{max_steps}",
)
USAGE_MARK = "treesearch-usage:"
"""How a line on the program's standard output that reports its model use starts."""
HANDOFF_FILES = {
    "TREESEARCH_TASK_FILE": "task.md",
    "TREESEARCH_FEEDBACK_FILE": "feedback.md",
    "TREESEARCH_FAILING_FILE": "failing.txt",
    "TREESEARCH_CONTEXT_FILE": "context.json",
}
"""The files a run hands the program, by the environment variable that names each."""


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

    def argv(self, ctx: AgentContext, handoff: Path | None = None) -> str | list[str]:
        """The command with its placeholders replaced for ``ctx`` (file placeholders name the
        files of the ``handoff`` folder; empty without one)."""
        folder = str(handoff) if handoff is not None else ""

        def file(var: str) -> str:
            return str(handoff / HANDOFF_FILES[var]) if handoff is not None else ""

        values = {
            "{task}": ctx.task,
            "{feedback}": "\n\n".join(ctx.feedback),
            "{workspace}": str(ctx.workspace),
            "{max_steps}": str(ctx.max_steps),
            "{handoff}": folder,
            "{task_file}": file("TREESEARCH_TASK_FILE"),
            "{feedback_file}": file("TREESEARCH_FEEDBACK_FILE"),
            "{failing_file}": file("TREESEARCH_FAILING_FILE"),
        }

        def fill(text: str) -> str:
            for key in _PLACEHOLDERS:
                text = text.replace(key, values[key])
            return text

        if isinstance(self.command, str):
            return fill(self.command)
        return [fill(part) for part in self.command]

    def run(self, ctx: AgentContext) -> AgentResult:
        """Run the command once, as one session step rolled back on failure, with its hand-off
        folder (see the module docstring)."""
        with lifecycle.scratch_dir("handoff") as folder:
            return self._run(ctx, folder, write_handoff(ctx, folder))

    def _run(self, ctx: AgentContext, folder: Path, handed: dict[str, str]) -> AgentResult:
        t0 = time.monotonic()
        command = self.argv(ctx, folder)
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
                extra_env=handed,
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
            {
                "event": "start",
                "command": shown,
                "stdin": self.stdin,
                "timeout": timeout,
                "handed": {name: (folder / name).stat().st_size for name in HANDOFF_FILES.values()},
            }
        ]
        spent = Usage()

        def done(status: AgentStatus, steps: int, reason: str | None = None) -> AgentResult:
            cost = AgentCost(time.monotonic() - t0, spent.tokens_in, spent.tokens_out)
            return AgentResult(status, steps, cost, transcript, reason)

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
        spent = read_usage(res.stdout)
        if spent.lines or spent.problems:
            transcript.append({"event": "usage", **spent.to_json()})
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


def write_handoff(ctx: AgentContext, folder: Path) -> dict[str, str]:
    """Write what a run hands its program into ``folder``; the environment variables that name
    the files (``HANDOFF_FILES``), the folder and the workspace."""
    feedback = ctx.feedback[-1] if ctx.feedback else ""
    context = {
        "node": ctx.node,
        "attempt": ctx.attempt,
        "max_steps": ctx.max_steps,
        "failing": list(ctx.failing),
        "history": list(ctx.history),
        "siblings": list(ctx.siblings),
    }
    texts = {
        "TREESEARCH_TASK_FILE": ctx.task,
        "TREESEARCH_FEEDBACK_FILE": feedback,
        "TREESEARCH_FAILING_FILE": "".join(f"{t}\n" for t in ctx.failing),
        "TREESEARCH_CONTEXT_FILE": json.dumps(context, indent=1, default=str) + "\n",
    }
    env = {HANDOFF_ENV: str(folder), "TREESEARCH_WORKSPACE": str(ctx.workspace)}
    for var, name in HANDOFF_FILES.items():
        (folder / name).write_text(texts[var], encoding="utf-8")
        env[var] = str(folder / name)
    return env


@dataclass
class Usage:
    """What a program said it spent (``USAGE_MARK`` lines on its standard output)."""

    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    lines: int = 0
    """Usage lines read."""
    problems: list[str] = field(default_factory=list)
    """Lines that start with the mark but do not hold a usage mapping (with why)."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cost_usd": round(self.cost_usd, 6),
            "lines": self.lines,
        }
        if self.problems:
            out["problems"] = self.problems[:5]
        return out


def read_usage(stdout: str) -> Usage:
    """The usage a program reported: the sum of its ``treesearch-usage: {...}`` lines."""
    out = Usage()
    for line in stdout.splitlines():
        text = line.strip()
        if not text.startswith(USAGE_MARK):
            continue
        try:
            data = json.loads(text[len(USAGE_MARK) :])
            if not isinstance(data, dict):
                raise ValueError("not a mapping")
            tokens_in = int(data.get("tokens_in", 0))
            tokens_out = int(data.get("tokens_out", 0))
            cost = float(data.get("cost_usd", 0.0))
            if min(tokens_in, tokens_out, cost) < 0:
                raise ValueError("a negative count")
        except (ValueError, TypeError) as exc:
            out.problems.append(f"{text[:120]}: {exc}")
            continue
        out.tokens_in += tokens_in
        out.tokens_out += tokens_out
        out.cost_usd += cost
        out.lines += 1
    return out
