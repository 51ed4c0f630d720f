"""Stat data as the scan compares it: to the nanosecond, with git's own precision in mind.

The scan decides from stat data alone which files git must hash again. It compares what git's
index compares (mtime, ctime, size, inode and the file type and exec bit), but to the nanosecond.
Git itself (built without ``USE_NSEC``, as usual) compares whole seconds only, so a file fed to
``update-index`` whose change shows only below the second (an edit that put its old mtime back, as
``cp -p``, ``rsync -a`` and ``tar x`` do, landing in the same second as the recorded ctime) would
be kept as it was: such entries are removed from the index first (``git_may_miss``), so git hashes
them again.

An entry is "racy" when a later change could leave all of it unchanged: when its mtime or its
ctime falls in the timestamp tick of the moment the stat data were recorded. Such entries are
checked by content on the next scan. The ctime counts because the mtime can be set by anyone.

A process that opens a store reads the index's stat data (with nanoseconds) from
``git ls-files --debug`` (``parse_index``) and compares them in the same way.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Mapping
from pathlib import Path

from treesearch.store._fs import atomic_write

RACY_NS = 2_000_000_000
"""A file modified less than this before a scan is re-checked by the next one (timestamps of a
later change could be identical; git's index has the same "racy" problem). Two seconds: FAT keeps
mtimes to 2 s, ext3 and HFS+ to 1 s."""
RACY_FINE_NS = 50_000_000
"""The window for a timestamp with a sub-millisecond part: it comes from a filesystem with
fine timestamps, which the kernel takes from a clock that ticks at least every 10 ms."""
_U32 = 0xFFFFFFFF
_NS = 1_000_000_000

Key = tuple[int, int, int, int, int]
"""``(mtime_ns, ctime_ns, size, inode, st_mode)``, as ``_walk.WalkResult.files`` holds them."""
IndexKey = tuple[int, int, int, int, int]
"""An index entry's stat data: ``(mtime_ns, ctime_ns, size, inode, git mode)``, with size and
inode cut to 32 bits as the index keeps them."""


def is_racy(time_ns: int, scanned_at: int) -> bool:
    """Could a change after a scan that started at ``scanned_at`` leave this timestamp as it is?"""
    return time_ns >= scanned_at - (RACY_FINE_NS if time_ns % 1_000_000 else RACY_NS)


def racy_key(key: Key, scanned_at: int) -> bool:
    """A racy entry: its mtime or its ctime is in the tick of the scan that recorded it."""
    return is_racy(key[0], scanned_at) or is_racy(key[1], scanned_at)


def git_mode(st_mode: int) -> int:
    if stat.S_ISLNK(st_mode):
        return 0o120000
    return 0o100755 if st_mode & 0o100 else 0o100644


def index_key(key: Key) -> IndexKey:
    """``key`` as the index records it (comparable with ``parse_index``'s keys)."""
    return (key[0], key[1], key[2] & _U32, key[3] & _U32, git_mode(key[4]))


def _seconds(k: IndexKey) -> tuple[int, int, int, int, int]:
    return ((k[0] // _NS) & _U32, (k[1] // _NS) & _U32, k[2], k[3], k[4])


def git_may_miss(recorded: IndexKey, now: IndexKey) -> bool:
    """True when the stat data differ, but not in anything git compares at its precision."""
    return recorded != now and _seconds(recorded) == _seconds(now)


_ENTRY = re.compile(
    rb"([0-7]+) ([0-9a-f]+) ([0-3])\t([^\0]*)\0"
    rb"  ctime: (\d+):(\d+)\n  mtime: (\d+):(\d+)\n  dev: \d+\tino: (\d+)\n"
    rb"  uid: \d+\tgid: \d+\n  size: (\d+)\tflags: [0-9a-f]+\n"
)


def parse_index(
    out: bytes, decode: Callable[[bytes], str]
) -> dict[str, tuple[IndexKey, str]] | None:
    """Entries of ``git ls-files -z -s --debug``: path -> (stat data, blob id).

    Entries that are not a plain file or symlink at stage 0 get an impossible key (so they are
    always handed to git). ``None`` when the output is not in the expected form.
    """
    out_map: dict[str, tuple[IndexKey, str]] = {}
    pos, end = 0, len(out)
    match = _ENTRY.match
    while pos < end:
        m = match(out, pos)
        if m is None:
            return None
        pos = m.end()
        mode, oid, stage, path, cs, cn, ms, mn, ino, size = m.groups()
        git_m = int(mode, 8)
        if stage != b"0" or git_m not in (0o100644, 0o100755, 0o120000):
            key: IndexKey = (-1, -1, -1, -1, -1)
        else:
            key = (
                int(ms) * _NS + int(mn),
                int(cs) * _NS + int(cn),
                int(size),
                int(ino),
                git_m,
            )
        out_map[decode(path)] = (key, oid.decode())
    return out_map


def compare_with_index(
    files: Mapping[str, Key], entries: Mapping[str, tuple[IndexKey, str]], since: int
) -> tuple[list[str], list[str], list[str]]:
    """Compare a walk's ``files`` with the index's ``entries`` (``parse_index``), whose stat data
    were recorded by a scan that started at ``since``. Returns the changed paths, those of them
    git could take for unchanged (to force, see ``git_may_miss``), and the unchanged racy paths
    (to check by content)."""
    changed: list[str] = []
    force: list[str] = []
    racy: list[str] = []
    for p, key in files.items():
        entry = entries.get(p)
        if entry is None:
            changed.append(p)
            continue
        now = index_key(key)
        if now != entry[0]:
            changed.append(p)
            if git_may_miss(entry[0], now):
                force.append(p)
        elif racy_key(key, since):
            racy.append(p)
    return changed, force, racy


def read_scan_time(path: Path, index: Path) -> int:
    """When the scan that last recorded stat data in ``index`` started (ns): what ``path`` says,
    else the index file's own mtime (git's rule for its racy entries); 0 when neither is known."""
    try:
        index_mtime = os.stat(index).st_mtime_ns
    except OSError:
        return 0
    try:
        recorded = int(path.read_text().strip())
    except (OSError, ValueError):
        return index_mtime
    return min(recorded, index_mtime)


def write_scan_time(path: Path, scanned_at: int) -> None:
    atomic_write(path, f"{scanned_at}\n")


def own_index_entries(index: Path) -> int:
    """Entries the index file ``index`` holds itself (0: unreadable). With a split index
    (``core.splitIndex``) those are the ones not in its shared index. Git writes a new shared
    index only past a fifth of all entries; below that, the entries it re-added or replaced (as
    ~2,000 racy files after a bulk copy, hashed again: +0.3 MiB on 14,100 files) stay in the
    index file, read and written again by every later ``update-index``, until ``update-index
    --split-index`` (``Scanner.scan`` runs it past ``max(256, files / 20)``)."""
    try:
        with open(index, "rb") as fh:
            head = fh.read(12)
    except OSError:
        return 0
    return int.from_bytes(head[8:12], "big") if len(head) == 12 and head[:4] == b"DIRC" else 0
