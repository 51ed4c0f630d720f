"""A small scan's tree written in the process (``_trees.py``), the index told later.

When the scan knows the index's tree (the last scan's, or a restore's) and its stat cache, and
only a few paths changed, their blobs and the trees on their paths are written here: no
``update-index``, no ``write-tree`` (two git processes per capture of a session's step). The
index entries wait in ``Scanner.unsynced`` (path -> (mode, blob id), ``None``: removed), given to
git on the command line of the next ``update-index`` a scan runs (``--cacheinfo``), before
anything that scan feeds; a process that dies first leaves an index whose stat data differ from
those paths', which the next process's first scan gives to git again (nothing is lost: the
snapshots hold the trees). Anything unusual (many paths, big files, a file that changed since
the walk or cannot be read any more, a file and a folder of one name in one edit) is left to git,
as before. Every small scan takes this path, a restore's safety scan included.

Why it stays (issue #32, item 3): without it (and ``_objects.py``), a capture of 2 changed files
took 2.5 -> 17.9 ms (requests), 9.5 -> 16.9 (mypy), 5.5 -> 22.6 (babel), 6.6 -> 63.9 (mypy x10),
and a restore of 5 files with the watcher 4.1 -> 15.0, 8.0 -> 21.9, 10.2 -> 21.2, 13.4 -> 55.3 ms
(``experiments/benchmarks/real_checkouts.py requests mypy babel mypy-x10 --reps 3``, the two
versions interleaved with ``--treesearch-path``, 2026-12-04): three or four git processes where
there were none, each reading and writing the whole index.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from treesearch.store._scan_known import index_entry_args
from treesearch.store._trees import ObjectBatch, Trees, hash_files
from treesearch.store._walk import SIZE, WalkResult
from treesearch.types import TreeHash

if TYPE_CHECKING:
    from treesearch.store._scan import Scanner

Key = tuple[int, int, int, int, int]
Change = tuple[int, str] | None

MAX_PATHS = 128
"""At most this many changed paths are written here (more: ``update-index``, which streams)."""
MAX_BYTES = 8 << 20
"""At most this many bytes of changed files are read and hashed here."""


class Written(NamedTuple):
    """What ``write_in_process`` made."""

    tree: TreeHash
    base: TreeHash
    """The tree it edited (the index's, as the scanner knew it)."""
    raw: list[bytes]
    """``diff-tree -r -z --raw``'s records from ``base`` to ``tree``, split at NUL."""
    entries: dict[str, Change]
    """The index entries that changed (now waiting in ``scanner.unsynced``)."""
    hashed: dict[str, str]
    """The blob id of every path hashed (changed or not)."""


def write_in_process(
    scanner: Scanner,
    cache: Mapping[str, Key] | None,
    tree: str | None,
    feed: Sequence[str],
    index_paths: Collection[str],
    w: WalkResult,
    max_waiting: int,
) -> Written | None:
    """The scan's new tree, written here, or ``None``: git is to be run as before. Needs the
    index's tree and stat cache as of the last scan (``tree``, ``cache``); ``feed``: the paths
    to hash, ``index_paths``: the paths that may have left the index (see
    ``Scanner._compare``); at most ``max_waiting`` entries may wait in ``scanner.unsynced``."""
    if tree is None or cache is None:
        return None
    stale = set(index_paths).difference(w.files)
    if not feed and not stale:
        return None
    if len(feed) + len(stale) > MAX_PATHS or sum(w.files[p][SIZE] for p in feed) > MAX_BYTES:
        return None
    if len(set(scanner.unsynced).union(feed, stale)) > max_waiting:
        return None
    trees = scanner.trees
    made = write_changes(scanner.workspace, trees, tree, feed, stale, w.files)
    if made is None:
        return None
    new_tree, entries, hashed = made
    # (The trees on the way were just read or made: cached. A folder replaced by a file gives
    # git's records: its files deleted, the file added.)
    raw = trees.diff(tree, new_tree, max_reads=64)
    if raw is None:
        return None
    scanner.unsynced.update(entries)
    return Written(TreeHash(new_tree), TreeHash(tree), raw, entries, hashed)


def tell_index(scanner: Scanner) -> None:
    """Give git the index entries that wait and write the index's tree, so that the index holds
    every object the scanner trusts (``gc`` keeps what the index holds, and drops from it
    nothing a waiting entry removed). Should git's tree differ, the scanner forgets its own."""
    if scanner.unsynced:
        scanner.run(["update-index", *index_entry_args(scanner.unsynced)])
        scanner.unsynced = {}
    if scanner.tree is not None and scanner.run(["write-tree"]).decode().strip() != scanner.tree:
        scanner.forget_index()


def write_changes(
    root: Path,
    trees: Trees,
    tree: str,
    feed: Sequence[str],
    stale: Collection[str],
    files: Mapping[str, Key],
) -> tuple[str, dict[str, Change], dict[str, str]] | None:
    """The tree ``tree`` becomes when the ``feed`` paths take their content on disk (``files``:
    their stat keys, from the walk) and the ``stale`` paths go; the entries that changed; the
    blob id of each path hashed. ``None`` when git should do
    it (see the module). Only blobs ``tree`` lacks are written (one it holds may be packed:
    never written loose again)."""
    changes: dict[str, Change] = {p: None for p in stale if trees.lookup(tree, p) is not None}
    hashed = hash_files(str(root), feed, files, MAX_BYTES)
    if hashed is None:
        return None
    batch = ObjectBatch()
    for p, (entry, data) in hashed.items():
        old = trees.lookup(tree, p)
        if old == entry:
            continue
        if old is None or old[1] != entry[1]:
            batch.add("blob", data)
        changes[p] = entry
    ids = {p: entry[1] for p, (entry, _data) in hashed.items()}
    if not changes:
        return tree, changes, ids
    try:
        new = trees.update(tree, changes, batch)
    except ValueError:
        return None
    trees.save(batch)
    return new, changes, ids


def blob_id_of(root: Path, rel: str, key: Key, limit: int) -> str | None:
    """git's blob id of a file or symlink as the walk saw it (stat data ``key``), if it still
    has those stat data and is at most ``limit`` bytes (else ``None``)."""
    made = hash_files(str(root), [rel], {rel: key}, limit)
    return None if made is None else made[rel][0][1]
