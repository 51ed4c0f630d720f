"""Writing a capture's trees without a git process: the blobs of the changed files and the trees
on the changed paths, rebuilt from the parent tree (the rest of it is shared, unread).

A scan that knows which paths changed (the stat cache, the watcher) used to run ``git
update-index`` and ``git write-tree`` for every capture (~3.5 ms each, most of a session's step).
``TreeWriter.edit`` writes the same objects itself: a blob is ``blob <size>\\0<data>``, a tree is
its entries ``<octal mode> <name>\\0<20-byte id>`` sorted as git sorts them (a sub-tree's name
compares as if it ended in ``/``), written as loose objects where git would write them (the
repository's ``objects``, or the ``GIT_OBJECT_DIRECTORY`` the store runs git with: a search
worker shares the search store's objects). The bytes are exactly ``git write-tree``'s (a test
compares them on random edits), so tree ids do not change.

Trees are read from loose objects directly, or else through ONE long-lived ``git cat-file
--batch`` (``TreeReader``; started when first needed, closed with the store; restarted once on a
miss, so objects another process wrote or packed since are found). Parsed trees are kept by id
(trees never change), those written here included.

Interface (kept small, so the restore's tree reader can later be the same object):
``TreeReader.entries(tree) -> dict[name, (mode, id)]`` and ``close()``;
``TreeWriter.edit(base_tree, {path: (mode, blob id) | None}) -> tree id`` and ``blob(data)``.
``Unsupported`` means "let git do it" (a file where a folder is, or the other way round): the
caller falls back to ``update-index``.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import weakref
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path

from treesearch.store._git import GitFailed, GitRunner, git_executable
from treesearch.store._objects import object_id, write_object

TREE_MODE = 0o40000
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
_CACHE_MAX = 8192
"""Parsed trees kept (by id); the oldest go first."""

Entries = dict[bytes, tuple[int, str]]
"""A tree's entries: name -> (git mode, object id)."""


class Unsupported(Exception):
    """An edit this writer leaves to git (the caller runs ``update-index`` instead)."""


def objects_dir_of(git: GitRunner) -> Path:
    """Where git writes this repository's objects: ``GIT_OBJECT_DIRECTORY`` if the store runs
    git with one (a search worker), else ``<git dir>/objects``."""
    env_dir = git.env.get("GIT_OBJECT_DIRECTORY")
    return Path(env_dir) if env_dir else git.git_dir / "objects"


def parse_tree(content: bytes) -> Entries:
    """The entries of a tree object's content."""
    out: Entries = {}
    pos, end = 0, len(content)
    while pos < end:
        sp = content.index(b" ", pos)
        nul = content.index(b"\0", sp)
        mode = int(content[pos:sp], 8)
        out[content[sp + 1 : nul]] = (mode, content[nul + 1 : nul + 21].hex())
        pos = nul + 21
    return out


def _sort_key(item: tuple[bytes, tuple[int, str]]) -> bytes:
    name, (mode, _oid) = item
    return name + b"/" if mode == TREE_MODE else name


def tree_content(entries: Mapping[bytes, tuple[int, str]]) -> bytes:
    """A tree object's content, entries in git's order (a tree's name sorts as ``name/``)."""
    return b"".join(
        b"%o %s\0%s" % (mode, name, bytes.fromhex(oid))
        for name, (mode, oid) in sorted(entries.items(), key=_sort_key)
    )


