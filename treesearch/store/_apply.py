"""``git apply`` on a folder: all or nothing, paths confined by git's own checks.

git reads the patch (git-style and plain ``diff -u``; new, deleted and renamed files, mode
changes, ``\\ No newline at end of file``, any bytes), checks every hunk of every file before
it writes one (a hunk may sit at an offset from its stated line, never with fuzz), and refuses
paths with ``..`` or ``.git`` and paths beyond a symlink. What git does not do, done here: a file
patched in place keeps its permission bits (git writes the new content with ``0666 & ~umask``,
so a private file would become readable by all).
"""

from __future__ import annotations

import codecs
import os
import re
import stat
from pathlib import Path

from treesearch.errors import StoreError
from treesearch.store._fs import SafeTree, UnsafePathError
from treesearch.store._git import GitFailed, GitRunner
from treesearch.types import PatchResult

__all__ = ["PatchError", "apply"]

_OFFSET = re.compile(rb"^Hunk #\d+ succeeded at \d+ \(offset (-?\d+) lines?\)\.$")
_NAME = rb'("(?:[^"\\]|\\.)*"|.*?)'  # bare, or C-quoted as git quotes unusual names
_CHECKING = re.compile(rb"^Checking patch " + _NAME + rb"(?: => " + _NAME + rb")?\.\.\.$")


class PatchError(StoreError):
    """A patch is malformed or does not apply; nothing was written."""

    def __init__(self, message: str, git_message: str = "") -> None:
        super().__init__(message)
        self.git_message = git_message
        """What ``git apply`` said, as it said it."""


def _unquote(name: bytes) -> str:
    """A path as ``git apply -v`` names it: bare, or C-quoted in double quotes."""
    if len(name) > 1 and name.startswith(b'"') and name.endswith(b'"'):
        name = codecs.escape_decode(name[1:-1])[0]
    return name.decode("utf-8", "surrogateescape")


def _checked(verbose: bytes) -> tuple[list[tuple[str, str]], dict[str, list[int]]]:
    """From ``git apply --check -v``'s report: ``(old path, new path)`` of each file (equal
    unless the file is renamed), and per file the offsets of its hunks found off their line."""
    touched: list[tuple[str, str]] = []
    offsets: dict[str, list[int]] = {}
    for line in verbose.splitlines():
        checking = _CHECKING.match(line)
        if checking:
            old = _unquote(checking.group(1))
            new = _unquote(checking.group(2)) if checking.group(2) is not None else old
            touched.append((old, new))
            continue
        offset = _OFFSET.match(line)
        if offset and touched:
            offsets.setdefault(touched[-1][1], []).append(int(offset.group(1)))
    return touched, offsets


def apply(
    runner: GitRunner,
    folder: Path,
    patch: str,
    *,
    strip: int = 1,
    env: dict[str, str] | None = None,
) -> PatchResult:
    """Apply the unified diff ``patch`` to ``folder`` with ``git apply -p<strip>``.

    ``runner`` (with ``env``, when given) decides which repository's settings git reads: a shadow
    store's, whose attributes turn every conversion off, or none. ``PatchError`` (nothing
    written) when the patch is malformed or does not apply; the message carries git's.
    """
    if not patch.strip():
        return PatchResult()
    data = patch.encode("utf-8", "surrogateescape")
    args = ["apply", f"-p{strip}", "--whitespace=nowarn"]
    try:
        checked = runner.call([*args, "--check", "-v", "-"], input=data, env=env, cwd=folder)
    except GitFailed as exc:
        raise PatchError(
            f"the patch does not apply to {folder}; no file was changed:\n{exc.stderr}", exc.stderr
        ) from exc
    touched, offsets = _checked(checked.stderr)
    paths = {path for pair in touched for path in pair}
    before = _lstat(folder, paths)
    try:
        runner.run([*args, "-"], input=data, env=env, cwd=folder)
    except GitFailed as exc:  # it passed the check: the files changed in between
        raise PatchError(f"the patch no longer applies to {folder}: {exc.stderr}") from exc
    after = _lstat(folder, paths)
    added: list[str] = []
    modified: list[str] = []
    deleted: list[str] = []
    kept: dict[str, int] = {}
    for old, new in touched:
        was, now = before[old], after[new]
        if old != new:
            deleted.append(old)
            added.append(new)
        elif was is None:
            added.append(new)
        elif now is None:
            deleted.append(old)
        else:
            modified.append(new)
            if _lost_permissions(was, now):
                kept[new] = stat.S_IMODE(was.st_mode)
    if kept:
        with SafeTree(str(folder)) as tree:
            for path, perm in kept.items():
                tree.chmod(path, perm)
    hunks = sum(1 for line in patch.splitlines() if line.startswith("@@ -"))
    return PatchResult(tuple(added), tuple(modified), tuple(deleted), hunks, offsets)


def _lstat(folder: Path, paths: set[str]) -> dict[str, os.stat_result | None]:
    """``lstat`` of each path below ``folder`` (``None``: missing, or beyond a symlink, which
    git refuses)."""
    found: dict[str, os.stat_result | None] = {}
    with SafeTree(str(folder)) as tree:
        for path in paths:
            try:
                found[path] = tree.lstat(path)
            except (UnsafePathError, ValueError, OSError):
                found[path] = None
    return found


def _lost_permissions(was: os.stat_result, now: os.stat_result) -> bool:
    """Did git give a file patched in place other permission bits than it had? (An exec bit
    the patch itself changed is not a loss.)"""
    if not (stat.S_ISREG(was.st_mode) and stat.S_ISREG(now.st_mode)):
        return False
    if (was.st_mode ^ now.st_mode) & 0o100:
        return False
    return stat.S_IMODE(was.st_mode) != stat.S_IMODE(now.st_mode)
