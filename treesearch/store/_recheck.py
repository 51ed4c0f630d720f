"""Without a watcher: which folders of the last walk a scan must list again (``recheck``).

A store without a watcher (``watch=False``, macOS, network filesystems) used to walk the whole
workspace on every scan, building every folder's record again: per file, the Python of the walk
cost as much as its ``lstat``. Instead, every folder the walker knows is checked against what it
saw there, and only folders that differ are listed again (``Walker.update``, the watcher's path,
which gives the same answer as a full walk):

- the folder's own mtime and its entry names (read by ``os.listdir``, which makes no object per
  entry; names are compared as well as the mtime, so a change within the mtime's tick, or on a
  filesystem that does not move a folder's mtime, is still seen);
- the stat data of every file it captured, compared to the nanosecond with the key the walk
  recorded (``lstat`` relative to the opened folder: no walk of the whole path per file).

A file whose content changed without any change of its stat data is the scan's business (its
racy set, ``_stat.py``), as after a full walk. Folders holding skipped entries (oversize or
special files, which have no key here) are always listed again.
"""

from __future__ import annotations

import os

from treesearch.store._walk import Walker

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def recheck(walker: Walker) -> tuple[set[str], set[str]]:
    """Folders whose entries or captured files changed since the walker last listed them
    (``dirty``), and folders that are gone or no longer folders (``fresh``: their parent is
    listed again), as ``Walker.update`` takes them."""
    dirty: set[str] = set()
    fresh: set[str] = set()
    root = walker.root
    stat_at = os.stat
    listdir = os.listdir
    for rel, d in walker.dirs.items():
        if rel:
            try:
                fd = os.open(root + "/" + rel, _DIR_FLAGS)
            except OSError:
                fresh.add(rel)  # gone, or a symlink or file now: its parent lists it anew
                continue
        else:
            try:
                fd = os.open(root, _DIR_FLAGS & ~os.O_NOFOLLOW)
            except OSError:
                dirty.add(rel)  # the walk itself reports the root's trouble
                continue
        try:
            # The root's mtime as ``Walker.full`` takes it (the root may be given as a symlink).
            mtime = os.fstat(fd).st_mtime_ns if rel else os.lstat(root).st_mtime_ns
            if mtime != d.mtime or d.skipped or frozenset(listdir(fd)) != d.names:
                dirty.add(rel)
                continue
            cut = len(rel) + 1 if rel else 0
            # Hot loop (one iteration per captured file): one system call and one comparison.
            for path, key in d.files.items():
                st = stat_at(path[cut:], dir_fd=fd, follow_symlinks=False)
                if (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode) != key:
                    dirty.add(rel)
                    break
        except OSError:
            dirty.add(rel)  # changed under us: listing it again says how
        finally:
            os.close(fd)
    return dirty, fresh
