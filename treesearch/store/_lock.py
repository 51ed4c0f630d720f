"""The store's lock file: waiting for it, and what its holders leave in it for the next.

``ShadowStore.lock`` serialises the processes of a store with ``flock(2)`` on ``<store>/lock``.
Taking it used to check, every time, for what the last holder may have left behind:

- lock files of git's own (``index.lock``, ``packed-refs.lock``, ``packed-refs.new``) that a git
  process killed under the lock leaves (``reclaim_git_locks``; no live owner can exist: we hold
  the flock, and every git process of the store inherits it);
- a state file another process changed (the store's caches are dropped then).

Both cost a few system calls on paths; on a small workspace they were a third of a no-change
capture. The file now says whether they are needed:

- a holder writes its pid (``claim``): a holder that dies holding the lock leaves it, and the next
  holder checks everything;
- a holder that lets go cleanly (no exception left its block, no git process of its was ended by a
  signal, its state is written) writes ``free <stamp>`` (``let_go``), the stamp of the state file
  it leaves (``_catalogue.State.stamp``, new with every write of that file): the next holder skips
  the first check, and the second too when it knows that stamp (it wrote or read that state last).

Anything else in the file (nothing, a pid, what an older treesearch writes: its pid) is no mark:
both checks are made. The pid line is padded to the mark's length, so that one write replaces
either with the other, with no truncation in between.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import time
from pathlib import Path

from treesearch.errors import StoreError, StoreLockedError
from treesearch.store._errors import errors

_FREE = re.compile(rb"free ([0-9a-f]{16})\n")
_MARK_BYTES = 22
"""``free <16 hex digits>\\n``."""


def wait_for(fd: int, limit: float, store: Path) -> None:
    """Take the flock of ``fd``, waiting up to ``limit`` seconds for another process, then raise
    ``StoreLockedError`` naming the holder."""
    deadline = time.monotonic() + limit
    delay = 0.005
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise StoreLockedError(
                    f"the store {store} is locked by another process{read_holder(fd)}; waited "
                    f"{limit:.1f}s. Wait for it to finish, or raise the lock timeout"
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


def read_holder(fd: int) -> str:
    """`` (pid N)`` of the holder named in the lock file, or nothing."""
    try:
        pid = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return f" (pid {pid})" if pid.isdigit() else ""


def free_stamp(fd: int) -> str | None:
    """The state stamp a holder that let go cleanly wrote into the lock file, else ``None``."""
    try:
        m = _FREE.fullmatch(os.pread(fd, 64, 0))
    except OSError:
        return None
    return m.group(1).decode() if m else None


def claim(fd: int, marked: bool, store: Path) -> None:
    """Write this holder's pid into the lock file over the whole of a ``free`` mark: this holder
    may die holding the lock, and the next must then check everything."""
    line = f"{os.getpid()}\n".ljust(_MARK_BYTES).encode()
    try:
        os.pwrite(fd, line, 0)
        return
    except OSError:
        if not marked:
            return  # the holder's pid is a courtesy (a full disk)
    with errors(StoreError, f"cannot write the lock file of the store {store}"):
        os.ftruncate(fd, 0)


def let_go(fd: int, stamp: str | None) -> None:
    """Mark the lock as let go cleanly, leaving the state file of ``stamp`` (``None``: the state
    in memory may differ from the file's; the holder's pid stays and the next holder checks).
    The mark replaces the pid line of ``claim`` in one write of the same length; a file that
    holds anything more is no mark (``free_stamp``)."""
    if stamp is None:
        return
    with contextlib.suppress(OSError):
        os.pwrite(fd, f"free {stamp}\n".encode(), 0)


def reclaim_git_locks(store: Path, git_dir: Path) -> None:
    """Remove what a git process killed under the store's lock leaves (the caller holds the
    lock; ``packed-refs.new``: pack-refs' temporary file, which a kill leaves like its lock)."""
    refs = os.path.join(git_dir, "packed-refs")
    for path in (os.path.join(store, "index.lock"), refs + ".lock", refs + ".new"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
