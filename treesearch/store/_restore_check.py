"""A restore's scan: checked where it matters, at the cost of the changes.

A restore must never overwrite, delete or re-mode a file whose current content its safety
snapshot does not hold (no lost edit). With a watcher (``_watch.py``), a scan re-lists only the
folders the kernel reported; a write the kernel does not report (through a hard link made from
outside the workspace, through a shared ``mmap``) leaves an older record of that file in the
walk. Checking every file's stat data (``Walker.update(verify=True)``) finds those, but costs an
``lstat`` per file of the workspace, every restore.

``checked_scan`` checks only the files the plan will change: each one's stat data, now, against
the walk's record of it. A file whose stat data moved since the walk last looked at it is looked
at again (``Walker.wrote``), and the scan and the plan are made again, until
they agree (after a few rounds, a verifying scan settles it). So every file a restore changes is
in its safety snapshot as it is on disk, whether an event reported its change or not; a file the
restore does not change is left as it is (with a change no event reported, it stays as the user
left it, and the next capture that lists its folder records it, as ``_watch.py`` says).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from treesearch.store._scan import Scan, Scanner
from treesearch.store._walk import WalkResult

if TYPE_CHECKING:
    from treesearch.store._restore import Plan

_ROUNDS = 3
"""Scans checked before a verifying scan (every file's stat data) settles it."""


def checked_scan(scanner: Scanner, plan_for: Callable[[Scan], Plan]) -> tuple[Scan, Plan]:
    """The workspace's scan and ``plan_for``'s plan from it, such that every file the plan
    writes over, deletes or changes the mode of has, in the scan, the stat data it has on disk."""
    for _ in range(_ROUNDS):
        scan = scanner.scan()
        plan = plan_for(scan)
        stale = stale_paths(scanner.workspace, scan.walk, changed_by(plan))
        if not stale:
            return scan, plan
        if scanner.walker is not None:
            # List their folders again and compare these files with the stat cache.
            scanner.walker.wrote(stale)
    scan = scanner.scan(verify=True)
    return scan, plan_for(scan)


def changed_by(plan: Plan) -> Iterable[str]:
    """The existing files a plan changes: those it writes over, deletes or changes the mode of
    (a file it writes that the walk does not hold is new, or refused by the plan's own check)."""
    yield from plan.deletes
    for path, *_ in plan.writes:
        yield path
    for path, _perm in plan.chmods:
        yield path


def stale_paths(root: os.PathLike[str] | str, walk: WalkResult, paths: Iterable[str]) -> list[str]:
    """The ``paths`` the walk holds whose stat data on disk differ from the walk's record
    (gone or unreadable ones included)."""
    base = os.fspath(root)
    stale = []
    for path in paths:
        key = walk.files.get(path)
        if key is None:
            continue
        try:
            st = os.lstat(os.path.join(base, path))
        except OSError:
            stale.append(path)
            continue
        if (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode) != key:
            stale.append(path)
    return stale
