"""Without a watcher: which folders of the last walk a scan must list again (``Recheck``).

A store without a watcher (``watch=False``, macOS, network filesystems) used to walk the whole
workspace on every scan, building every folder's record again: per file, the Python of the walk
cost as much as its ``lstat``. Instead, every folder the walker knows is checked against what it
saw there, and only folders that differ are listed again (``Walker.update``, the watcher's path,
which gives the same answer as a full walk). A folder differs when

- it holds skipped entries (oversize or special files, which have no key): it is listed again;
- its entry names changed. They are read (``os.listdir``) unless the folder's mtime, ctime and
  inode are those of an earlier check that found its names unchanged, and that check was not
  within the timestamp tick of them (``_stat.is_racy``): adding, removing or renaming an entry
  moves the folder's ctime, which no one can set back; exactly the trust the scan puts in a
  file's stat data. A moved mtime alone (a file replaced by a rename, one made and removed
  again) sends the names to be read, not the folder to be listed;
- the stat data of a file it captured changed: each is compared to the nanosecond with the key
  the walk recorded (``lstat`` relative to the opened folder: no walk of the whole path per file).

The names that came or went and the files whose stat data changed are given to the walker, which
looks at those entries alone (``Walker.update(names=...)``): a few edited files in a folder of
hundreds cost a few ``lstat`` calls, not a listing of the folder and an ``lstat`` of each entry.

A file whose content changed without any change of its stat data is the scan's business (its
racy set), as after a full walk.
"""

from __future__ import annotations

import os
import time

from treesearch.store._stat import is_racy
from treesearch.store._walk import Walker

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_ROOT_FLAGS = _DIR_FLAGS & ~os.O_NOFOLLOW

Stamp = tuple[int, int, int]
"""A folder's ``(mtime_ns, ctime_ns, inode)``."""


class Recheck:
    """Checks one walker's folders (see the module); remembers which folders' names it found
    unchanged, and when, so that those not changed since are not listed again."""

    def __init__(self) -> None:
        self._walker: Walker | None = None
        self._verified: dict[str, tuple[Stamp, int]] = {}
        """Folder -> its stamp when its names were found to be the walker's, and when that
        check started (ns)."""

    def __call__(self, walker: Walker) -> tuple[set[str], set[str], dict[str, set[str]]]:
        """Folders to list again (``dirty``: one whose entries cannot be checked one by one),
        folders that are gone or no longer folders (``fresh``: their parent is listed again),
        and, per folder, the entries whose name or stat data changed since ``walker`` last
        looked (``names``; an empty set: only the folder's mtime moved), as ``Walker.update``
        takes them."""
        if walker is not self._walker or len(self._verified) > 2 * len(walker.dirs) + 64:
            self._walker, self._verified = walker, {}
        verified = self._verified
        started = time.time_ns()
        dirty: set[str] = set()
        fresh: set[str] = set()
        names: dict[str, set[str]] = {}
        root = walker.root
        stat_at = os.stat
        for rel, d in walker.dirs.items():
            try:
                fd = os.open(root + "/" + rel if rel else root, _DIR_FLAGS if rel else _ROOT_FLAGS)
            except OSError:
                # Gone, or a symlink or file now: its parent lists it anew (the root: the walk
                # itself reports its trouble).
                (fresh if rel else dirty).add(rel)
                continue
            try:
                st = os.fstat(fd)
                # The root's mtime as ``Walker.full`` takes it (it may be given as a symlink).
                mtime = st.st_mtime_ns if rel else os.lstat(root).st_mtime_ns
                if d.skipped:
                    dirty.add(rel)
                    continue
                changed: set[str] = set()
                stamp = (st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
                known = verified.get(rel)
                if (
                    mtime != d.mtime
                    or known is None
                    or known[0] != stamp
                    or is_racy(stamp[0], known[1])
                    or is_racy(stamp[1], known[1])
                ):
                    now = frozenset(os.listdir(fd))
                    if now == d.names:
                        verified[rel] = (stamp, started)
                    else:
                        changed.update(now.symmetric_difference(d.names))
                cut = len(rel) + 1 if rel else 0
                # Hot loop (one iteration per captured file): one system call, one comparison.
                for path, key in d.files.items():
                    try:
                        st = stat_at(path[cut:], dir_fd=fd, follow_symlinks=False)
                    except FileNotFoundError:
                        changed.add(path[cut:])
                        continue
                    if (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode) != key:
                        changed.add(path[cut:])
                if changed or mtime != d.mtime:
                    names[rel] = changed
            except OSError:
                dirty.add(rel)  # changed under us: listing it again says how
            finally:
                os.close(fd)
        return dirty, fresh, names
