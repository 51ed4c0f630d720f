"""A conversation and its workspace checkpoints, bound together.

A ``TransactionalSession`` holds an OpenAI-format conversation (``messages``) and the list of
``steps`` taken in one workspace. Every step runs tool calls (``read_file``, ``write_file``,
``replace_in_file``, ``list_dir``, ``run``, or tools the caller passes in), and records the tree
before and after it, the calls, their observations and a diff summary. Because every state is a
tree hash in the snapshot store, the session can:

- roll a failing step back on disk (``step(..., rollback_on_error=True)``);
- ``rewind(k)``: put messages *and* files back to state ``k`` (undoable with ``undo_rewind``);
- ``fork(k)``: start a new session from state ``k`` while the original branch stays intact;
- persist itself as an append-only JSONL file and be resumed by another process (``load``).

State ``k`` (for ``rewind``/``fork``): the files are the tree after step ``k`` (``0`` = the tree
when the session was created); the messages are those present just before step ``k + 1`` began,
so messages added between two steps (test feedback on state ``k``, say) belong to state ``k``.
For the last step that is every message.

One workspace has one live state: only one session (or fork) drives it at a time; ``checkout()``
puts a session's own state back on disk after another branch was used.

The session file holds one JSON record per line, each written and flushed on its own: a
``header``, then ``message``, ``step`` (a step with its messages, so a step is never half
recorded), ``rewind`` and ``undo_rewind`` records in the order they happened. A file cut short or
damaged loads up to its last good record; what was dropped is reported in ``load_warnings`` and
``dropped_lines``.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from treesearch import sandbox
from treesearch.errors import SandboxError, SessionError, StoreError, ToolError
from treesearch.isolation import Isolation
from treesearch.types import CommitId, Diff, Snapshot, SnapshotStore, TreeHash

__all__ = [
    "DiffSummary",
    "Observation",
    "Rewind",
    "SessionDeadlineError",
    "SessionStore",
    "Step",
    "ToolCall",
    "ToolEnv",
    "ToolFn",
    "ToolOutcome",
    "TransactionalSession",
    "BUILTIN_TOOLS",
]

FORMAT = "treesearch-session"
VERSION = 1


SessionStore = SnapshotStore
"""What a session needs from a snapshot store: ``treesearch.types.SnapshotStore`` (kept name)."""


# --- values ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a step."""

    id: str
    """Call id; tool messages refer to it (``tool_call_id``)."""
    name: str
    """Tool name (``read_file``, ``write_file``, ``replace_in_file``, ``list_dir``, ``run``...)."""
    arguments: dict[str, Any] = field(default_factory=dict)
    """Tool arguments (already decoded from the OpenAI JSON string)."""
    error: str | None = None
    """Why the call could not be decoded (e.g. arguments that are not JSON); it is then not run."""

    def to_openai(self) -> dict[str, Any]:
        """The call in OpenAI ``tool_calls`` form."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(self.arguments)},
        }


@dataclass(frozen=True)
class Observation:
    """What one tool call returned: the text sent back to the model, and whether it worked."""

    call_id: str
    """The ``ToolCall.id`` it answers."""
    name: str
    """Tool name."""
    ok: bool
    """False for a tool error, a command that failed or timed out, or a skipped call."""
    content: str
    """Text of the tool message (errors are described here, never raised)."""
    error: str | None = None
    """Short error kind: an exception class name, ``exit N``, ``timeout``, ``skipped``, ..."""
    seconds: float = 0.0
    """Wall-clock duration of the call."""
    data: dict[str, Any] = field(default_factory=dict)
    """Structured details (``exit_code``, ``timed_out``, ...)."""


@dataclass(frozen=True)
class DiffSummary:
    """How a step changed the workspace (tree before -> tree after)."""

    files: int = 0
    """Number of paths added, modified, deleted or type-changed."""
    insertions: int = 0
    """Lines added."""
    deletions: int = 0
    """Lines deleted."""
    stat: str = ""
    """A ``git diff --stat``-like text (empty when nothing changed)."""
    name_status: str = ""
    """``<status>\\t<path>`` lines (``A``/``M``/``D``/``T``)."""


@dataclass(frozen=True)
class Step:
    """One recorded step of a session."""

    index: int
    """1-based position in the session (state ``index`` is the tree after this step)."""
    tree_before: TreeHash
    """Workspace tree captured just before the step ran."""
    tree_after: TreeHash
    """Workspace tree when the step ended (equal to ``tree_before`` after a rollback)."""
    commit_after: CommitId | None
    """Store commit that recorded ``tree_after`` (after a rollback: the one of ``tree_before``)."""
    calls: tuple[ToolCall, ...]
    """The tool calls, in order (empty for a step recording external changes)."""
    observations: tuple[Observation, ...]
    """One observation per call, same order."""
    ok: bool
    """True when every call succeeded."""
    rolled_back: bool
    """True when the step failed and its changes were undone on disk."""
    rolled_back_tree: TreeHash | None
    """The state the failed step had produced (still in the store, restorable)."""
    diff: DiffSummary
    """Net change of the step (``tree_before`` -> ``tree_after``)."""
    messages_before: int
    """Number of messages when the step began."""
    messages_after: int
    """Number of messages when the step ended (its assistant and tool messages included)."""
    started_at: float
    """Start time, seconds since the epoch."""
    seconds: float
    """Wall-clock duration, captures included."""
    note: str | None = None
    """Free text, e.g. why a step without calls was recorded."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict (``Step.from_json`` reads it back)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Step:
        """Rebuild a step from ``to_json`` output; raises ``SessionError`` if fields are missing."""
        try:
            names = {f.name for f in fields(cls)}
            missing = names - set(data) - {"note"}
            if missing:
                raise SessionError(f"step record lacks field(s) {sorted(missing)}")
            kw = {k: data[k] for k in names if k in data}
            kw["calls"] = tuple(ToolCall(**c) for c in data["calls"])
            kw["observations"] = tuple(Observation(**o) for o in data["observations"])
            kw["diff"] = DiffSummary(**data["diff"])
            step = cls(**kw)
        except (TypeError, KeyError, AttributeError) as exc:
            raise SessionError(f"malformed step record: {exc}") from exc
        if not isinstance(step.index, int) or not isinstance(step.tree_after, str):
            raise SessionError("malformed step record: bad 'index' or 'tree_after'")
        return step


