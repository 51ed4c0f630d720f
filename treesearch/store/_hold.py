"""Holding a workspace for a whole sequence of operations (a search, a session, a restore).

The store lock (``ShadowStore.lock``) serialises single operations; it is released between a
restore and the capture that follows an agent's work. The hold covers the whole sequence: while a
search holds its workspace, a second search, session or restore of the same workspace in another
process is refused at once (``WorkspaceBusy``, one line naming the holder). Captures and reads are
not held: they never change the workspace.

One file in the store folder::

    hold.lock   the flock(2) target (never removed: removing a lock file races with its next
                user), holding the holder's record while held: pid, command line, purpose,
                since, host (empty while free)

The kernel drops a flock when its process dies, so a holder killed with SIGKILL never blocks
anyone; the record it leaves behind is the evidence, and the next holder reports it (``reclaimed``).
The record is written into the locked file in place (no file made, renamed or removed per hold: a
restore takes a hold of its own, and those cost as much as the restore's own files). Only the
holder writes it; a reader that finds it half written (or empty) takes it for not yet written, as
a record a holder is about to write.
A hold is re-entrant within one process: a session opened inside a search shares the search's hold.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import os
import socket
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from treesearch.errors import WorkspaceBusy
from treesearch.store._fs import pid_alive

__all__ = ["HolderRecord", "WorkspaceHold", "acquire_hold"]

_LOCK = "hold.lock"
_RECORD_MAX = 64 * 1024
_MAX_COMMAND = 160


@dataclass(frozen=True)
class HolderRecord:
    """Who holds a workspace."""

    pid: int
    command: str
    """The holder's command line (cut to a readable length, control characters escaped)."""
    purpose: str
    """What it holds the workspace for, e.g. ``search run 20261201-...`` or ``restore``."""
    since: float
    """When the hold was taken (seconds since the epoch)."""
    host: str
    started: int = 0
    """The process's start time in clock ticks since boot (tells a reused pid apart)."""

    def describe(self) -> str:
        since = _dt.datetime.fromtimestamp(self.since, _dt.timezone.utc).strftime(
            "%Y-%m-%d %H:%M:%S UTC"
        )
        where = "" if self.host == socket.gethostname() else f" on host {self.host}"
        what = f"`{self.command}`" + (f", {self.purpose}" if self.purpose else "")
        return f"pid {self.pid}{where} ({what}, since {since})"

    @classmethod
    def from_json(cls, data: Any) -> HolderRecord | None:
        if not isinstance(data, dict):
            return None
        try:
            return cls(
                pid=int(data["pid"]),
                command=str(data.get("command", "?")),
                purpose=str(data.get("purpose", "")),
                since=float(data.get("since", 0.0)),
                host=str(data.get("host", "")),
                started=int(data.get("started", 0)),
            )
        except (KeyError, TypeError, ValueError):
            return None


@dataclass
class _Held:
    fd: int
    count: int
    owner: int
    """pid that took the flock (a forked child inherits the entry but is another process)."""
    record: HolderRecord


_held: dict[str, _Held] = {}
_held_lock = threading.Lock()


