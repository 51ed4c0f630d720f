"""The tools a session offers agents, and how one tool call is decoded and run.

File tools (``read_file``, ``write_file``, ``replace_in_file``, ``list_dir``) are confined to the
workspace by the sandbox; ``run`` starts a command in its own process group with the step's
timeout. A tool error is never raised to the caller: ``execute`` turns it into an ``Observation``
for the model.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from treesearch import sandbox
from treesearch.errors import SessionError, ToolError
from treesearch.session._values import Observation, ToolCall, ToolEnv, ToolFn, ToolOutcome

__all__ = ["BUILTIN_TOOLS", "execute", "run_calls", "to_call"]


def _arg(args: Mapping[str, Any], name: str, kind: type | tuple[type, ...], tool: str) -> Any:
    if name not in args:
        raise ToolError(f"{tool}: argument {name!r} is required")
    value = args[name]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        want = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ToolError(f"{tool}: argument {name!r} must be {want}, got {type(value).__name__}")
    return value


def _tool_read_file(env: ToolEnv, args: Mapping[str, Any]) -> str:
    path = _arg(args, "path", str, "read_file")
    max_bytes = _arg(args, "max_bytes", int, "read_file") if "max_bytes" in args else 1_000_000
    return sandbox.read_file(env.workspace, path, max_bytes=max_bytes)


def _tool_write_file(env: ToolEnv, args: Mapping[str, Any]) -> str:
    path = _arg(args, "path", str, "write_file")
    content = _arg(args, "content", str, "write_file")
    sandbox.write_file(env.workspace, path, content)
    return f"wrote {len(content.encode('utf-8', 'surrogateescape'))} bytes to {path}"


def _tool_replace_in_file(env: ToolEnv, args: Mapping[str, Any]) -> str:
    path = _arg(args, "path", str, "replace_in_file")
    old = _arg(args, "old", str, "replace_in_file")
    new = _arg(args, "new", str, "replace_in_file")
    sandbox.replace_in_file(env.workspace, path, old, new)
    return f"replaced 1 occurrence in {path}"


def _tool_list_dir(env: ToolEnv, args: Mapping[str, Any]) -> str:
    path = _arg(args, "path", str, "list_dir") if "path" in args else "."
    entries = sandbox.list_dir(env.workspace, path)
    return "\n".join(entries) if entries else "(empty)"


def _tool_run(env: ToolEnv, args: Mapping[str, Any]) -> ToolOutcome:
    command = _arg(args, "command", (str, list), "run")
    if isinstance(command, list) and not all(isinstance(c, str) for c in command):
        raise ToolError("run: argument 'command' must be a string or a list of strings")
    timeout = env.timeout
    if "timeout" in args:
        asked = _arg(args, "timeout", (int, float), "run")
        if asked <= 0:
            raise ToolError(f"run: argument 'timeout' must be > 0, got {asked}")
        timeout = min(float(asked), timeout)
    stdin = _arg(args, "stdin", str, "run") if "stdin" in args else None
    result = sandbox.run(
        command,
        env.workspace,
        timeout=timeout,
        limits=env.limits,
        stdin=stdin,
        output_limit=env.output_limit,
        isolation=env.isolation,
    )
    if result.exit_code is None:
        head, error = "the command could not be started", "not started"
    elif result.timed_out:
        head, error = f"timed out after {timeout:g} s (process group killed)", "timeout"
    else:
        head, error = f"exit code {result.exit_code}", f"exit {result.exit_code}"
    parts = [f"{head} ({result.seconds:.2f} s)"]
    for name, text, dropped in (
        ("stdout", result.stdout, result.stdout_dropped),
        ("stderr", result.stderr, result.stderr_dropped),
    ):
        if text or dropped:
            cut = f" ({dropped} bytes cut from the middle)" if dropped else ""
            parts.append(f"[{name}{cut}]\n{text}")
    data = {
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "seconds": round(result.seconds, 3),
    }
    return ToolOutcome(
        "\n".join(parts), ok=result.ok, error=None if result.ok else error, data=data
    )


BUILTIN_TOOLS: Mapping[str, ToolFn] = {
    "read_file": _tool_read_file,
    "write_file": _tool_write_file,
    "replace_in_file": _tool_replace_in_file,
    "list_dir": _tool_list_dir,
    "run": _tool_run,
}
"""The tools every session offers (file tools are confined to the workspace by the sandbox)."""


# --- decoding and running one call ----------------------------------------------------------------


def to_call(raw: ToolCall | Mapping[str, Any], step: int, i: int) -> ToolCall:
    """Call ``i`` of step ``step`` as a ``ToolCall``; undecodable arguments set its ``error``."""
    if isinstance(raw, ToolCall):
        return raw
    if not isinstance(raw, Mapping):
        raise SessionError(
            f"tool call {i}: expected a ToolCall or a dict, got {type(raw).__name__}"
        )
    fn = raw.get("function")
    spec: Mapping[str, Any] = fn if isinstance(fn, Mapping) else raw
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise SessionError(f"tool call {i}: missing tool name")
    call_id = raw.get("id") or f"call_{step}_{i}"
    args = spec.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError as exc:
            return ToolCall(str(call_id), name, {}, error=f"arguments are not valid JSON: {exc}")
    if not isinstance(args, dict):
        return ToolCall(str(call_id), name, {}, error="arguments must be a JSON object")
    try:
        json.dumps(args)
    except (TypeError, ValueError) as exc:
        return ToolCall(str(call_id), name, {}, error=f"arguments are not JSON-serialisable: {exc}")
    return ToolCall(str(call_id), name, dict(args))


def execute(call: ToolCall, table: Mapping[str, ToolFn], env: ToolEnv) -> Observation:
    """Run one call with the tools of ``table``; every failure is an observation, never raised."""
    t0 = time.monotonic()
    if call.error is not None:
        return Observation(call.id, call.name, False, f"error: {call.error}", error="bad arguments")
    fn = table.get(call.name)
    if fn is None:
        known = ", ".join(sorted(table))
        return Observation(
            call.id,
            call.name,
            False,
            f"error: unknown tool {call.name!r}; known tools: {known}",
            error="unknown tool",
        )
    try:
        out = fn(env, call.arguments)
    except Exception as exc:  # a tool error is an observation for the model, never a crash
        return Observation(
            call.id,
            call.name,
            False,
            f"error: {type(exc).__name__}: {exc}",
            error=type(exc).__name__,
            seconds=time.monotonic() - t0,
        )
    if isinstance(out, str):
        out = ToolOutcome(out)
    return Observation(
        call.id, call.name, out.ok, out.content, out.error, time.monotonic() - t0, dict(out.data)
    )


def run_calls(
    calls: Sequence[ToolCall], table: Mapping[str, ToolFn], env: ToolEnv, *, stop: bool
) -> tuple[list[Observation], int | None]:
    """Run ``calls`` in order; with ``stop`` the calls after a failing one are skipped.

    Returns one observation per call and the 1-based number of the first failing call (``None``
    when every call worked)."""
    observations: list[Observation] = []
    failed_at: int | None = None
    for call in calls:
        if failed_at is not None and stop:
            observations.append(
                Observation(
                    call.id,
                    call.name,
                    False,
                    f"skipped: call {failed_at} of this step failed",
                    error="skipped",
                )
            )
            continue
        obs = execute(call, table, env)
        observations.append(obs)
        if not obs.ok and failed_at is None:
            failed_at = len(observations)
    return observations, failed_at