@dataclass(frozen=True)
class Rewind:
    """What ``rewind`` did."""

    to_step: int
    """The state now current (``0`` = the start)."""
    tree: TreeHash
    """The tree put on disk."""
    safety: TreeHash
    """The workspace tree just before the rewind (``undo_rewind`` goes back to it)."""
    removed_steps: int
    """Steps taken off the session (they stay in the store and in the session file)."""
    removed_messages: int
    """Messages taken off the conversation."""
    restore: Any = field(default=None, compare=False, repr=False)
    """The store's ``RestoreResult``."""


@dataclass(frozen=True)
class ToolEnv:
    """What a tool function gets besides its arguments."""

    workspace: Path
    """Workspace root; file tools must stay inside it."""
    timeout: float
    """Seconds a process started by the tool may run."""
    limits: sandbox.Limits | None = None
    """Resource limits for processes started by the tool."""
    output_limit: int = 64 * 1024
    """Bytes of stdout/stderr kept per process (cut in the middle)."""
    isolation: Isolation | None = None
    """How commands started by the tool are confined (``None``: not at all)."""


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool function returns (a plain ``str`` means ``ToolOutcome(text)``)."""

    content: str
    """Text for the tool message."""
    ok: bool = True
    """False when the tool ran but the outcome is a failure (a command exiting non-zero)."""
    error: str | None = None
    """Short error kind when ``ok`` is False."""
    data: dict[str, Any] = field(default_factory=dict)
    """Structured details kept in the step record."""


ToolFn = Callable[[ToolEnv, Mapping[str, Any]], "ToolOutcome | str"]
"""A tool: ``fn(env, arguments)``; raises for a tool error (reported as an observation)."""


# --- built-in tools -------------------------------------------------------------------------------


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


# --- the session ----------------------------------------------------------------------------------


class SessionDeadlineError(SessionError):
    """A step was refused because the session's ``deadline`` (``time_limit``) has passed."""


def _check_json(obj: Any, what: str) -> None:
    try:
        json.dumps(obj)
    except (TypeError, ValueError) as exc:
        raise SessionError(f"{what} is not JSON-serialisable: {exc}") from exc


def _limits_to_json(limits: sandbox.Limits | None) -> dict[str, Any] | None:
    return None if limits is None else asdict(limits)


def _limits_from_json(data: Any) -> sandbox.Limits | None:
    if data is None:
        return None
    try:
        return sandbox.Limits(**data)
    except (TypeError, SandboxError) as exc:
        raise SessionError(f"bad 'limits' in the session header: {exc}") from exc


@dataclass
class _RewindFrame:
    to_step: int
    kept_messages: int
    safety: TreeHash
    steps: list[Step]
    messages: list[dict[str, Any]]


