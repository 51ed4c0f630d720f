"""Walking the workspace: what a capture contains, and what it leaves out (and why)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field

from treesearch.store.values import Skipped

MTIME, CTIME, SIZE, INODE, MODE = range(5)
"""Indexes of a stat key in ``WalkResult.files``."""
DEFAULT_FILE_MODE = 0o644
DEFAULT_EXEC_MODE = 0o755
_S_IFMT = stat.S_IFMT(0o177777)
_S_IFREG = stat.S_IFREG
_S_IFLNK = stat.S_IFLNK


@dataclass
class IgnoreRules:
    """Ignored paths of one repository root, as git lists them (``dir/`` for whole folders)."""

    files: set[str] = field(default_factory=set)
    dirs: set[str] = field(default_factory=set)
    keep: set[str] = field(default_factory=set)
    """Paths the user's own repository tracks: captured even when a pattern ignores them."""
    keep_dirs: set[str] = field(default_factory=set)
    """Every folder that holds a ``keep`` path (so an ignored folder is still entered for it)."""


@dataclass
class WalkResult:
    files: dict[str, tuple[int, int, int, int, int]]
    """Captured regular files and symlinks: relative path -> stat key
    ``(mtime_ns, ctime_ns, size, inode, st_mode)`` (the scan's cache compares these directly)."""
    empty_dirs: list[str]
    """Folders with nothing captured beneath them (leaves only)."""
    skipped: list[Skipped]
    nested_repos: list[str]
    modes: dict[str, int]
    """Permission bits of regular files whose mode is not the default for their exec bit."""
    dir_mtimes: dict[str, int] = field(default_factory=dict)
    """mtime (ns) of every folder walked: a changed one may hold new ignored files."""
    ignore_files: dict[str, tuple[int, int]] = field(default_factory=dict)
    """``.gitignore`` files seen: path -> (mtime ns, size)."""
    dir_names: dict[str, frozenset[str]] = field(default_factory=dict)
    """Entry names of every folder walked (a folder whose names did not change holds no new
    ignored file, even if its mtime moved because a file was replaced)."""


def default_mode(st_mode: int) -> int:
    return DEFAULT_EXEC_MODE if st_mode & 0o100 else DEFAULT_FILE_MODE


def walk(
    root: str,
    rules_for: Callable[[str], IgnoreRules | None],
    *,
    max_file_bytes: int | None,
) -> WalkResult:
    """Walk ``root`` with ``os.scandir``, one ``lstat`` per entry.

    ``rules_for(repo_rel)`` gives the ignore rules of the repository rooted at ``repo_rel`` (``""``
    for the workspace, ``"sub/dir"`` for a nested repository), or ``None`` to ignore nothing.
    ``.git`` entries are never entered or captured, at any depth.
    """
    files: dict[str, tuple[int, int, int, int, int]] = {}
    skipped: list[Skipped] = []
    nested: list[str] = []
    modes: dict[str, int] = {}
    empty_dirs: list[str] = []
    dir_mtimes: dict[str, int] = {}
    ignore_files: dict[str, tuple[int, int]] = {}
    dir_names: dict[str, frozenset[str]] = {}

    def visit(
        abs_dir: str,
        rel_dir: str,
        repo_rel: str,
        rules: IgnoreRules | None,
        only_keep: bool,
        mtime: int,
    ) -> int:
        dir_mtimes[rel_dir] = mtime
        try:
            with os.scandir(abs_dir) as it:
                entries = list(it)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot list folder: {exc.strerror}", rel_dir or ".") from exc
        names = frozenset(e.name for e in entries)
        dir_names[rel_dir] = names
        if rel_dir and ".git" in names:
            # A nested repository: its files are ours to capture, its own ignore rules apply.
            nested.append(rel_dir)
            repo_rel = rel_dir
            rules = rules_for(rel_dir)
            only_keep = False
        prefix = rel_dir + "/" if rel_dir else ""
        repo_prefix_len = len(repo_rel) + 1 if repo_rel else 0
        if rules is not None and not (rules.files or rules.dirs or only_keep):
            rules = None  # nothing is ignored here: skip the checks in the hot loop
        count = 0
        # Hot loop (one iteration per file): kept free of function calls that are not needed.
        for entry in entries:
            name = entry.name
            if name == ".git":
                continue
            rel = prefix + name
            if entry.is_dir(follow_symlinks=False):  # d_type: no system call
                sub_only_keep = only_keep
                if rules is not None:
                    in_repo = rel[repo_prefix_len:]
                    if only_keep or (in_repo + "/") in rules.dirs:
                        if in_repo not in rules.keep_dirs:
                            continue
                        sub_only_keep = True
                n = visit(
                    entry.path,
                    rel,
                    repo_rel,
                    rules,
                    sub_only_keep,
                    entry.stat(follow_symlinks=False).st_mtime_ns,
                )
                if n == 0 and not sub_only_keep:
                    empty_dirs.append(rel)
                    n = 1
                count += n
                continue
            if rules is not None:
                in_repo = rel[repo_prefix_len:]
                if (only_keep or in_repo in rules.files) and in_repo not in rules.keep:
                    continue
            st = entry.stat(follow_symlinks=False)
            mode = st.st_mode
            fmt = mode & _S_IFMT
            if fmt == _S_IFREG:
                if max_file_bytes is not None and st.st_size > max_file_bytes:
                    skipped.append(
                        Skipped(rel, "oversize", f"{st.st_size} bytes > {max_file_bytes}")
                    )
                    continue
                files[rel] = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, mode)
                if name == ".gitignore":
                    ignore_files[rel] = (st.st_mtime_ns, st.st_size)
                perm = mode & 0o7777
                if perm != (DEFAULT_EXEC_MODE if mode & 0o100 else DEFAULT_FILE_MODE):
                    modes[rel] = perm
                count += 1
            elif fmt == _S_IFLNK:
                files[rel] = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, mode)
                count += 1
            else:
                skipped.append(Skipped(rel, "special", _kind(mode)))
        return count

    visit(root, "", "", rules_for(""), False, os.lstat(root).st_mtime_ns)
    return WalkResult(
        files, empty_dirs, skipped, nested, modes, dir_mtimes, ignore_files, dir_names
    )


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISBLK(mode):
        return "block device"
    return f"file type {stat.S_IFMT(mode):o}"
