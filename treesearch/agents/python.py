"""The ``python`` agent: calls ``package.module:function(ctx, **options)``.

The function works through ``ctx.session`` (its steps are recorded) and returns an
``AgentResult``, or ``None`` for "finished". It runs in a worker thread so that a function which
hangs can be abandoned at the run's timeout: the run then ends as ``failed`` and the thread is
revoked from the session (any later step it tries is refused, and its commands are cut at the
deadline). A Python thread cannot be killed, so a hung function keeps its thread until it returns;
changes it writes directly (not through session steps) after the timeout are not undone — write
through the session.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from treesearch.agents import (
    AgentContext,
    AgentCost,
    AgentResult,
    AgentStatus,
    check_fields,
    resolve_dotted,
)
from treesearch.errors import AgentError, SessionError
from treesearch.session import SessionDeadlineError

__all__ = ["PythonAgent"]


class PythonAgent:
    """Calls a Python function as an agent (see the module docstring)."""

    kind = "python"

    def __init__(
        self,
        function: str | Callable[..., AgentResult | None],
        *,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        """``function``: a callable or ``"package.module:name"`` (imported at the first run);
        ``options``: keyword arguments passed after the context."""
        self.function = function
        self.options = dict(options or {})

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> PythonAgent:
        """Build from ``{"function": "package.module:name", "options": {...}}``."""
        check_fields(
            "python",
            config,
            {
                "function": "a dotted path 'package.module:function'",
                "options": "a mapping of keyword arguments for the function",
            },
        )
        function = config.get("function")
        if not isinstance(function, str) or ":" not in function:
            raise AgentError(
                "python agent: field 'function' must be a dotted path like "
                f"'package.module:function', got {function!r}"
            )
        options = config.get("options", {})
        if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
            raise AgentError("python agent: field 'options' must be a mapping of keyword arguments")
        return cls(function, options=options)

    def _resolve(self) -> Callable[..., AgentResult | None]:
        if callable(self.function):
            return self.function
        fn = resolve_dotted(self.function)
        if not callable(fn):
            raise AgentError(f"python agent: {self.function!r} is not callable")
        return fn  # type: ignore[no-any-return]

    def run(self, ctx: AgentContext) -> AgentResult:
        """Call the function in a worker thread, abandoning it at the timeout."""
        t0 = time.monotonic()
        name = self.function if isinstance(self.function, str) else repr(self.function)
        transcript: list[dict[str, Any]] = [{"event": "call", "function": name}]

        first = len(ctx.session.steps)

        def done(status: AgentStatus, reason: str | None = None) -> AgentResult:
            steps = len(ctx.session.steps) - first
            return AgentResult(status, steps, AgentCost(time.monotonic() - t0), transcript, reason)

        try:
            fn = self._resolve()
        except AgentError as exc:
            return done(AgentStatus.FAILED, str(exc))
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["result"] = fn(ctx, **self.options)
            except BaseException as exc:  # reported to the caller's thread, never lost
                box["error"] = exc
                box["traceback"] = traceback.format_exc(limit=20)

        deadline = ctx.session.deadline
        remaining = ctx.timeout
        if deadline is not None:
            remaining = min(remaining, max(deadline - time.monotonic(), 0.0))
        worker = threading.Thread(
            target=target, name=f"treesearch-python-agent-{name}", daemon=True
        )
        worker.start()
        worker.join(remaining)
        if worker.is_alive():
            assert worker.ident is not None
            ctx.session.revoke_thread(worker.ident)
            transcript.append({"event": "timeout", "seconds": ctx.timeout})
            return done(
                AgentStatus.FAILED,
                f"timed out after {ctx.timeout:g} s (the function was abandoned)",
            )
        if "error" in box:
            err = box["error"]
            transcript.append(
                {
                    "event": "error",
                    "error": f"{type(err).__name__}: {err}",
                    "traceback": box["traceback"],
                }
            )
            if isinstance(err, SessionDeadlineError):
                return done(AgentStatus.FAILED, f"timed out after {ctx.timeout:g} s")
            if isinstance(err, SessionError):
                return done(AgentStatus.FAILED, f"the session refused a step: {err}")
            return done(AgentStatus.FAILED, f"the function raised {type(err).__name__}: {err}")
        result = box.get("result")
        if result is None:
            return done(AgentStatus.FINISHED)
        if not isinstance(result, AgentResult):
            return done(
                AgentStatus.FAILED,
                f"the function returned {type(result).__name__}, not an AgentResult or None",
            )
        result.transcript = transcript + result.transcript
        result.steps = result.steps or len(ctx.session.steps) - first
        if result.cost.seconds <= 0:
            result.cost = AgentCost(
                time.monotonic() - t0, result.cost.tokens_in, result.cost.tokens_out
            )
        return result
