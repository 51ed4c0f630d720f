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
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from treesearch.store._numstat import numstat
from treesearch.store._scan_known import index_entry_args
from treesearch.store._trees import ObjectBatch, Trees, hash_files
from treesearch.store._walk import SIZE, WalkResult
from treesearch.types import TreeHash

if TYPE_CHECKING:
    from treesearch.store._scan import Scanner

Key = tuple[int, int, int, int, int]
Change = tuple[int, str] | None

_REGULAR = {b"000000", b"100644", b"100755", b"120000"}
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
    counts: Callable[[], list[bytes] | None]
    """``--numstat``'s records of the same diff (``_numstat.py``), or ``None``: ask git."""


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
    new_tree, entries, hashed, data = made
    # (The trees on the way were just read or made: cached. A folder replaced by a file gives
    # git's records: its files deleted, the file added.)
    raw = trees.diff(tree, new_tree, max_reads=64)
    if raw is None:
        return None
    scanner.unsynced.update(entries)
    attributes = _attributes_apply(trees, tree, lambda d: w.dir_names.get(d, ()), scanner.unsynced)

    def counts() -> list[bytes] | None:
        return None if attributes(entries) else count_lines(trees, raw, data)

    return Written(TreeHash(new_tree), TreeHash(tree), raw, entries, hashed, counts)


def _attributes_apply(
    reader: Trees,
    tree: str,
    names_of: Callable[[str], Collection[str]],
    waiting: Mapping[str, Change],
) -> Callable[[Collection[str]], bool]:
    """Could a ``.gitattributes`` change how git diffs one of the paths: one in a folder above
    it on disk (``names_of(folder)``: the names the last walk saw there) or in ``tree`` (the
    index's, with the entries ``waiting``), or one whose index entry waits?"""

    def apply(paths: Collection[str]) -> bool:
        if any(p.rpartition("/")[2] == ".gitattributes" for p in waiting):
            return True
        folders = {""}
        for p in paths:
            parts = p.split("/")
            folders.update("/".join(parts[:i]) for i in range(1, len(parts)))
        for d in folders:
            if ".gitattributes" in names_of(d):
                return True
            if reader.lookup(tree, f"{d}/.gitattributes" if d else ".gitattributes"):
                return True
        return False

    return apply


MAX_DIFF_PATHS = 256
"""Tree pairs with more changed paths than this are diffed by git."""


def diff_in_process(scanner: Scanner, a: str, b: str) -> list[bytes] | None:
    """``diff-tree -r -z --raw --numstat`` of trees ``a`` and ``b``, split at NUL, from the
    store's trees (``Trees.diff``: trees already parsed cost nothing); ``None``: ask git (many
    changes, anything ``count_lines`` leaves to git, or a ``.gitattributes`` that could
    apply)."""
    walker, tree = scanner.walker, scanner.tree
    if walker is None or tree is None:
        return None
    trees = scanner.trees
    fields = trees.diff(a, b)
    if fields is None or len(fields) > 2 * MAX_DIFF_PATHS:
        return None
    dirs = walker.dirs

    def names_of(d: str) -> Collection[str]:
        record = dirs.get(d)
        return record.names if record is not None else ()

    paths = [os.fsdecode(p) for p in fields[1::2]]
    if _attributes_apply(trees, tree, names_of, scanner.unsynced)(paths):
        return None
    counted = count_lines(trees, fields, {})
    return None if counted is None else fields + counted


def count_lines(reader: Trees, raw: list[bytes], data: Mapping[str, bytes]) -> list[bytes] | None:
    """``--numstat`` records (``added\\tdeleted\\tpath``) of the ``raw`` records, new contents
    in ``data`` (path -> bytes), old ones read; ``None`` for anything but regular files, or
    what ``numstat`` leaves to git."""
    out: list[bytes] = []
    for head, path in zip(raw[::2], raw[1::2], strict=True):
        old_mode, new_mode, old_oid, new_oid, status = head[1:].split(b" ")
        if status not in (b"A", b"D", b"M") or not {old_mode, new_mode} <= _REGULAR:
            return None
        p = os.fsdecode(path)
        old = reader.objects.read(old_oid.decode()) if status != b"A" else None
        new = None
        if status != b"D":
            new = data.get(p)
            new = reader.objects.read(new_oid.decode()) if new is None else new
        counted = numstat(old, new)
        if counted is None:
            return None
        added, deleted, binary = counted
        out.append(b"-\t-\t" + path if binary else b"%d\t%d\t%s" % (added, deleted, path))
    return out


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
) -> tuple[str, dict[str, Change], dict[str, str], dict[str, bytes]] | None:
    """The tree ``tree`` becomes when the ``feed`` paths take their content on disk (``files``:
    their stat keys, from the walk) and the ``stale`` paths go; the entries that changed; the
    blob id of each path hashed; the content of each changed one. ``None`` when git should do
    it (see the module). Only blobs ``tree`` lacks are written (one it holds may be packed:
    never written loose again)."""
    changes: dict[str, Change] = {p: None for p in stale if trees.lookup(tree, p) is not None}
    hashed = hash_files(str(root), feed, files, MAX_BYTES)
    if hashed is None:
        return None
    batch = ObjectBatch()
    contents: dict[str, bytes] = {}
    for p, (entry, data) in hashed.items():
        old = trees.lookup(tree, p)
        if old == entry:
            continue
        if old is None or old[1] != entry[1]:
            batch.add("blob", data)
            contents[p] = data
        changes[p] = entry
    ids = {p: entry[1] for p, (entry, _data) in hashed.items()}
    if not changes:
        return tree, changes, ids, contents
    try:
        new = trees.update(tree, changes, batch)
    except ValueError:
        return None
    trees.save(batch)
    return new, changes, ids, contents


def blob_id_of(root: Path, rel: str, key: Key, limit: int) -> str | None:
    """git's blob id of a file or symlink as the walk saw it (stat data ``key``), if it still
    has those stat data and is at most ``limit`` bytes (else ``None``)."""
    made = hash_files(str(root), [rel], {rel: key}, limit)
    return None if made is None else made[rel][0][1]
