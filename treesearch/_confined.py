"""File changes confined to a folder, safe against a folder swapped for a symlink at any moment.

Every folder on the way is opened from its parent's descriptor with ``O_NOFOLLOW|O_DIRECTORY``
and the change is made relative to the last descriptor (``dir_fd``), so there is no moment
between a check and a use at which a symlink could send a write or a delete elsewhere: a folder
that is a symlink, now or by the time it is opened, is refused (``PathEscapeError``), never
followed. New files and folders get their mode from the process umask through the kernel
(``0o666``/``0o777`` less the umask), which is never read or changed. Writes are atomic: a
temporary file in the same folder, then a rename.

``rel`` is always a ``/``-separated path relative to ``root``; callers check their own rules
(``.git``, names) first, these functions refuse only what would leave ``root``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat

from treesearch.errors import PathEscapeError, ToolError

__all__ = ["prune_empty", "remove_file", "write_file"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _parts(rel: str) -> list[str]:
    parts = rel.split("/")
    if not rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\0" in rel:
        raise PathEscapeError(f"{rel!r}: not a relative path inside the workspace")
    return parts


def _open_folder(root: str | os.PathLike[str], rel: str, folders: list[str], create: bool) -> int:
    """A descriptor of ``root/folders`` reached without following any symlink (``create``:
    making missing folders)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in folders:
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):  # made meanwhile: open it
                    os.mkdir(part, 0o777, dir_fd=fd)
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise PathEscapeError(f"{rel}: folder {part!r} is a symlink") from exc
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_file(
    root: str | os.PathLike[str], rel: str, data: bytes, *, mode: int | None = None
) -> None:
    """Replace ``root/rel`` atomically by ``data``, making missing folders.

    ``mode``: the permission bits to set; ``None`` keeps an existing file's bits, and a new
    file gets ``0o666`` less the umask. Raises ``PathEscapeError`` when a folder on the way is a
    symlink or ``rel`` leaves ``root``, ``ToolError`` when ``rel`` exists and is not a regular
    file, ``OSError`` otherwise.
    """
    parts = _parts(rel)
    folder = _open_folder(root, rel, parts[:-1], create=True)
    name = parts[-1]
    try:
        try:
            info: os.stat_result | None = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            info = None
        if info is not None and stat.S_ISLNK(info.st_mode):
            raise PathEscapeError(f"{rel}: it is a symlink")
        if info is not None and not stat.S_ISREG(info.st_mode):
            raise ToolError(f"{rel}: it exists and is not a regular file")
        if mode is None and info is not None:
            mode = stat.S_IMODE(info.st_mode)
        temp = f".{name}.{secrets.token_hex(4)}.tmp"
        fd = os.open(temp, _NEW_FILE_FLAGS, 0o666, dir_fd=folder)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                if mode is not None:
                    os.fchmod(handle.fileno(), mode)
            os.rename(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=folder)
            raise
    finally:
        os.close(folder)


def remove_file(root: str | os.PathLike[str], rel: str) -> None:
    """Delete the file (or symlink, never what it points to) ``root/rel``.

    Raises ``PathEscapeError`` when a folder on the way is a symlink, ``OSError`` otherwise.
    """
    parts = _parts(rel)
    folder = _open_folder(root, rel, parts[:-1], create=False)
    try:
        os.unlink(parts[-1], dir_fd=folder)
    finally:
        os.close(folder)


def prune_empty(root: str | os.PathLike[str], rel: str) -> None:
    """Remove folder ``root/rel`` and then its parents while they are empty (never ``root``);
    stops quietly at the first one that is not empty, not a folder or not there."""
    parts = _parts(rel) if rel not in ("", ".") else []
    while parts:
        try:
            folder = _open_folder(root, rel, parts[:-1], create=False)
        except (OSError, PathEscapeError):
            return
        try:
            os.rmdir(parts[-1], dir_fd=folder)
        except OSError:
            return
        finally:
            os.close(folder)
        parts.pop()
