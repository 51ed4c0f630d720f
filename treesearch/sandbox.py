"""Run processes and touch files on behalf of agents, within bounds.

Two halves:

* ``run`` starts a command in its own session (so its own process group), feeds it optional
  input, keeps the first and last part of each output stream, enforces a wall-clock timeout and
  optional resource limits, and leaves no member of the group behind when it returns.
* ``read_file``, ``write_file``, ``replace_in_file`` and ``list_dir`` are the file tools agents
  use. Every path is relative to a workspace root and is checked by ``resolve_in_workspace``: no
  absolute paths, no ``..``, no symlink hop that leaves the workspace, nothing inside a ``.git``
  folder. Writes never go through a symlink, even one that stays inside the workspace, and replace
  files atomically.

POSIX only. The module never prints.

Errors, one rule for ``run``: problems with *where* to run (a missing or non-folder ``cwd``, bad
arguments, limits the system refuses) raise ``SandboxError``; problems with *what* to run (a
missing or non-executable program) are the command's own failure and come back as a
``ProcessResult`` with ``exit_code=None`` and the reason in ``stderr``, like a shell's exit 127.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TypeAlias

from treesearch import _confined
from treesearch._sandbox_run import Limits, run
from treesearch.errors import PathEscapeError, SandboxError, ToolError

__all__ = [
    "Limits",
    "list_dir",
    "read_file",
    "replace_in_file",
    "resolve_in_workspace",
    "run",
    "write_file",
]

StrPath: TypeAlias = "str | os.PathLike[str]"

_MAX_SYMLINK_HOPS = 40

# --- file tools -----------------------------------------------------------------------------------


def resolve_in_workspace(workspace: StrPath, path: StrPath) -> Path:
    """Return the real location of ``path``, relative to ``workspace``, once checked as allowed.

    Symlinks are followed only while every hop stays inside the workspace; the returned path has
    no symlink left in its existing part. Nothing needs to exist beyond the workspace itself.

    Raises:
        PathEscapeError: ``path`` is absolute, has a ``..`` component, leads through a symlink
            out of the workspace, or lies inside a ``.git`` folder.
        ToolError: ``path`` is not a usable name (NUL byte, symlink loop).
        SandboxError: ``workspace`` is not a folder.
    """
    return Path(_resolve(workspace, path, for_write=False))


def read_file(workspace: StrPath, path: StrPath, *, max_bytes: int = 1_000_000) -> str:
    """Return the text of the regular file ``path`` (UTF-8, undecodable bytes replaced).

    Raises:
        ToolError: the file is missing, not a regular file, or larger than ``max_bytes`` (the
            message gives its size).
        PathEscapeError: see ``resolve_in_workspace``.
    """
    real = _resolve(workspace, path, for_write=False)
    display = os.fspath(path)
    try:
        # O_NONBLOCK: a FIFO planted in the workspace must not block the agent forever.
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise _tool_error(display, exc) from exc
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{display} is a folder, not a file (use list_dir)")
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(f"cannot read {display}: not a regular file")
        if info.st_size > max_bytes:
            raise ToolError(
                f"cannot read {display}: it has {info.st_size} bytes, more than the "
                f"{max_bytes}-byte limit; read a part of it with a command (head, sed -n)"
            )
        chunks = []
        remaining = max_bytes + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise ToolError(f"cannot read {display}: it grew beyond the {max_bytes}-byte limit")
    return data.decode("utf-8", errors="replace")


def write_file(workspace: StrPath, path: StrPath, content: str) -> None:
    """Write ``content`` (as UTF-8) to ``path``, creating missing parent folders in the workspace.

    The file is replaced atomically (temporary file in the same folder, then rename): readers see
    the old or the new content, never a mix. An existing file keeps its permission bits; a new
    one gets the default ``0o666`` less the umask.

    Writes never go through a symlink (a symlinked folder on the way or a symlink as the file
    itself), even one that stays inside the workspace: the caller must name the real path.

    Raises:
        ToolError: ``path`` is a folder, goes through a symlink, a parent is a file, or the
            content cannot be encoded.
        PathEscapeError: see ``resolve_in_workspace``.
    """
    display = os.fspath(path)
    target = _resolve(workspace, path, for_write=True)
    try:
        data = content.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError as exc:
        raise ToolError(
            f"cannot write {display}: content is not valid text ({exc.reason})"
        ) from exc
    _atomic_write(workspace, target, data, display)


def replace_in_file(workspace: StrPath, path: StrPath, old: str, new: str) -> None:
    """Replace the one occurrence of ``old`` in ``path`` by ``new``.

    ``old`` must match the file's text exactly once (overlapping matches count); otherwise the
    file is left untouched. Bytes that are not valid UTF-8 elsewhere in the file are kept as they
    are. The write follows the rules of ``write_file``.

    Raises:
        ToolError: the file is missing, ``old`` is empty, or it matches 0 or several times (the
            message says how many).
        PathEscapeError: see ``resolve_in_workspace``.
    """
    display = os.fspath(path)
    if not old:
        raise ToolError(f"cannot edit {display}: the text to replace is empty")
    target = _resolve(workspace, path, for_write=True)
    try:
        with open(target, "rb") as handle:
            # surrogateescape: undecodable bytes survive the round trip unchanged.
            text = handle.read().decode("utf-8", errors="surrogateescape")
    except OSError as exc:
        raise _tool_error(display, exc) from exc
    matches = _count_overlapping(text, old)
    if matches == 0:
        raise ToolError(
            f"found 0 matches of the text in {display}; the text must match the file exactly, "
            "including whitespace and indentation"
        )
    if matches > 1:
        raise ToolError(
            f"found {matches} matches of the text in {display}; "
            "give more context so it matches exactly once"
        )
    updated = text.replace(old, new, 1)
    try:
        data = updated.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError as exc:
        raise ToolError(
            f"cannot edit {display}: new text is not valid text ({exc.reason})"
        ) from exc
    _atomic_write(workspace, target, data, display)


def list_dir(workspace: StrPath, path: StrPath = ".") -> list[str]:
    """Return the sorted names in folder ``path``; folders end with ``/``.

    Nothing is hidden (dot files included, ``.git`` is listed as an entry) but the contents of a
    ``.git`` folder are never listed. A symlink is listed by its name without a ``/``, whatever it
    points to.

    Raises:
        ToolError: ``path`` is missing or not a folder.
        PathEscapeError: see ``resolve_in_workspace``.
    """
    real = _resolve(workspace, path, for_write=False)
    display = os.fspath(path)
    try:
        with os.scandir(real) as entries:
            names = [
                entry.name + "/" if entry.is_dir(follow_symlinks=False) else entry.name
                for entry in entries
            ]
    except NotADirectoryError as exc:
        raise ToolError(f"{display} is a file, not a folder (use read_file)") from exc
    except OSError as exc:
        raise _tool_error(display, exc) from exc
    return sorted(names)


def _resolve(workspace: StrPath, path: StrPath, *, for_write: bool) -> str:
    """Check ``path`` against the workspace rules; return its real location as a string."""
    display = os.fspath(path)
    root = os.path.realpath(os.fspath(workspace))
    if not os.path.isdir(root):
        raise SandboxError(f"workspace {os.fspath(workspace)!r} is not a folder")
    if "\0" in display:
        raise ToolError(f"refusing path {display!r}: it contains a NUL byte")

    def escape(reason: str) -> PathEscapeError:
        return PathEscapeError(
            f"refusing path {display!r}: paths must be relative to the workspace and stay inside "
            f"it ({reason})"
        )

    if os.path.isabs(display):
        raise escape("absolute path")
    parts = [part for part in display.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise escape("'..' component")
    if any(_is_git_dir_name(part) for part in parts):
        raise _git_error(display)

    real = _follow_inside(root, os.fspath(workspace), parts, escape)
    if any(_is_git_dir_name(part) for part in _relative_parts(root, real)):
        raise _git_error(display)
    if for_write:
        current = root
        for part in parts:
            current = os.path.join(current, part)
            if os.path.islink(current):
                raise ToolError(
                    f"refusing to write {display}: {os.path.relpath(current, root)} is a symlink; "
                    "write to the path it points to instead"
                )
    return real


def _follow_inside(
    root: str, given_root: str, parts: list[str], escape: Callable[[str], PathEscapeError]
) -> str:
    """Walk ``parts`` from ``root``, following symlinks one hop at a time while they stay inside.

    ``root`` is the workspace's real path; ``given_root`` the path the caller used for it, which
    absolute symlink targets may name instead (e.g. ``/tmp/ws`` for ``/private/tmp/ws``).
    """
    pending = list(reversed(parts))
    current = root
    hops = 0
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":  # only symlink targets bring these; the caller's own are refused
            if current == root:
                raise escape("a symlink leads outside the workspace")
            current = os.path.dirname(current)
            continue
        candidate = os.path.join(current, part)
        try:
            info = os.lstat(candidate)
        except OSError:  # missing (or under a file): nothing further to follow
            current = candidate
            continue
        if not stat.S_ISLNK(info.st_mode):
            current = candidate
            continue
        hops += 1
        if hops > _MAX_SYMLINK_HOPS:
            raise ToolError(f"too many levels of symbolic links at {candidate}")
        target = os.readlink(candidate)
        if os.path.isabs(target):
            rest = _strip_root(target, (root, os.path.abspath(given_root)))
            if rest is None:
                raise escape("a symlink leads outside the workspace")
            current = root
            pending.extend(reversed(rest))
        else:
            pending.extend(reversed(target.split("/")))
    return current


def _strip_root(target: str, roots: tuple[str, ...]) -> list[str] | None:
    """Components of absolute ``target`` below one of ``roots`` (lexically), or None."""
    for base in roots:
        if target == base or target.startswith(base.rstrip("/") + "/"):
            return target[len(base) :].split("/")
    return None


def _relative_parts(root: str, real: str) -> list[str]:
    rel = os.path.relpath(real, root)
    return [] if rel == "." else rel.split(os.sep)


def _is_git_dir_name(part: str) -> bool:
    # casefold: on a case-insensitive file system ".GIT" is the same folder.
    return part.casefold() == ".git"


def _git_error(display: str) -> PathEscapeError:
    return PathEscapeError(
        f"refusing path {display!r}: it is inside a .git folder, the repository's metadata, "
        "which agents never read or change"
    )


def _tool_error(display: str, exc: OSError) -> ToolError:
    if exc.errno == errno.ENOENT:
        return ToolError(f"no such file or folder: {display}")
    if exc.errno == errno.EISDIR:
        return ToolError(f"{display} is a folder, not a file (use list_dir)")
    if exc.errno in (errno.ENOTDIR, errno.EEXIST):
        return ToolError(f"{display}: a part of this path is a file, not a folder")
    return ToolError(f"cannot use {display}: {exc.strerror or exc}")


def _count_overlapping(text: str, needle: str) -> int:
    count, start = 0, text.find(needle)
    while start != -1:
        count += 1
        start = text.find(needle, start + 1)
    return count


def _atomic_write(workspace: StrPath, target: str, data: bytes, display: str) -> None:
    """Replace ``target`` (checked by ``_resolve``) by a file holding ``data``, making missing
    folders and keeping an existing file's permission bits (a new file gets ``0o666`` less the
    umask, as any editor would). The write goes through folder descriptors opened without
    following symlinks, so a folder swapped for a symlink after the check is refused, not used."""
    try:
        info: os.stat_result | None = os.lstat(target)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise _tool_error(display, exc) from exc
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{display} is a folder, not a file (use list_dir)")
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise ToolError(f"refusing to write {display}: it exists and is not a regular file")
    root = os.path.realpath(os.fspath(workspace))
    rel = "/".join(_relative_parts(root, target))
    try:
        # No fsync: the rename protects readers and the store against a half-written file; power
        # loss is not a failure this tool promises to survive.
        _confined.write_file(root, rel, data)
    except PathEscapeError as exc:
        raise PathEscapeError(f"refusing to write {display}: {exc}") from exc
    except OSError as exc:
        raise _tool_error(display, exc) from exc