class TransactionalSession:
    """A conversation and the workspace states of its steps (see the module docstring).

    Create one with ``create`` or ``load``. Methods are safe to call from several threads (one
    lock); a thread that ``revoke_thread`` named can no longer change the session.
    """

    def __init__(
        self,
        store: SessionStore,
        *,
        session_id: str,
        root: TreeHash,
        root_commit: CommitId | None,
        created_at: float,
        path: Path | None = None,
        timeout: float = 60.0,
        limits: sandbox.Limits | None = None,
        output_limit: int = 64 * 1024,
        parent: dict[str, Any] | None = None,
    ) -> None:
        """Low-level constructor; use ``create``, ``load`` or ``fork``."""
        self.store = store
        """The snapshot store of the workspace."""
        self.workspace = Path(store.workspace)
        """Workspace root."""
        self.session_id = session_id
        """Unique id of this session (a fork gets its own)."""
        self.root = root
        """Tree of state 0 (the workspace when the session was created)."""
        self.root_commit = root_commit
        self.created_at = created_at
        self.path = path
        """The session file (``None`` until ``save`` when created without one)."""
        self.timeout = timeout
        """Default seconds a ``run`` tool call may take."""
        self.limits = limits
        """Resource limits for processes started by tools."""
        self.output_limit = output_limit
        self.isolation: Isolation | None = None
        """How commands of the ``run`` tool (and command agents) are confined; set by the
        search controller from ``sandbox.isolation`` (``None``: not at all)."""
        self.parent = parent
        """For a fork: ``{"session_id", "path", "step"}`` of the session it came from."""
        self.messages: list[dict[str, Any]] = []
        """The conversation, OpenAI chat format. Treat as read-only; use ``add_message``."""
        self.steps: list[Step] = []
        """The steps of the current branch. Treat as read-only."""
        self.tree: TreeHash = root
        """The tree this session last put on or found on disk (its current state)."""
        self.load_warnings: list[str] = []
        """Problems met by ``load`` (records dropped, workspace restored, ...)."""
        self.dropped_lines: tuple[int, ...] = ()
        """1-based line numbers of the session file that ``load`` could not use."""
        self.restored_on_load: Any = None
        """The ``RestoreResult`` when ``load`` had to put the session's tree back on disk."""
        self.recorded_workspace = str(self.workspace)
        """The workspace path written in the session file's header."""
        self.deadline: float | None = None
        """``time.monotonic()`` value after which steps are refused and commands are cut short."""
        self._rewinds: list[_RewindFrame] = []
        self._lock = threading.RLock()
        self._revoked: set[int] = set()
        self._rewrite_needed = False
        self._valid_lines: list[str] = []
        # A session holds its workspace until close(): another process's search, session or
        # restore is refused (WorkspaceBusy) instead of changing files under this one's steps.
        # Shared with a search of this process; released if the session is dropped unclosed.
        hold = getattr(store, "hold", None)
        self._hold: Any = hold(f"session {session_id}") if callable(hold) else None
        self._release = weakref.finalize(self, _release_hold, self._hold)

    # --- construction -----------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        store: SessionStore,
        path: str | os.PathLike[str] | None = None,
        *,
        messages: Iterable[Mapping[str, Any]] = (),
        timeout: float = 60.0,
        limits: sandbox.Limits | None = None,
        output_limit: int = 64 * 1024,
        session_id: str | None = None,
    ) -> TransactionalSession:
        """Start a session in ``store``'s workspace; state 0 is the workspace as it is now.

        With ``path`` the session file is written at once and kept up to date record by record;
        an existing file is refused (``load`` it instead). ``messages`` start the conversation.
        The session holds the workspace until ``close()``: a session, search or restore of it
        in another process raises ``WorkspaceBusy`` meanwhile (and so does this one, at once,
        if another process holds it).
        """
        if timeout <= 0:
            raise SessionError(f"timeout must be > 0 seconds, got {timeout}")
        file = Path(path) if path is not None else None
        if file is not None and file.exists():
            raise SessionError(f"session file {file} already exists; load it or pick another path")
        snap = _capture(store, {"purpose": "session-start"}, "starting the session")
        session = cls(
            store,
            session_id=session_id or uuid.uuid4().hex[:16],
            root=snap.tree,
            root_commit=snap.commit,
            created_at=time.time(),
            path=None,
            timeout=timeout,
            limits=limits,
            output_limit=output_limit,
        )
        for message in messages:
            session._add_message_unlogged(dict(message))
        if file is not None:
            session._write_full(file)
        return session

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        store: SessionStore,
        *,
        restore: bool = True,
    ) -> TransactionalSession:
        """Resume a session from its file: same messages, same steps, same state.

        With ``restore`` (the default) the workspace is put back to the session's tree when it
        differs (``restored_on_load`` holds the store's result; ``store.undo()`` reverts it).
        Records after the first unreadable one are dropped and reported in ``load_warnings`` and
        ``dropped_lines``; a missing or unreadable header raises ``SessionError``.
        """
        file = Path(path)
        try:
            raw = file.read_bytes()
        except OSError as exc:
            raise SessionError(f"cannot read session file {file}: {exc}") from exc
        chunks = raw.split(b"\n")
        ends_clean = chunks[-1] == b""
        if ends_clean:
            chunks.pop()
        session: TransactionalSession | None = None
        valid: list[str] = []
        warnings: list[str] = []
        dropped: list[int] = []
        for lineno, chunk in enumerate(chunks, 1):
            try:
                text = chunk.decode("utf-8")
                record = json.loads(text)
                if not isinstance(record, dict) or "type" not in record:
                    raise SessionError("not a record object")
                if session is None:
                    session = cls._from_header(record, store, file)
                else:
                    session._replay(record)
            except (UnicodeDecodeError, ValueError, SessionError, TypeError, KeyError) as exc:
                if session is None:
                    raise SessionError(
                        f"session file {file}: line {lineno}: unreadable header ({exc})"
                    ) from exc
                dropped = list(range(lineno, len(chunks) + 1))
                cut = "cut short" if lineno == len(chunks) and not ends_clean else "unreadable"
                warnings.append(
                    f"line {lineno}: record {cut} ({exc}); dropped line(s) "
                    f"{lineno}-{len(chunks)} ({len(dropped)} record(s)); the session was loaded "
                    f"up to line {lineno - 1}"
                )
                break
            valid.append(text)
        if session is None:
            raise SessionError(f"session file {file} is empty")
        session.dropped_lines = tuple(dropped)
        session.load_warnings.extend(warnings)
        if dropped or not ends_clean:
            # The next record must not be glued to a damaged line: rewrite the good part first.
            session._rewrite_needed = True
            session._valid_lines = valid
        if session.recorded_workspace != str(session.workspace):
            session.load_warnings.append(
                f"the session was recorded in workspace {session.recorded_workspace}, "
                f"now used with {session.workspace}"
            )
        if restore:
            live = session._live_tree("load-check")
            if live != session.tree:
                session.restored_on_load = session._restore(session.tree, "restoring on load")
                session.load_warnings.append(
                    f"the workspace differed from the session's state; restored tree "
                    f"{session.tree[:12]} (the previous state is safety snapshot "
                    f"{live[:12]}; store.undo() reverts)"
                )
        return session

    @classmethod
    def _from_header(
        cls, record: Mapping[str, Any], store: SessionStore, file: Path
    ) -> TransactionalSession:
        if record.get("type") != "header" or record.get("format") != FORMAT:
            raise SessionError("the first record is not a treesearch session header")
        if record.get("version") != VERSION:
            raise SessionError(f"session format version {record.get('version')} is not supported")
        session = cls(
            store,
            session_id=record["session_id"],
            root=TreeHash(record["root"]),
            root_commit=record.get("root_commit"),
            created_at=float(record["created_at"]),
            path=file,
            timeout=float(record.get("timeout", 60.0)),
            limits=_limits_from_json(record.get("limits")),
            output_limit=int(record.get("output_limit", 64 * 1024)),
            parent=record.get("parent"),
        )
        session.recorded_workspace = str(record.get("workspace", ""))
        return session

    def _replay(self, record: Mapping[str, Any]) -> None:
        kind = record["type"]
        if kind == "message":
            if record.get("index") != len(self.messages):
                raise SessionError(f"message index {record.get('index')} out of sequence")
            message = record["message"]
            if not isinstance(message, dict) or "role" not in message:
                raise SessionError("message record without a role")
            self.messages.append(message)
        elif kind == "step":
            step = Step.from_json(record["step"])
            msgs = record["messages"]
            if step.index != len(self.steps) + 1 or step.messages_before != len(self.messages):
                raise SessionError(f"step {step.index} out of sequence")
            if (
                not isinstance(msgs, list)
                or len(msgs) != step.messages_after - step.messages_before
            ):
                raise SessionError(f"step {step.index}: message count does not match")
            self.messages.extend(msgs)
            self.steps.append(step)
            self.tree = step.tree_after
        elif kind == "rewind":
            to, keep = int(record["to"]), int(record["keep_messages"])
            if not 0 <= to <= len(self.steps) or not 0 <= keep <= len(self.messages):
                raise SessionError(f"rewind to step {to} out of range")
            self._rewinds.append(
                _RewindFrame(
                    to, keep, TreeHash(record["safety"]), self.steps[to:], self.messages[keep:]
                )
            )
            del self.steps[to:], self.messages[keep:]
            self.tree = TreeHash(record["tree"])
        elif kind == "undo_rewind":
            if not self._rewinds:
                raise SessionError("undo_rewind without a rewind")
            frame = self._rewinds.pop()
            self.steps.extend(frame.steps)
            self.messages.extend(frame.messages)
            self.tree = frame.safety
        elif kind == "state":
            self.tree = TreeHash(str(record["tree"]))
        elif kind == "header":
            raise SessionError("a second header")
        else:
            raise SessionError(f"unknown record type {kind!r}")

    def close(self) -> None:
        """Release the workspace (the session file stays; ``load`` resumes it). Idempotent."""
        self._release()

    def __enter__(self) -> TransactionalSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- conversation -----------------------------------------------------------------------------

    def add_message(self, message: Mapping[str, Any]) -> None:
        """Append a message (``{"role": ..., "content": ...}``) to the conversation and the file."""
        with self._guard():
            self._add_message_unlogged(dict(message))
            self._append(
                {"type": "message", "index": len(self.messages) - 1, "message": self.messages[-1]}
            )

    def _add_message_unlogged(self, message: dict[str, Any]) -> None:
        if not isinstance(message.get("role"), str):
            raise SessionError(f"a message needs a string 'role', got {message!r:.200}")
        _check_json(message, "message")
        self.messages.append(message)

    # --- steps ------------------------------------------------------------------------------------

    def step(
        self,
        tool_calls: Sequence[ToolCall | Mapping[str, Any]],
        *,
        content: str | None = None,
        rollback_on_error: bool = False,
        stop_on_error: bool | None = None,
        timeout: float | None = None,
        tools: Mapping[str, ToolFn] | None = None,
        note: str | None = None,
    ) -> Step:
        """Run one step: the tool calls in order, then capture the workspace and record the step.

        ``tool_calls`` are ``ToolCall`` values or dicts in OpenAI form (``{"id", "type":
        "function", "function": {"name", "arguments": "<json>"}}``) or ``{"name", "arguments"}``.
        The assistant message (``content`` and the calls) and one tool message per call are added
        to the conversation. Tool errors (bad path, escape, no match, command failed or timed out,
        unknown tool, undecodable arguments) become observations, never exceptions.

        ``rollback_on_error``: when a call fails, the workspace is restored to the tree before the
        step and the failing call's observation says so. ``stop_on_error`` (default:
        ``rollback_on_error``) skips the calls after a failing one. ``timeout``: seconds a process
        of this step may run (default the session's ``timeout``; a ``run`` call may ask for less;
        the ``deadline`` cuts it further). ``tools`` adds or overrides tools for this step only.

        Raises ``SessionError`` only when the store fails or the session refuses the caller
        (revoked thread, deadline passed, malformed call list).
        """
        if not tool_calls:
            raise SessionError("a step needs at least one tool call (see capture_external)")
        stop = rollback_on_error if stop_on_error is None else stop_on_error
        with self._guard(timed=True):
            index = len(self.steps) + 1
            calls = [_to_call(c, index, i) for i, c in enumerate(tool_calls, 1)]
            table = dict(BUILTIN_TOOLS)
            table.update(tools or {})
            env = ToolEnv(
                self.workspace,
                self._cap_timeout(timeout),
                self.limits,
                self.output_limit,
                self.isolation,
            )
            started, t0 = time.time(), time.monotonic()
            before = _capture(self.store, self._meta(index, "before"), f"step {index}")
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
                obs = _execute(call, table, env)
                observations.append(obs)
                if not obs.ok and failed_at is None:
                    failed_at = len(observations)
            self._check_revoked()
            ok = failed_at is None
            rolled_back = False
            rolled_back_tree: TreeHash | None = None
            if not ok and rollback_on_error:
                res = self._restore(before.tree, f"rolling back step {index}")
                attempt = TreeHash(res.safety.tree)
                rolled_back = attempt != before.tree
                rolled_back_tree = attempt if rolled_back else None
                if rolled_back:
                    undone = _summary(self.store, before.tree, attempt).name_status
                    listing = undone.replace("\t", " ").replace("\n", ", ")
                    msg = (
                        f"[step {index} failed and was rolled back: the workspace is as it was "
                        f"before the step; undone: {listing}]"
                    )
                else:
                    msg = f"[step {index} failed; it had not changed the workspace]"
                last = failed_at - 1 if failed_at is not None else len(observations) - 1
                o = observations[last]
                observations[last] = Observation(
                    o.call_id, o.name, o.ok, f"{o.content}\n{msg}", o.error, o.seconds, o.data
                )
                after_tree, after_commit = before.tree, before.commit
            else:
                after = _capture(self.store, self._meta(index, "after"), f"step {index}")
                after_tree, after_commit = after.tree, after.commit
            diff = _summary(self.store, before.tree, after_tree)
            new_messages: list[dict[str, Any]] = [
                {
                    "role": "assistant",
                    "content": content,
                    "tool_calls": [c.to_openai() for c in calls],
                }
            ]
            new_messages += [
                {"role": "tool", "tool_call_id": o.call_id, "content": o.content}
                for o in observations
            ]
            step = Step(
                index=index,
                tree_before=before.tree,
                tree_after=after_tree,
                commit_after=after_commit,
                calls=tuple(calls),
                observations=tuple(observations),
                ok=ok,
                rolled_back=rolled_back,
                rolled_back_tree=rolled_back_tree,
                diff=diff,
                messages_before=len(self.messages),
                messages_after=len(self.messages) + len(new_messages),
                started_at=started,
                seconds=time.monotonic() - t0,
                note=note,
            )
            self._record_step(step, new_messages)
            return step

    def capture_external(self, note: str = "changes made outside session steps") -> Step | None:
        """Record changes made to the workspace outside ``step`` as a step without calls.

        Returns ``None`` (and records nothing) when the workspace is at the session's tree.
        """
        with self._guard():
            index = len(self.steps) + 1
            started, t0 = time.time(), time.monotonic()
            snap = _capture(self.store, self._meta(index, "external"), "capturing external changes")
            if snap.tree == self.tree:
                return None
            step = Step(
                index=index,
                tree_before=self.tree,
                tree_after=snap.tree,
                commit_after=snap.commit,
                calls=(),
                observations=(),
                ok=True,
                rolled_back=False,
                rolled_back_tree=None,
                diff=_summary(self.store, self.tree, snap.tree),
                messages_before=len(self.messages),
                messages_after=len(self.messages),
                started_at=started,
                seconds=time.monotonic() - t0,
                note=note,
            )
            self._record_step(step, [])
            return step

    def _record_step(self, step: Step, new_messages: list[dict[str, Any]]) -> None:
        _check_json(new_messages, "step messages")
        self.messages.extend(new_messages)
        self.steps.append(step)
        self.tree = step.tree_after
        self._append({"type": "step", "step": step.to_json(), "messages": new_messages})

    # --- states: rewind, fork, checkout -----------------------------------------------------------

    def state_tree(self, k: int) -> TreeHash:
        """The tree of state ``k`` (0 = the start, ``k`` = after step ``k``)."""
        self._check_index(k, "state_tree")
        return self.root if k == 0 else self.steps[k - 1].tree_after

    def _state_messages(self, k: int) -> int:
        return self.steps[k].messages_before if k < len(self.steps) else len(self.messages)

    def rewind(self, k: int) -> Rewind:
        """Put messages and files back to state ``k`` (0 = the start); steps after ``k`` are
        taken off this session (they stay in the store and, as history, in the session file).

        The rewind is undoable: ``undo_rewind()`` (or the store's ``undo()`` for the files alone).
        """
        with self._guard():
            self._check_index(k, "rewind")
            target = self.state_tree(k)
            keep = self._state_messages(k)
            res = self._restore(target, f"rewinding to step {k}")
            safety = TreeHash(res.safety.tree)
            frame = _RewindFrame(k, keep, safety, self.steps[k:], self.messages[keep:])
            self._rewinds.append(frame)
            del self.steps[k:], self.messages[keep:]
            self.tree = target
            self._append(
                {"type": "rewind", "to": k, "keep_messages": keep, "tree": target, "safety": safety}
            )
            return Rewind(k, target, safety, len(frame.steps), len(frame.messages), res)

    def undo_rewind(self) -> Any:
        """Undo the last ``rewind``: its steps, messages and files come back.

        Refused (``SessionError``) when steps or messages were added since the rewind; ``fork``
        or ``rewind`` again instead. Returns the store's ``RestoreResult``.
        """
        with self._guard():
            if not self._rewinds:
                raise SessionError("undo_rewind: there is no rewind to undo")
            frame = self._rewinds[-1]
            if len(self.steps) != frame.to_step or len(self.messages) != frame.kept_messages:
                raise SessionError(
                    "undo_rewind: the session changed since the rewind "
                    f"({len(self.steps) - frame.to_step} step(s), "
                    f"{len(self.messages) - frame.kept_messages} message(s) added); "
                    "fork or rewind instead"
                )
            res = self._restore(frame.safety, "undoing the rewind")
            self._rewinds.pop()
            self.steps.extend(frame.steps)
            self.messages.extend(frame.messages)
            self.tree = frame.safety
            self._append({"type": "undo_rewind", "tree": frame.safety})
            return res

    def fork(
        self,
        k: int | None = None,
        path: str | os.PathLike[str] | None = None,
        *,
        restore: bool = True,
    ) -> TransactionalSession:
        """A new session whose history is this one's up to state ``k`` (default: the last).

        This session keeps its steps, messages and file; its states stay in the store. The fork
        gets a new id and its own file: ``path``, or ``<stem>.fork-<id>.jsonl`` beside this
        session's file (none when this session has no file). With ``restore`` the workspace is
        put to state ``k`` (the previous disk state is the store's safety snapshot); call
        ``checkout()`` on this session to return to its branch.
        """
        with self._guard():
            k = len(self.steps) if k is None else k
            self._check_index(k, "fork")
            fork_id = uuid.uuid4().hex[:16]
            if path is not None:
                file: Path | None = Path(path)
            elif self.path is not None:
                file = self.path.with_name(f"{self.path.stem}.fork-{fork_id[:8]}.jsonl")
            else:
                file = None
            if file is not None and file.exists():
                raise SessionError(f"fork: session file {file} already exists")
            child = TransactionalSession(
                self.store,
                session_id=fork_id,
                root=self.root,
                root_commit=self.root_commit,
                created_at=time.time(),
                timeout=self.timeout,
                limits=self.limits,
                output_limit=self.output_limit,
                parent={
                    "session_id": self.session_id,
                    "path": str(self.path) if self.path else None,
                    "step": k,
                },
            )
            child.steps = list(self.steps[:k])
            child.messages = [dict(m) for m in self.messages[: self._state_messages(k)]]
            child.tree = self.state_tree(k)
            if restore:
                child.checkout()
            if file is not None:
                child._write_full(file)
            return child

    def checkout(self) -> Any:
        """Put this session's state (``tree``) on disk if the workspace differs.

        Returns the store's ``RestoreResult``, or ``None`` when nothing had to change.
        """
        with self._guard():
            if self._live_tree("checkout") == self.tree:
                return None
            return self._restore(self.tree, "checking out the session's state")

    # --- persistence ------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write the session file and return its path.

        Without ``path`` the current file is brought up to date (every record is already flushed
        as it happens; a file damaged before ``load`` is rewritten from its good records). With a
        new ``path`` the current state (header, messages, steps) is written there atomically and
        the session continues in that file.
        """
        with self._lock:
            if path is None and self.path is None:
                raise SessionError("save: the session has no file yet; give a path")
            target = Path(path) if path is not None else self.path
            assert target is not None
            if target != self.path:
                self._write_full(target)
            elif self._rewrite_needed:
                self._rewrite(target, self._valid_lines)
            return target

    def _header(self) -> dict[str, Any]:
        return {
            "type": "header",
            "format": FORMAT,
            "version": VERSION,
            "session_id": self.session_id,
            "created_at": self.created_at,
            "workspace": str(self.workspace),
            "root": self.root,
            "root_commit": self.root_commit,
            "parent": self.parent,
            "timeout": self.timeout,
            "limits": _limits_to_json(self.limits),
            "output_limit": self.output_limit,
        }

    def _snapshot_records(self) -> list[dict[str, Any]]:
        records = [self._header()]
        first = self.steps[0].messages_before if self.steps else len(self.messages)
        records += [
            {"type": "message", "index": i, "message": m}
            for i, m in enumerate(self.messages[:first])
        ]
        for n, step in enumerate(self.steps):
            records.append(
                {
                    "type": "step",
                    "step": step.to_json(),
                    "messages": self.messages[step.messages_before : step.messages_after],
                }
            )
            upto = (
                self.steps[n + 1].messages_before if n + 1 < len(self.steps) else len(self.messages)
            )
            records += [
                {"type": "message", "index": i, "message": self.messages[i]}
                for i in range(step.messages_after, upto)
            ]
        if (
            self.steps
            and self.tree != self.steps[-1].tree_after
            or (not self.steps and self.tree != self.root)
        ):
            # After undo_rewind the live tree can differ from the last step's: keep it exact.
            records.append({"type": "state", "tree": self.tree})
        return records

    def _write_full(self, file: Path) -> None:
        lines = [json.dumps(r) for r in self._snapshot_records()]
        self._rewrite(file, lines)

    def _rewrite(self, file: Path, lines: Sequence[str]) -> None:
        file.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{file.name}.", suffix=".tmp", dir=file.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                for line in lines:
                    fh.write(line + "\n")
                    fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, file)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self.path = file
        self._rewrite_needed = False
        self._valid_lines = []

    def _append(self, record: dict[str, Any]) -> None:
        if self.path is None:
            return
        if self._rewrite_needed:
            self._rewrite(self.path, self._valid_lines)
        line = json.dumps(record)
        try:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")
                fh.flush()
        except OSError as exc:
            raise SessionError(f"cannot append to session file {self.path}: {exc}") from exc

    # --- a copy of the session in a child process ---------------------------------------------------

    def write_records_to(self, path: str | os.PathLike[str]) -> None:
        """In a forked child process: write this session's new records (steps, messages) to
        ``path`` instead of the session file; the parent takes them with ``take_records``."""
        self.path = Path(path)
        self._rewrite_needed = False
        self._valid_lines = []

    def take_records(self, path: str | os.PathLike[str]) -> int:
        """Apply the records a forked child wrote to ``path`` (``write_records_to``) and append
        them to the session file, so the child's steps are this session's steps. A last line
        cut short (the child was killed while writing it) is ignored. Returns the count taken."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise SessionError(f"cannot read the child's session records {path}: {exc}") from exc
        taken = 0
        with self._lock:
            for line in text.splitlines(keepends=True):
                if not line.endswith("\n"):
                    break
                try:
                    record = json.loads(line)
                except ValueError as exc:
                    raise SessionError(f"a damaged record from the child process: {exc}") from exc
                self._replay(record)
                self._append(record)
                taken += 1
        return taken

    # --- threads and time -------------------------------------------------------------------------

    def revoke_thread(self, ident: int) -> None:
        """Refuse every later call from thread ``ident`` (used for an agent abandoned at its
        timeout: it can no longer change the session)."""
        self._revoked.add(ident)

    def _check_revoked(self) -> None:
        if threading.get_ident() in self._revoked:
            raise SessionError("this thread's agent run was abandoned (timeout); refusing")

    @contextlib.contextmanager
    def _guard(self, *, timed: bool = False) -> Iterator[None]:
        self._check_revoked()
        if timed and self.deadline is not None and time.monotonic() >= self.deadline:
            raise SessionDeadlineError("the session's time limit has passed; no further steps")
        with self._lock:
            self._check_revoked()
            yield

    @contextlib.contextmanager
    def time_limit(self, seconds: float | None) -> Iterator[None]:
        """Within the block, steps are refused after ``seconds`` and commands are cut at it
        (nested limits keep the earliest deadline). ``None`` sets no limit."""
        previous = self.deadline
        if seconds is not None:
            mine = time.monotonic() + seconds
            self.deadline = mine if previous is None else min(previous, mine)
        try:
            yield
        finally:
            self.deadline = previous

    def _cap_timeout(self, timeout: float | None) -> float:
        cap = self.timeout if timeout is None else timeout
        if self.deadline is not None:
            cap = min(cap, max(self.deadline - time.monotonic(), 0.05))
        return cap

    # --- store helpers ----------------------------------------------------------------------------

    def _meta(self, index: int, when: str) -> dict[str, Any]:
        return {"session": self.session_id, "step": index, "when": when}

    def _live_tree(self, purpose: str) -> TreeHash:
        snap = _capture(self.store, {"session": self.session_id, "purpose": purpose}, purpose)
        return TreeHash(snap.tree)

    def _restore(self, tree: TreeHash, what: str) -> Any:
        try:
            return self.store.restore(tree)
        except StoreError as exc:
            raise SessionError(f"{what}: restoring tree {tree[:12]} failed: {exc}") from exc

    def _check_index(self, k: int, op: str) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= len(self.steps):
            raise SessionError(f"{op}: step must be an integer in 0..{len(self.steps)}, got {k!r}")

    def to_json(self) -> dict[str, Any]:
        """The session's state as plain data (header fields, messages, steps, current tree)."""
        return {
            **{k: v for k, v in self._header().items() if k != "type"},
            "path": str(self.path) if self.path else None,
            "tree": self.tree,
            "messages": self.messages,
            "steps": [s.to_json() for s in self.steps],
        }


# --- module helpers -------------------------------------------------------------------------------


def _release_hold(hold: Any) -> None:
    if hold is not None:
        hold.release()


def _capture(store: SessionStore, meta: dict[str, Any], what: str) -> Snapshot:
    try:
        snap = store.capture(meta=meta)
    except StoreError as exc:
        raise SessionError(f"{what}: capturing the workspace failed: {exc}") from exc
    return snap


def _summary(store: SessionStore, a: TreeHash, b: TreeHash) -> DiffSummary:
    if a == b:
        return DiffSummary()
    try:
        diff: Diff = store.diff(a, b, max_patch_bytes=0)  # counts only: no patch text
    except StoreError as exc:
        raise SessionError(f"diffing {a[:12]}..{b[:12]} failed: {exc}") from exc
    files = diff.files
    return DiffSummary(
        files=len(files),
        insertions=sum(f.added_lines for f in files),
        deletions=sum(f.deleted_lines for f in files),
        stat=diff.stat(),
        name_status=diff.name_status(),
    )


def _to_call(raw: ToolCall | Mapping[str, Any], step: int, i: int) -> ToolCall:
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


def _execute(call: ToolCall, table: Mapping[str, ToolFn], env: ToolEnv) -> Observation:
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
