"""Change notification for the workspace (Linux inotify): which entries to look at again.

A scan with nothing changed then costs no ``lstat`` per file: the entries the kernel reported are
looked at again (their folder re-listed when one cannot be classified alone, ``Walker.update``)
and everything else is reused (git's ``core.fsmonitor`` plays the same role for git).
The kernel queues an event before the system call that caused it returns, so every change made
before a scan starts is seen by that scan.

What inotify does not see, and how that is handled:

- a write through another hard link of a file: folders holding a file with more than one link
  are re-listed on every scan, and a walk that meets a new hard link checks every file's stat
  data, to find its other names (``Walker``). A link made after the last scan from outside the
  workspace (or in an ignored folder, or removed again before the scan) is not met, and writes
  through a shared ``mmap`` report no event (a limit shared with git's fsmonitor): a capture can
  miss those, but a restore checks the stat data of every file it writes over, deletes or
  re-modes (``_restore_check.py``), so its safety snapshot holds each of those as it is on disk
  and no such write is lost (a file the restore leaves alone keeps it, and a capture records it
  once its folder is listed again). Open the store with ``watch=False`` (``TREESEARCH_WATCH=0``
  on the command line) to check every file on every scan;
- changes the store makes itself (a restore): the walker is told which paths (``Walker.wrote``),
  so its folder records agree with the store's stat cache;
- network and FUSE filesystems (changes made by other machines): watching is used only when the
  workspace and every mount below it are on a local filesystem type known to report all changes;
- a full event queue (``IN_Q_OVERFLOW``), the watch limit, or a watched root that disappears:
  the next scan walks everything again.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import weakref
from collections.abc import Collection
from dataclasses import dataclass, field

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_UNMOUNT = 0x00002000
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000
_MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
    | IN_DONT_FOLLOW
    | IN_EXCL_UNLINK
)
_ENTRY_CHANGED = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO
_SELF_GONE = IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED
_HEADER = struct.Struct("iIII")
_MAX_FRESH = 64
"""More replaced folders than this in one scan: a full walk is cheaper than dropping each."""

LOCAL_FILESYSTEMS = frozenset(
    {
        "ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "ramfs", "overlay", "f2fs", "zfs",
        "bcachefs", "jfs", "reiserfs", "nilfs2",
    }
)  # fmt: skip
"""Filesystem types whose changes all happen on this machine, through this kernel."""


@dataclass
class Changes:
    """Folders to re-list (``dirty``), folders to walk from scratch (``fresh``), and per folder
    the names of the entries an event named (``names``: those alone need a look)."""

    dirty: set[str] = field(default_factory=set)
    fresh: set[str] = field(default_factory=set)
    names: dict[str, set[str]] = field(default_factory=dict)
    events: int = 0


class Inotify:
    """One inotify instance watching the folders of one workspace."""

    def __init__(self, fd: int, libc: ctypes.CDLL) -> None:
        self.fd = fd
        self._libc = libc
        self._rel: dict[int, str] = {}
        self._wd: dict[str, int] = {}
        self.broken: str | None = None
        """Why watching stopped (watch limit reached, ...): every scan walks everything then."""
        self.lost = False
        """A folder could not be watched: the next scan must walk everything."""
        self.pid = os.getpid()
        """The process that reads the events: a forked child must not take them from it."""
        self._finalizer = weakref.finalize(self, os.close, fd)

    @classmethod
    def create(cls, root: str) -> Inotify | None:
        """A watcher for ``root``, or ``None`` where watching is off or would not be reliable."""
        if not local_filesystem(root):
            return None
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            init = libc.inotify_init1
        except (OSError, AttributeError):
            return None
        fd = init(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            return None  # e.g. too many instances: scans walk everything
        return cls(fd, libc)

    def close(self) -> None:
        self._finalizer()
        self._rel.clear()
        self._wd.clear()

    @property
    def usable(self) -> bool:
        if self.pid != os.getpid() and self.broken is None:
            self.broken = "inherited from another process"  # its events are the parent's
        return self.broken is None and self._finalizer.alive

    # ---------------------------------------------------------------- watches

    def add(self, abs_dir: str, rel_dir: str) -> None:
        if not self.usable:
            return
        wd = self._libc.inotify_add_watch(self.fd, os.fsencode(abs_dir), _MASK)
        if wd < 0:
            err = ctypes.get_errno()
            if err in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
                self.lost = True  # raced with a change: the next scan walks everything
            else:
                self.broken = f"cannot watch {rel_dir or '.'}: {os.strerror(err)}"
                self.close()
            return
        old = self._rel.get(wd)
        if old is not None and old != rel_dir:
            self._wd.pop(old, None)  # the same folder, moved: its watch follows it
        self._rel[wd] = rel_dir
        self._wd[rel_dir] = wd

    def forget(self, rel_dirs: Collection[str]) -> None:
        for rel in rel_dirs:
            wd = self._wd.pop(rel, None)
            if wd is not None and self._rel.get(wd) == rel:
                del self._rel[wd]
                if self.usable:
                    self._libc.inotify_rm_watch(self.fd, wd)

    # ---------------------------------------------------------------- events

    def read(self) -> Changes | None:
        """What changed since the last read; ``None`` when only a full walk can tell."""
        if not self.usable:
            return None
        changes = Changes()
        full = self.lost
        while True:
            try:
                buf = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            except InterruptedError:
                continue
            off, end = 0, len(buf)
            while off < end:
                wd, mask, _cookie, length = _HEADER.unpack_from(buf, off)
                name = buf[off + 16 : off + 16 + length].rstrip(b"\0")
                off += 16 + length
                changes.events += 1
                if mask & IN_Q_OVERFLOW:
                    full = True
                    continue
                rel = self._rel.get(wd)
                if rel is None:
                    continue  # a watch we dropped
                if name:
                    child = os.fsdecode(name)
                    changes.names.setdefault(rel, set()).add(child)
                    if mask & IN_ISDIR and mask & _ENTRY_CHANGED:
                        changes.fresh.add(rel + "/" + child if rel else child)
                elif mask & _SELF_GONE:
                    if not rel:
                        full = True  # the workspace folder itself went away or was unmounted
                    else:
                        changes.fresh.add(rel)
                    if mask & IN_IGNORED:
                        self._rel.pop(wd, None)
                        if self._wd.get(rel) == wd:
                            del self._wd[rel]
                else:
                    changes.dirty.add(rel)  # the folder's own attributes
        if full or len(changes.fresh) > _MAX_FRESH:
            return None
        return changes


def local_filesystem(root: str, mountinfo: bytes | None = None) -> bool:
    """True when ``root`` and every mount below it are of a type in ``LOCAL_FILESYSTEMS``
    (``mountinfo``: the text of ``/proc/self/mountinfo``, read when not given)."""
    if mountinfo is None:
        try:
            with open("/proc/self/mountinfo", "rb") as fh:
                mountinfo = fh.read()
        except OSError:
            return False
    lines = mountinfo.splitlines()
    real = os.path.realpath(root)
    best, best_type = "", None
    below: list[str] = []
    for line in lines:
        fields = line.split(b" ")
        try:
            sep = fields.index(b"-")
        except ValueError:
            continue
        point = _unescape(fields[4])
        fstype = os.fsdecode(fields[sep + 1])
        if real == point or real.startswith(point.rstrip("/") + "/"):
            if len(point) >= len(best):
                best, best_type = point, fstype
        elif point.startswith(real.rstrip("/") + "/"):
            below.append(fstype)
    return best_type in LOCAL_FILESYSTEMS and all(t in LOCAL_FILESYSTEMS for t in below)


def _unescape(raw: bytes) -> str:
    # mountinfo writes space, tab, newline and backslash as \ooo
    out = bytearray()
    i = 0
    while i < len(raw):
        if raw[i] == 0x5C and i + 3 < len(raw) and raw[i + 1 : i + 4].isdigit():
            out.append(int(raw[i + 1 : i + 4], 8))
            i += 4
        else:
            out.append(raw[i])
            i += 1
    return os.fsdecode(bytes(out))
