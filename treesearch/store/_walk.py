"""Walking the workspace: what a capture contains, and what it leaves out (and why)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field

from treesearch.store.values import Skipped

DEFAULT_FILE_MODE = 0o644
DEFAULT_EXEC_MODE = 0o755


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
    files: dict[str, os.stat_result]
    """Captured regular files and symlinks: relative path -> lstat."""
    empty_dirs: list[str]
    """Folders with nothing captured beneath them (leaves only)."""
    skipped: list[Skipped]
    nested_repos: list[str]
    modes: dict[str, int]
    """Permission bits of regular files whose mode is not the default for their exec bit."""


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
    files: dict[str, os.stat_result] = {}
    skipped: list[Skipped] = []
    nested: list[str] = []
    modes: dict[str, int] = {}
    empty_dirs: list[str] = []

    def visit(
        abs_dir: str, rel_dir: str, repo_rel: str, rules: IgnoreRules | None, only_keep: bool
    ) -> int:
        try:
            with os.scandir(abs_dir) as it:
                entries = list(it)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot list folder: {exc.strerror}", rel_dir or ".") from exc
        if rel_dir and any(e.name == ".git" for e in entries):
            # A nested repository: its files are ours to capture, its own ignore rules apply.
            nested.append(rel_dir)
            repo_rel = rel_dir
            rules = rules_for(rel_dir)
            only_keep = False
        prefix = rel_dir + "/" if rel_dir else ""
        repo_prefix_len = len(repo_rel) + 1 if repo_rel else 0
        count = 0
        for entry in entries:
            name = entry.name
            if name == ".git":
                continue
            rel = prefix + name
            in_repo = rel[repo_prefix_len:]
            st = entry.stat(follow_symlinks=False)
            mode = st.st_mode
            if stat.S_ISDIR(mode):
                sub_only_keep = only_keep
                if rules is not None and (only_keep or (in_repo + "/") in rules.dirs):
                    if in_repo not in rules.keep_dirs:
                        continue
                    sub_only_keep = True
                n = visit(entry.path, rel, repo_rel, rules, sub_only_keep)
                if n == 0 and not sub_only_keep:
                    empty_dirs.append(rel)
                    n = 1
                count += n
                continue
            if (
                rules is not None
                and (only_keep or in_repo in rules.files)
                and in_repo not in rules.keep
            ):
                continue
            if stat.S_ISREG(mode):
                if max_file_bytes is not None and st.st_size > max_file_bytes:
                    skipped.append(
                        Skipped(rel, "oversize", f"{st.st_size} bytes > {max_file_bytes}")
                    )
                    continue
                files[rel] = st
                perm = stat.S_IMODE(mode)
                if perm != default_mode(mode):
                    modes[rel] = perm
                count += 1
            elif stat.S_ISLNK(mode):
                files[rel] = st
                count += 1
            else:
                skipped.append(Skipped(rel, "special", _kind(mode)))
        return count

    visit(root, "", "", rules_for(""), False)
    return WalkResult(files, empty_dirs, skipped, nested, modes)


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
