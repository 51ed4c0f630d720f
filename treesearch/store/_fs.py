"""Writing into a folder without ever leaving it: every step is relative to an open folder fd.

A path is resolved one component at a time with ``O_NOFOLLOW|O_DIRECTORY``, so a folder that was
replaced by a symlink (pointing anywhere) stops the operation instead of being written through.
Files are written to a temporary name in their final folder and renamed over the old entry.
A restore keeps a hard-linked file it replaces aside in the root folder while it runs (``keep``):
its rollback renames the very file back, which costs no room (a copy would).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from collections.abc import Callable, Iterable

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePathError(OSError):
    """A path would leave the root (``..``, ``.git``, a symlinked or non-folder component)."""


def _split(rel: str) -> list[str]:
    parts = rel.split("/")
    for part in parts:
        if part in ("", ".", "..") or part == ".git":
            raise UnsafePathError(errno.EINVAL, "refusing unsafe path component", rel)
    return parts


def temp_name(name: str, token: str) -> str:
    """Temporary sibling name for ``name`` (short enough for NAME_MAX)."""
    if len(name.encode("utf-8", "surrogateescape")) > 180:
        name = hashlib.sha1(name.encode("utf-8", "surrogateescape")).hexdigest()
    return f".{name}.ts-{token}"


KEPT_PREFIX, KEPT_SUFFIX = ".ts-", ".kept"


def kept_name(token: str, i: int) -> str:
    """Name, in the root folder, of the ``i``-th file a restore keeps aside (``SafeTree.keep``)."""
    return f"{KEPT_PREFIX}{token}-{i}{KEPT_SUFFIX}"


class SafeTree:
    """Operations on paths below ``root`` that never follow a symlink or leave ``root``."""

    def __init__(self, root: str) -> None:
        self._fds: dict[str, int] = {"": os.open(root, _DIR_FLAGS)}

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def __enter__(self) -> SafeTree:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def dir_fd(self, rel_dir: str, *, create: bool = False) -> int:
        """Open (and cache) the folder ``rel_dir``; create missing folders when ``create``."""
        fd = self._fds.get(rel_dir)
        if fd is not None:
            return fd
        parent, _, name = rel_dir.rpartition("/")
        _split(rel_dir)
        pfd = self.dir_fd(parent, create=create)
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=pfd)
        except FileNotFoundError:
            if not create:
                raise
            os.mkdir(name, 0o755, dir_fd=pfd)
            fd = os.open(name, _DIR_FLAGS, dir_fd=pfd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise UnsafePathError(
                    exc.errno, "is a symlink or not a folder; refusing to write through it", rel_dir
                ) from exc
            raise
        self._fds[rel_dir] = fd
        return fd

    def _parent(self, rel: str, *, create: bool) -> tuple[int, str]:
        _split(rel)
        parent, _, name = rel.rpartition("/")
        return self.dir_fd(parent, create=create), name

    def lstat(self, rel: str) -> os.stat_result | None:
        """``lstat`` of ``rel``, or ``None`` if it (or a folder on its way) is missing."""
        try:
            pfd, name = self._parent(rel, create=False)
            return os.stat(name, dir_fd=pfd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def write_file(self, rel: str, fill: Callable[[int], None], perm: int, token: str) -> None:
        """Create ``rel`` atomically: ``fill(fd)`` writes the content of a fresh temp file,
        which is renamed over the old entry (a failure leaves that as it was)."""
        pfd, name = self._parent(rel, create=True)
        tmp = temp_name(name, token)
        # Made with its final permission bits where the umask lets them through (no fchmod, one
        # change of the file less: each costs a filesystem journal update).
        create = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(tmp, create, perm & 0o777, dir_fd=pfd)
        except FileExistsError:
            os.unlink(tmp, dir_fd=pfd)
            fd = os.open(tmp, create, perm & 0o777, dir_fd=pfd)
        try:
            fill(fd)
            if stat.S_IMODE(os.fstat(fd).st_mode) != perm:
                os.fchmod(fd, perm)
        except BaseException:
            os.close(fd)
            os.unlink(tmp, dir_fd=pfd)
            raise
        os.close(fd)
        self._rename(tmp, name, pfd)

    def write_symlink(self, rel: str, target: bytes, token: str) -> None:
        """Create the symlink ``rel`` atomically (as ``write_file``)."""
        pfd, name = self._parent(rel, create=True)
        tmp = temp_name(name, token)
        try:
            try:
                os.symlink(target, tmp, dir_fd=pfd)
            except FileExistsError:
                os.unlink(tmp, dir_fd=pfd)
                os.symlink(target, tmp, dir_fd=pfd)
        except OSError as exc:
            # (Named by its path: ``symlink`` names the link's target, which may be long.)
            raise OSError(exc.errno, exc.strerror, rel) from None
        self._rename(tmp, name, pfd)

    def make_room(self, rel: str) -> bool:
        """Remove what is at ``rel`` if that frees room for a write of ``rel`` that found the
        disk full: a regular file of one link, or a symlink (one longer than the filesystem
        keeps in its inode has a block of its own). False, with nothing removed, when nothing
        there would free any. (The write that follows is no longer atomic: only for callers
        whose journal can redo it after a kill.)"""
        try:
            pfd, name = self._parent(rel, create=False)
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return False
        if not (stat.S_ISLNK(st.st_mode) or (stat.S_ISREG(st.st_mode) and st.st_nlink == 1)):
            return False
        os.unlink(name, dir_fd=pfd)
        return True

    def _rename(self, tmp: str, name: str, pfd: int) -> None:
        try:
            os.rename(tmp, name, src_dir_fd=pfd, dst_dir_fd=pfd)
        except BaseException:
            os.unlink(tmp, dir_fd=pfd)
            raise

    def unlink(self, rel: str) -> bool:
        """Remove a file or symlink; ``False`` if it was already gone."""
        try:
            pfd, name = self._parent(rel, create=False)
            os.unlink(name, dir_fd=pfd)
            return True
        except (FileNotFoundError, NotADirectoryError):
            return False

    def rmdir(self, rel: str) -> bool:
        """Remove an empty folder; ``False`` if missing or not empty."""
        try:
            pfd, name = self._parent(rel, create=False)
            fd = self._fds.pop(rel, None)
            if fd is not None:
                os.close(fd)
            os.rmdir(name, dir_fd=pfd)
            return True
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                return False
            raise

    def mkdirs(self, rel: str) -> None:
        self.dir_fd(rel, create=True)

    def chmod(self, rel: str, perm: int) -> None:
        """Set the permission bits of a regular file (never through a symlink)."""
        pfd, name = self._parent(rel, create=False)
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=pfd)
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                os.fchmod(fd, perm)
        finally:
            os.close(fd)

    def keep(self, rel: str, kept: str, *, move: bool = False) -> bool:
        """Keep the file at ``rel`` as ``kept`` in the root folder: a second link to it, or
        (``move``) the file itself moved there. ``put_back`` returns the very file, its other
        links included, at no cost in room. False, with nothing kept, where the filesystem
        refuses (another filesystem mounted below the root, one without hard links)."""
        pfd, name = self._parent(rel, create=False)
        root = self._fds[""]
        try:
            if move:
                os.rename(name, kept, src_dir_fd=pfd, dst_dir_fd=root)
            else:
                os.link(name, kept, src_dir_fd=pfd, dst_dir_fd=root, follow_symlinks=False)
        except OSError:
            return False
        return True

    def put_back(self, kept: str, rel: str) -> bool:
        """Rename the file ``keep`` kept as ``kept`` over ``rel``; False if it cannot go there
        (it stays where it is)."""
        try:
            pfd, name = self._parent(rel, create=True)
            os.rename(kept, name, src_dir_fd=self._fds[""], dst_dir_fd=pfd)
        except OSError:
            return False
        return True

    def drop_kept(self, token: str, names: Iterable[str] | None = None) -> None:
        """Remove what ``keep`` kept for the restore ``token``: ``names``, or else whatever
        the root folder holds of it. (A link ``put_back`` put over another link of the same
        file is still there: ``rename`` then leaves both.)"""
        root = self._fds[""]
        if names is None:
            prefix = f"{KEPT_PREFIX}{token}-"
            names = [
                n for n in os.listdir(root) if n.startswith(prefix) and n.endswith(KEPT_SUFFIX)
            ]
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=root)

    def remove_temp(self, rel: str, token: str) -> bool:
        """Remove a leftover temp file of an interrupted write of ``rel``."""
        try:
            pfd, name = self._parent(rel, create=False)
            os.unlink(temp_name(name, token), dir_fd=pfd)
            return True
        except (FileNotFoundError, NotADirectoryError, UnsafePathError):
            return False


def atomic_write(
    path: str | os.PathLike[str],
    data: bytes | str,
    *,
    durable: bool = False,
    tmp_dir: str | os.PathLike[str] | None = None,
    perm: int = 0o644,
    mtime_ns: int | None = None,
    check: Callable[[str], None] | None = None,
) -> None:
    """Replace ``path`` with ``data`` so that a reader (or a process killed mid-way) sees the old
    content or the new, never a torn or empty file.

    The bytes go to a fresh temporary file (in ``tmp_dir``, default ``path``'s folder; it must be
    on the same filesystem), which is renamed over ``path``. ``durable`` also flushes the file and
    the folder to disk (power loss); without it the write survives the death of the process, as
    git's own loose objects do. ``mtime_ns`` dates the new file (a copy keeps its original's
    modification time); ``check`` is called with the temporary file's path before the rename (an
    exception leaves ``path`` untouched). Every file the store writes goes through here.
    """
    target = os.fspath(path)
    folder = os.path.dirname(target) or "."
    tmp = os.path.join(
        os.fspath(tmp_dir) if tmp_dir is not None else folder,
        f".{os.path.basename(target)[:100]}.tmp-{os.getpid()}-{os.urandom(4).hex()}",
    )
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, perm)
    try:
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view) :]
            if mtime_ns is not None:
                os.utime(fd, ns=(mtime_ns, mtime_ns))
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if check is not None:
            check(tmp)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if durable:
        dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def create_file(path: str | os.PathLike[str], data: bytes, *, perm: int = 0o644) -> bool:
    """Create ``path`` holding ``data``, written in place (no temporary file and rename: for
    files no reader takes while half written, see the callers); False, with nothing written,
    when it exists. A failed write removes the file."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, perm)
    except FileExistsError:
        return False
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except BaseException:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        raise
    os.close(fd)
    return True


