"""``TransactionalSession``: a conversation and its workspace checkpoints, bound together.

The session runs steps (tool calls, then a capture), rolls a failing step back, rewinds and
forks by state, holds the workspace until ``close``, refuses revoked threads and steps past its
deadline, and keeps its file up to date. Its values, tools, store calls, history and file live
in the sibling modules (see ``treesearch.session``).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from treesearch import sandbox
from treesearch.errors import SessionError, StoreError
from treesearch.isolation import Isolation
from treesearch.session._history import History
from treesearch.session._log import (
    FORMAT,
    VERSION,
    SessionFile,
    child_records,
    header_fields,
    limits_to_json,
    read_log,
    snapshot_records,
)
from treesearch.session._store import SessionStore, capture, release_hold, summary
from treesearch.session._tools import BUILTIN_TOOLS, run_calls, to_call
from treesearch.session._values import (
    Observation,
    Rewind,
    SessionDeadlineError,
    Step,
    ToolCall,
    ToolEnv,
    ToolFn,
    check_json,
)
from treesearch.types import CommitId, Snapshot, TreeHash

__all__ = ["TransactionalSession"]


class TransactionalSession(History):
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
        super().__init__(root, root_commit)
        self.store = store
        """The snapshot store of the workspace."""
        self.workspace = Path(store.workspace)
        """Workspace root."""
        self.session_id = session_id
        """Unique id of this session (a fork gets its own)."""
        self.created_at = created_at
        self._file = SessionFile(path)
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
        self._lock = threading.RLock()
        self._revoked: set[int] = set()
        # A session holds its workspace until close(): another process's search, session or
        # restore is refused (WorkspaceBusy) instead of changing files under this one's steps.
        # Shared with a search of this process; released if the session is dropped unclosed.
        hold = getattr(store, "hold", None)
        self._hold: Any = hold(f"session {session_id}") if callable(hold) else None
        self._release = weakref.finalize(self, release_hold, self._hold)

    @property
    def path(self) -> Path | None:
        """The session file (``None`` until ``save`` when created without one)."""
        return self._file.path

    @path.setter
    def path(self, path: Path | None) -> None:
        self._file.path = path

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
        snap = capture(store, {"purpose": "session-start"}, "starting the session")
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
        log = read_log(file, lambda header: cls._from_header(header, store, file), cls._replay)
        session = log.session
        session.dropped_lines = tuple(log.dropped)
        session.load_warnings.extend(log.warnings)
        if log.dropped or not log.ends_clean:
            # The next record must not be glued to a damaged line: rewrite the good part first.
            session._file.damaged(log.valid)
        if session.recorded_workspace != str(session.workspace):
            session.load_warnings.append(
                f"the session was recorded in workspace {session.recorded_workspace}, "
                f"now used with {session.workspace}"
            )
        if restore:
            live = session._live_tree("load-check")
            if not session._at_state(live):
                session.restored_on_load = session._restore(
                    session.tree, "restoring on load", session.commit
                )
                session.load_warnings.append(
                    f"the workspace differed from the session's state; restored tree "
                    f"{session.tree[:12]} (the previous state is safety snapshot "
                    f"{live.tree[:12]}; store.undo() reverts)"
                )
        return session

    @classmethod
    def _from_header(
        cls, record: dict[str, Any], store: SessionStore, file: Path
    ) -> TransactionalSession:
        session = cls(store, path=file, **header_fields(record))
        session.recorded_workspace = str(record.get("workspace", ""))
        return session

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
            calls = [to_call(c, index, i) for i, c in enumerate(tool_calls, 1)]
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
            before = capture(self.store, self._meta(index, "before"), f"step {index}")
            observations, failed_at = run_calls(calls, table, env, stop=stop)
            self._check_revoked()
            ok = failed_at is None
            rolled_back = False
            rolled_back_tree: TreeHash | None = None
            if failed_at is not None and rollback_on_error:
                rolled_back_tree = self._roll_back(
                    index, before.tree, before.commit, observations, failed_at
                )
                rolled_back = rolled_back_tree is not None
                after_tree, after_commit = before.tree, before.commit
            else:
                after = capture(self.store, self._meta(index, "after"), f"step {index}")
                after_tree, after_commit = after.tree, after.commit
            diff = summary(self.store, before.tree, after_tree)
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
            snap = capture(self.store, self._meta(index, "external"), "capturing external changes")
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
                diff=summary(self.store, self.tree, snap.tree),
                messages_before=len(self.messages),
                messages_after=len(self.messages),
                started_at=started,
                seconds=time.monotonic() - t0,
                note=note,
            )
            self._record_step(step, [])
            return step

    def _roll_back(
        self,
        index: int,
        before: TreeHash,
        before_commit: CommitId,
        observations: list[Observation],
        failed_at: int,
    ) -> TreeHash | None:
        """Put the tree before failed step ``index`` back on disk and say so in the failing
        call's observation; returns the tree the step had produced (``None``: it changed
        nothing)."""
        res = self._restore(before, f"rolling back step {index}", before_commit)
        attempt = TreeHash(res.safety.tree)
        if attempt != before:
            undone = summary(self.store, before, attempt).name_status
            listing = undone.replace("\t", " ").replace("\n", ", ")
            msg = (
                f"[step {index} failed and was rolled back: the workspace is as it was "
                f"before the step; undone: {listing}]"
            )
        else:
            msg = f"[step {index} failed; it had not changed the workspace]"
        o = observations[failed_at - 1]
        observations[failed_at - 1] = Observation(
            o.call_id, o.name, o.ok, f"{o.content}\n{msg}", o.error, o.seconds, o.data
        )
        return attempt if attempt != before else None

    def _record_step(self, step: Step, new_messages: list[dict[str, Any]]) -> None:
        check_json(new_messages, "step messages")
        self._add_step(step, new_messages)
        self._append({"type": "step", "step": step.to_json(), "messages": new_messages})

    # --- states: rewind, fork, checkout -----------------------------------------------------------

    def rewind(self, k: int) -> Rewind:
        """Put messages and files back to state ``k`` (0 = the start); steps after ``k`` are
        taken off this session (they stay in the store and, as history, in the session file).

        The rewind is undoable: ``undo_rewind()`` (or the store's ``undo()`` for the files alone).
        """
        with self._guard():
            self._check_index(k, "rewind")
            target = self.state_tree(k)
            keep = self._state_messages(k)
            res = self._restore(target, f"rewinding to step {k}", self.state_commit(k))
            safety = TreeHash(res.safety.tree)
            safety_commit = CommitId(res.safety.commit)
            frame = self._push_rewind(k, keep, target, safety, safety_commit)
            self._append(
                {
                    "type": "rewind",
                    "to": k,
                    "keep_messages": keep,
                    "tree": target,
                    "safety": safety,
                    "safety_commit": safety_commit,
                }
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
            res = self._restore(frame.safety, "undoing the rewind", frame.safety_commit)
            self._pop_rewind()
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
            child.tree, child.commit = self.state_tree(k), self.state_commit(k)
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
            if self._at_state(self._live_tree("checkout")):
                return None
            return self._restore(self.tree, "checking out the session's state", self.commit)

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
            else:
                self._file.repair()
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
            "limits": limits_to_json(self.limits),
            "output_limit": self.output_limit,
        }

    def _write_full(self, file: Path) -> None:
        self._file.write(file, snapshot_records(self._header(), self))

    def _append(self, record: dict[str, Any]) -> None:
        self._file.append(record)

    # --- a copy of the session in a child process ---------------------------------------------------

    def write_records_to(self, path: str | os.PathLike[str]) -> None:
        """In a forked child process: write this session's new records (steps, messages) to
        ``path`` instead of the session file; the parent takes them with ``take_records``."""
        self._file.redirect(Path(path))

    def take_records(self, path: str | os.PathLike[str]) -> int:
        """Apply the records a forked child wrote to ``path`` (``write_records_to``) and append
        them to the session file, so the child's steps are this session's steps. A last line
        cut short (the child was killed while writing it) is ignored. Returns the count taken."""
        records = child_records(Path(path))
        taken = 0
        with self._lock:
            for record in records:
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

    def _live_tree(self, purpose: str) -> Snapshot:
        """The workspace as it is now (a capture; unchanged: the store's last snapshot)."""
        return capture(self.store, {"session": self.session_id, "purpose": purpose}, purpose)

    def _at_state(self, live: Snapshot) -> bool:
        """Whether the workspace ``live`` is this session's state: the same tree and, when the
        state's commit is known, the same empty folders (a tree hash does not hold them)."""
        if live.tree != self.tree:
            return False
        if self.commit is None or live.commit == self.commit:
            return True
        try:
            return self.store.resolve(self.commit).empty_dirs == live.empty_dirs
        except StoreError:
            return True  # the tree matches; the commit is gone from the store

    def _restore(self, tree: TreeHash, what: str, commit: CommitId | None = None) -> Any:
        """Put a state back on disk: its commit when known, since several snapshots can share
        one tree and differ in their empty folders (the store resolves a bare tree hash to the
        newest of them); the tree otherwise."""
        try:
            return self.store.restore(commit or tree)
        except StoreError as exc:
            raise SessionError(f"{what}: restoring tree {tree[:12]} failed: {exc}") from exc

    def to_json(self) -> dict[str, Any]:
        """The session's state as plain data (header fields, messages, steps, current tree)."""
        return {
            **{k: v for k, v in self._header().items() if k != "type"},
            "path": str(self.path) if self.path else None,
            "tree": self.tree,
            "messages": self.messages,
            "steps": [s.to_json() for s in self.steps],
        }
