"""Whole-file writes that a crash can never leave half done, and a folder's one-holder lock: the
helpers every writer of a run, eval or compare directory and of a report page uses (the store
has its own, with its journal and full-disk rules: ``store/_fs.py``).

A write goes to a temporary file beside the target (a name of its own per write, so two writers
never share one) and is renamed over it; on any error the temporary file is removed and the
target is what it was.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["hold_folder", "write_text"]


def write_text(path: Path, text: str, *, errors: str = "strict", fsync: bool = False) -> Path:
    """Replace ``path`` with ``text`` (UTF-8) atomically; ``fsync``: also flush it to disk
    before the rename (for files a crash must never lose: results, journals' summaries)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", errors=errors) as fh:
            fh.write(text)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return path


@contextlib.contextmanager
def hold_folder(lock: Path, refuse: Callable[[str], BaseException]) -> Iterator[None]:
    """Hold ``lock`` (a file in the folder it guards) for the block, writing this process's pid
    in it; another holder -> ``refuse(its pid or '?')`` is raised at once."""
    with open(lock, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            raise refuse(fh.read().strip() or "?") from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        yield
