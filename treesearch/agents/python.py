"""The ``python`` agent: calls ``package.module:function(ctx, **options)``.

The function works through ``ctx.session`` (its steps are recorded) and returns an
``AgentResult``, or ``None`` for "finished". It runs in a forked child process that leads its own
process group, under the context's resource limits; at the run's timeout the whole group is
killed (SIGKILL), so a function that hangs or loops can never go on writing into the workspace
during later expansions. The steps the child completed come back to the session (the child writes
its session records to a file the parent takes), and so does its result (pickled); a result that
cannot be pickled fails the run. Changes it wrote directly (not through session steps) are
recorded as one step after a normal end and discarded after a failure, as for any agent.

Without ``os.fork`` (not POSIX) the function runs in a worker thread instead, abandoned at the
timeout (a Python thread cannot be killed).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import tempfile
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from treesearch.agents import (
    AgentContext,
    AgentCost,
    AgentResult,
    AgentStatus,
    resolve_dotted,
)
from treesearch.agents.configs import PythonConfig, agent_kwargs
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
        """Build from a config mapping, checked by ``PythonConfig`` (``AgentError`` names a bad
        field)."""
        return cls(**agent_kwargs(PythonConfig, config))

    def _resolve(self) -> Callable[..., AgentResult | None]:
        if callable(self.function):
            return self.function
        fn = resolve_dotted(self.function)
        if not callable(fn):
            raise AgentError(f"python agent: {self.function!r} is not callable")
        return fn  # type: ignore[no-any-return]

    def run(self, ctx: AgentContext) -> AgentResult:
        """Call the function in a child process (a worker thread without ``fork``), ended at
        the timeout."""
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
        deadline = ctx.session.deadline
        remaining = ctx.timeout
        if deadline is not None:
            remaining = min(remaining, max(deadline - time.monotonic(), 0.0))
        if hasattr(os, "fork"):
            box, timed_out = self._in_child(fn, ctx, remaining)
        else:  # pragma: no cover - not POSIX
            box, timed_out = self._in_thread(fn, ctx, remaining, name)
        if timed_out:
            transcript.append({"event": "timeout", "seconds": ctx.timeout})
            return done(
                AgentStatus.FAILED,
                f"timed out after {ctx.timeout:g} s (the function was {timed_out})",
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

    def _in_child(
        self,
        fn: Callable[..., Any],
        ctx: AgentContext,
        seconds: float,
    ) -> tuple[dict[str, Any], str | None]:
        """Run ``fn`` in a forked child leading its own process group; kill the group at the
        timeout. Returns what the child reported and, on a timeout, how it was ended."""
        session = ctx.session
        limits = ctx.limits or session.limits
        rlimits = limits._rlimits() if limits is not None else []
        with tempfile.TemporaryDirectory(prefix="treesearch-python-agent-") as tmp:
            records = Path(tmp) / "records.jsonl"
            out = Path(tmp) / "result.pickle"
            with warnings.catch_warnings():
                # Python 3.12 warns about fork() in a process with threads; the child only
                # runs the agent function and leaves with os._exit.
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
            if pid == 0:  # the child
                code = 1
                try:
                    os.setpgid(0, 0)
                    _child(fn, ctx, self.options, rlimits, records, out)
                    code = 0
                finally:
                    os._exit(code)
            with contextlib.suppress(OSError):
                os.setpgid(pid, pid)  # also here: no race with a kill before the child set it
            status = _wait(pid, time.monotonic() + seconds)
            timed_out = None if status is not None else "killed"
            if timed_out:
                _kill_tree(pid)
                os.waitpid(pid, 0)
            # Whatever it leaves behind, the group is gone: nothing more can write.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            session.take_records(records)
            box: dict[str, Any] = {}
            if timed_out:
                return box, timed_out
            try:
                box = pickle.loads(out.read_bytes())
            except FileNotFoundError:
                box = {
                    "error": AgentError(
                        f"the function's process ended without a result ({_how(status)})"
                    ),
                    "traceback": "",
                }
            except Exception as exc:  # noqa: BLE001 - an unreadable result fails the run
                box = {"error": exc, "traceback": traceback.format_exc(limit=5)}
            return box, None

    def _in_thread(
        self, fn: Callable[..., Any], ctx: AgentContext, seconds: float, name: str
    ) -> tuple[dict[str, Any], str | None]:  # pragma: no cover - not POSIX
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["result"] = fn(ctx, **self.options)
            except BaseException as exc:  # reported to the caller's thread, never lost
                box["error"] = exc
                box["traceback"] = traceback.format_exc(limit=20)

        worker = threading.Thread(
            target=target, name=f"treesearch-python-agent-{name}", daemon=True
        )
        worker.start()
        worker.join(seconds)
        if worker.is_alive():
            assert worker.ident is not None
            ctx.session.revoke_thread(worker.ident)
            return box, "abandoned"
        return box, None


def _how(status: int | None) -> str:
    if status is not None and os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return f"killed by {name}; a resource limit?"
    if status is not None and os.WIFEXITED(status):
        return f"exit status {os.WEXITSTATUS(status)}; did it call os._exit?"
    return "unknown status"


def _kill_tree(pid: int) -> None:
    """SIGKILL the child's process group and every process it started, including commands in
    their own sessions (``sandbox.run`` gives each one): the group is stopped first so that it
    starts nothing new, then each descendant found through ``/proc`` loses its whole group."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGSTOP)
    for _ in range(3):  # a descendant outside the stopped group may still start one more
        for d in _descendants(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(os.getpgid(d), signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(d, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (from ``/proc``; empty where there is none)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(name))
    out: list[int] = []
    todo = list(children.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def _wait(pid: int, deadline: float) -> int | None:
    """Wait for child ``pid`` until ``deadline``; its wait status once it exited (and was
    reaped), ``None`` when it still runs."""
    delay = 0.002
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        time.sleep(min(delay, left))
        delay = min(delay * 2, 0.05)


def _child(
    fn: Callable[..., Any],
    ctx: AgentContext,
    options: Mapping[str, Any],
    rlimits: list[tuple[int, int, int]],
    records: Path,
    out: Path,
) -> None:
    """The child's side: apply the limits, run ``fn``, pickle its result (or its error)."""
    import resource

    box: dict[str, Any] = {}
    try:
        for res, soft, hard in rlimits:
            resource.setrlimit(res, (soft, hard))
        store = ctx.session.store
        close = getattr(store, "close", None)
        if callable(close):
            close()  # drop the parent's lock and watcher handles; reopened on first use
        ctx.session.write_records_to(records)
        box["result"] = fn(ctx, **options)
    except BaseException as exc:  # reported to the parent, never lost
        box = {"error": exc, "traceback": traceback.format_exc(limit=20)}
    try:
        data = pickle.dumps(box)
    except Exception as exc:  # noqa: BLE001 - e.g. a result holding a lock or a generator
        data = pickle.dumps(
            {
                "error": AgentError(
                    f"the function's result cannot be sent back from its process: {exc}"
                ),
                "traceback": "",
            }
        )
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(out)