def fill_empty(path: str | os.PathLike[str], data: bytes, *, perm: int = 0o644) -> bool:
    """Write ``data`` into ``path`` in place when it is empty (made if missing, kept between
    uses: a file emptied after each use costs no new inode, which on some filesystems is the
    dearest part of a small write); False, with nothing written, when it is not empty. A failed
    write empties it again. Like ``create_file``, for files no reader takes while half written."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, perm)
    try:
        if os.fstat(fd).st_size:
            return False
        try:
            done = 0
            while done < len(data):
                done += os.pwrite(fd, data[done:], done)
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            raise
        return True
    finally:
        os.close(fd)


def is_empty(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is missing or empty (``fill_empty``'s file, not in use)."""
    try:
        return os.stat(path).st_size == 0
    except FileNotFoundError:
        return True


def make_empty(path: str | os.PathLike[str]) -> None:
    """Empty ``path`` (``fill_empty``'s file: in use no more); nothing when it is missing. A
    symlink there is not followed (``OSError``): what it points to is never emptied."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)


def is_temp_of_dead_process(name: str) -> bool:
    """Is ``name`` a temporary file of ``atomic_write`` whose writer is gone (safe to delete)?"""
    _, sep, rest = name.rpartition(".tmp-")
    if not sep or not name.startswith("."):
        return False
    pid_text = rest.split("-", 1)[0]
    if not pid_text.isdigit():
        return False
    return not pid_alive(int(pid_text))


def pid_alive(pid: int) -> bool:
    """Is a process with this pid running on this host (a zombie counts as gone)?"""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rpartition(b")")[2].split()[0]
        return state not in (b"Z", b"X")
    except (OSError, IndexError):
        return True