class WorkspaceHold:
    """One claim on a held workspace; ``release()`` (or leaving the ``with`` block) gives it up.

    Claims of one process on one workspace share one flock; the last release drops it.
    """

    def __init__(self, key: str, record: HolderRecord, reclaimed: str | None) -> None:
        self._key = key
        self.record = record
        """The holder record (this process)."""
        self.reclaimed = reclaimed
        """What was found and taken over from a holder that is gone (``None``: nothing)."""
        self._released = False

    @property
    def released(self) -> bool:
        return self._released

    def release(self) -> None:
        """Give up this claim (idempotent)."""
        if self._released:
            return
        self._released = True
        with _held_lock:
            held = _held.get(self._key)
            if held is None or held.owner != os.getpid():
                return
            held.count -= 1
            if held.count > 0:
                return
            del _held[self._key]
            # The record goes first: a record on disk with a free lock means "died holding it".
            with contextlib.suppress(OSError):
                os.ftruncate(held.fd, 0)
            with contextlib.suppress(OSError):
                fcntl.flock(held.fd, fcntl.LOCK_UN)
            os.close(held.fd)

    def __enter__(self) -> WorkspaceHold:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def acquire_hold(
    store_path: Path, workspace: Path, purpose: str = "", command: str | None = None
) -> WorkspaceHold:
    """Hold ``workspace`` (whose store folder is ``store_path``) or raise ``WorkspaceBusy`` at once.

    Re-entrant within this process. ``command`` defaults to this process's command line.
    """
    key = str(store_path / _LOCK)
    me = os.getpid()
    with _held_lock:
        held = _held.get(key)
        if held is not None and held.owner != me:
            # Inherited through fork(): the parent's claim, not ours. Closing our copy of the
            # descriptor leaves the parent's flock in place (it belongs to the open file).
            with contextlib.suppress(OSError):
                os.close(held.fd)
            del _held[key]
            held = None
        if held is not None:
            held.count += 1
            return WorkspaceHold(key, held.record, None)
        fd = os.open(key, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise WorkspaceBusy(_busy_message(store_path, workspace)) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            reclaimed = _reclaim(fd)
            record = HolderRecord(
                pid=me,
                command=_own_command() if command is None else _clean(command),
                purpose=_clean(purpose),
                since=time.time(),
                host=socket.gethostname(),
                started=_start_ticks(me),
            )
            try:
                if os.fstat(fd).st_size:  # (a dead holder's: an empty file needs no change)
                    os.ftruncate(fd, 0)
                os.pwrite(fd, (json.dumps(asdict(record)) + "\n").encode(), 0)
            except OSError:
                # A full disk: the flock alone still keeps others out (they are told the holder
                # did not record itself); a stale record must not name the wrong holder.
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)
        except BaseException:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            raise
        _held[key] = _Held(fd, 1, me, record)
        return WorkspaceHold(key, record, reclaimed)


def holder(store_path: Path) -> HolderRecord | None:
    """The recorded holder of the workspace (``None``: no record, or one half written)."""
    try:
        return HolderRecord.from_json(json.loads((store_path / _LOCK).read_bytes()))
    except (OSError, ValueError):
        return None


def _reclaim(fd: int) -> str | None:
    """We hold the flock of ``fd``: a record still in it belongs to a holder that died holding
    it (the next record is written over it)."""
    try:
        text = os.pread(fd, _RECORD_MAX, 0)
    except OSError as exc:
        return f"removed an unreadable workspace hold record ({exc.strerror})"
    if not text:
        return None
    try:
        old = HolderRecord.from_json(json.loads(text))
    except ValueError:
        old = None
    if old is None:
        return "removed a damaged workspace hold record (its lock was free)"
    if old.host != socket.gethostname():
        why = "its lock was free"
    elif not pid_alive(old.pid):
        why = f"its lock was free and process {old.pid} is gone"
    elif old.started and _start_ticks(old.pid) not in (0, old.started):
        why = f"its lock was free and pid {old.pid} is now another process"
    else:
        why = f"its lock was free (process {old.pid} let it go without clearing its record)"
    return f"reclaimed the workspace hold of {old.describe()}: {why}"


def _busy_message(store_path: Path, workspace: Path) -> str:
    here = socket.gethostname()
    record = holder(store_path)
    for _ in range(20):
        # A new holder may be between taking the flock and writing its record (the record on
        # disk, if any, is then its dead predecessor's): give it a moment.
        if record is not None and (record.host != here or pid_alive(record.pid)):
            break
        time.sleep(0.01)
        record = holder(store_path)
    if record is None:
        who = "another process (it has not recorded itself)"
    elif record.host == here and not pid_alive(record.pid):
        who = (
            f"a process started by {record.describe()}, which is gone (a child it forked still "
            "holds the lock: stop it)"
        )
    else:
        who = record.describe()
    return (
        f"workspace {workspace} is in use by {who}; wait for it to finish or stop it "
        "(two at once would mix their workspace states)"
    )


_own: dict[int, str] = {}


def _own_command() -> str:
    """This process's command line, one short line (read once per process)."""
    me = os.getpid()
    if me not in _own:
        _own.clear()
        _own[me] = _clean(_read_command())
    return _own[me]


def _read_command() -> str:
    try:
        with open("/proc/self/cmdline", "rb") as fh:
            parts = [p.decode("utf-8", "replace") for p in fh.read().split(b"\0") if p]
    except OSError:
        parts = [sys.executable, *sys.argv]
    if parts:
        parts[0] = os.path.basename(parts[0])
    return " ".join(parts)


def _clean(text: str) -> str:
    """One short line: control characters escaped, the middle cut out of a long command."""
    line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if len(line) > _MAX_COMMAND:
        half = _MAX_COMMAND // 2 - 2
        line = f"{line[:half]} ... {line[-half:]}"
    return line


def _start_ticks(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rpartition(b")")[2].split()[19])
    except (OSError, IndexError, ValueError):
        return 0
