"""Writing small git objects (a snapshot's commit, its metadata blob) without a git process.

A search records several snapshots per expansion; ``git commit-tree`` for each cost a process
start (a few ms each, most of a small capture). The bytes written here are exactly those
``git commit-tree <tree> -F -`` writes with the store's fixed identity (a test compares the two),
so commit ids do not change. Objects are written the way git writes loose objects: zlib-deflated
``<type> <size>\\0<content>`` at ``objects/<2 hex>/<38 hex>``, read-only, through a temporary file
renamed into place (a reader or a kill sees no object or the whole one, never a torn one; like
git's loose objects by default, not flushed to disk before the rename). An object that exists
already is left alone.

Why it stays (issue #32, item 3): with ``_scan_edit.py`` it makes a small capture free of git
processes; writing the commit with ``commit-tree`` instead puts a process back into every
capture (see ``_scan_edit.py`` for the figures of the two together).
"""

from __future__ import annotations

import hashlib
import os
import zlib
from collections.abc import Sequence
from pathlib import Path

from treesearch.store._fs import atomic_write

IDENT = "treesearch <treesearch@localhost>"
"""Author and committer of every snapshot (as ``_git.isolated_env`` tells git)."""


def object_id(kind: str, content: bytes) -> str:
    """git's id of an object of ``kind`` (``blob``, ``commit``...) holding ``content``."""
    return hashlib.sha1(b"%s %d\0" % (kind.encode(), len(content)) + content).hexdigest()


def commit_content(tree: str, message: bytes, date: int, parents: Sequence[str] = ()) -> bytes:
    """What ``git commit-tree <tree> [-p P]... -F -`` stores for ``message`` at ``date``."""
    stamp = f"{date} +0000"
    lines = "".join(f"parent {p}\n" for p in parents)
    head = f"tree {tree}\n{lines}author {IDENT} {stamp}\ncommitter {IDENT} {stamp}\n\n"
    return head.encode() + message


def write_object(objects_dir: Path, kind: str, content: bytes, *, tmp_dir: Path) -> str:
    """Write a loose object into ``objects_dir`` (the folder git's own processes write to: the
    store's ``objects``, or the ``GIT_OBJECT_DIRECTORY`` it runs git with) unless it exists;
    returns its id. ``tmp_dir``: where the temporary
    file goes (same filesystem, outside ``objects/``, so a leftover is never taken for an
    object; the store sweeps those of dead processes)."""
    oid = object_id(kind, content)
    folder = objects_dir / oid[:2]
    path = folder / oid[2:]
    if os.path.exists(path):
        return oid
    folder.mkdir(exist_ok=True)
    raw = zlib.compress(b"%s %d\0" % (kind.encode(), len(content)) + content, 1)
    atomic_write(path, raw, tmp_dir=tmp_dir, perm=0o444)
    return oid