class TreeReader:
    """Parsed trees by id: loose objects read directly, the rest through one long-lived
    ``git cat-file --batch`` (see the module's docstring)."""

    def __init__(self, git: GitRunner, objects_dir: Callable[[], Path]) -> None:
        self._git = git
        self._objects_dir = objects_dir
        self._proc: subprocess.Popen[bytes] | None = None
        self.cache: dict[str, Entries] = {}
        self.started = 0
        """``cat-file`` processes started (for tests and benchmarks)."""

    def entries(self, tree: str) -> Entries:
        """The entries of tree ``tree`` (do not change the dict: it is shared)."""
        known = self.cache.get(tree)
        if known is not None:
            return known
        parsed = parse_tree(self.read(tree, "tree"))
        self.remember(tree, parsed)
        return parsed

    def read(self, oid: str, kind: str) -> bytes:
        """The content of object ``oid``, which must be of ``kind`` (``tree``, ``blob``)."""
        content = self._loose(oid, kind)
        return content if content is not None else self._batch(oid, kind)

    def lookup(self, tree: str, path: str) -> tuple[int, str] | None:
        """The entry (mode, id) of ``path`` in ``tree``; ``None``: not there."""
        *folders, name = os.fsencode(path).split(b"/")
        for part in folders:
            entry = self.entries(tree).get(part)
            if entry is None or entry[0] != TREE_MODE:
                return None
            tree = entry[1]
        return self.entries(tree).get(name)

    def remember(self, tree: str, entries: Entries) -> None:
        self.cache[tree] = entries
        if len(self.cache) > _CACHE_MAX:
            for old in list(self.cache)[: _CACHE_MAX // 4]:
                del self.cache[old]

    def _loose(self, oid: str, kind: str) -> bytes | None:
        """The object's content from its loose object, id checked; ``None``: not loose (or not
        a clean object of ``kind``: git then reads it, and reports any damage)."""
        path = os.path.join(self._objects_dir(), oid[:2], oid[2:])
        try:
            with open(path, "rb") as fh:
                raw = fh.read()
            full = zlib.decompress(raw)
        except (OSError, zlib.error):
            return None
        head, sep, content = full.partition(b"\0")
        if not sep or head != b"%s %d" % (kind.encode(), len(content)):
            return None
        if object_id(kind, content) != oid:
            return None
        return content

    def _batch(self, oid: str, kind: str) -> bytes:
        """The object's content from ``cat-file --batch``; restarted once on a miss (a pack
        that another process wrote after it started, which git may not look for again)."""
        for attempt in (0, 1):
            if self._proc is None or self._proc.poll() is not None or attempt:
                self.close()
                self._proc = subprocess.Popen(
                    [git_executable(), "cat-file", "--batch"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    env=dict(self._git.env),
                    cwd=str(self._git.git_dir),
                )  # no pass_fds: a long-lived child must not hold the store's lock
                weakref.finalize(self, _stop, self._proc)  # a store nobody closed
                self.started += 1
            proc = self._proc
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(oid.encode() + b"\n")
                proc.stdin.flush()
                header = proc.stdout.readline()
            except OSError:
                header = b""
            parts = header.split()
            if len(parts) == 3 and parts[0] == oid.encode():
                if parts[1] != kind.encode():
                    raise GitFailed(
                        ["cat-file", "--batch", oid], 1, b"not a %s: %s" % (kind.encode(), header)
                    )
                size = int(parts[2])
                content = proc.stdout.read(size + 1)[:size]
                if len(content) == size:
                    return content
        raise GitFailed(
            ["cat-file", "--batch", oid], 1, b"%s missing: %s" % (kind.encode(), header)
        )

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End a ``cat-file --batch``: its input closed, it exits."""
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class TreeWriter:
    """Writes blobs and trees as loose objects, where this repository's git would."""

    def __init__(self, git: GitRunner, tmp_dir: Path) -> None:
        self._git = git
        self._tmp_dir = tmp_dir
        self.reader = TreeReader(git, self.objects_dir)

    def objects_dir(self) -> Path:
        return objects_dir_of(self._git)

    def blob(self, data: bytes) -> str:
        """Write a blob (unless it exists); its id."""
        return write_object(self.objects_dir(), "blob", data, tmp_dir=self._tmp_dir)

    def edit(self, base: str | None, changes: Mapping[str, tuple[int, str] | None]) -> str:
        """The id of ``base`` (``None``: empty) with ``changes`` made (path -> (git mode, blob
        id); ``None``: removed), written with every new tree on the way; what ``update-index``
        of those paths then ``write-tree`` give. A folder left empty goes (git keeps no empty
        tree). Raises ``Unsupported`` for a file where the base has a folder or the other way
        round (unless the same edit removes what is in the way)."""
        nested: dict[bytes, object] = {}
        for path, change in changes.items():
            parts = os.fsencode(path).split(b"/")
            node = nested
            for part in parts[:-1]:
                node = node.setdefault(part, {})  # type: ignore[assignment]
                if not isinstance(node, dict):
                    raise Unsupported(f"{path}: a file and a folder of one name in one edit")
            if isinstance(node.get(parts[-1]), dict):
                raise Unsupported(f"{path}: a file and a folder of one name in one edit")
            node[parts[-1]] = change
        tree = self._edit(base, nested)
        if tree is None:
            return self._write_tree({})
        return tree

    def _edit(self, base: str | None, changes: dict[bytes, object]) -> str | None:
        entries = dict(self.reader.entries(base)) if base is not None else {}
        # Removals first, so that a file may replace a folder's last file and the other way.
        for name, change in changes.items():
            if change is None:
                old = entries.get(name)
                if old is not None and old[0] == TREE_MODE:
                    raise Unsupported(f"{os.fsdecode(name)}: a folder where a file is removed")
                entries.pop(name, None)
        for name, change in changes.items():
            if isinstance(change, dict):
                old = entries.get(name)
                if old is not None and old[0] != TREE_MODE:
                    raise Unsupported(f"{os.fsdecode(name)}: a file where a folder is")
                sub = self._edit(old[1] if old is not None else None, change)
                if sub is None:
                    entries.pop(name, None)
                else:
                    entries[name] = (TREE_MODE, sub)
        for name, change in changes.items():
            if isinstance(change, tuple):
                old = entries.get(name)
                if old is not None and old[0] == TREE_MODE:
                    raise Unsupported(f"{os.fsdecode(name)}: a folder where a file is")
                entries[name] = change
        if not entries:
            return None
        return self._write_tree(entries)

    def _write_tree(self, entries: Entries) -> str:
        oid = write_object(self.objects_dir(), "tree", tree_content(entries), tmp_dir=self._tmp_dir)
        self.reader.remember(oid, entries)
        return oid

    def close(self) -> None:
        self.reader.close()
