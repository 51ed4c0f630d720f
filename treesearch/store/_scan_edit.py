"""A small scan's tree written in the process (``_tree_write.py``), the index told later.

When the scan knows the index's tree (the last scan's, or a restore's) and its stat cache, and
only a few paths changed, their blobs and the trees on their paths are written here: no
``update-index``, no ``write-tree`` (two git processes per capture of a session's step). The
index entries wait in ``Scanner.unsynced`` (path -> (mode, blob id), ``None``: removed), given to
git on the command line of the next ``update-index`` a scan runs (``--cacheinfo``), before
anything that scan feeds; a process that dies first leaves an index whose stat data differ from
those paths', which the next process's first scan gives to git again (nothing is lost: the
snapshots hold the trees). Anything unusual (many paths, big files, a file that cannot be read
any more, a file where a folder was) is left to git, as before.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from treesearch.store._git import blob_oid
from treesearch.store._numstat import numstat
from treesearch.store._scan_known import index_entry_args
from treesearch.store._stat import git_mode
from treesearch.store._tree_write import TREE_MODE, TreeReader, TreeWriter, Unsupported
from treesearch.store._walk import MODE, SIZE, WalkResult
from treesearch.types import TreeHash

if TYPE_CHECKING:
    from treesearch.store._scan import Scanner

Key = tuple[int, int, int, int, int]
Change = tuple[int, str] | None

_REGULAR = {b"000000", b"100644", b"100755", b"120000"}
_ZERO = "0" * 40
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
    made = write_changes(scanner.workspace, scanner.trees, tree, feed, stale, w.files)
    if made is None:
        return None
    new_tree, entries, hashed, data = made
    scanner.unsynced.update(entries)
    reader = scanner.trees.reader
    raw = edit_records(reader, tree, entries)
    attributes = _attributes_apply(reader, tree, lambda d: w.dir_names.get(d, ()), scanner.unsynced)

    def counts() -> list[bytes] | None:
        return None if attributes(entries) else count_lines(reader, raw, data)

    return Written(TreeHash(new_tree), TreeHash(tree), raw, entries, hashed, counts)


def _attributes_apply(
    reader: TreeReader,
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
    store's tree reader (trees already parsed cost nothing); ``None``: ask git (a file and a
    folder of one name, many changes, anything ``count_lines`` leaves to git, or a
    ``.gitattributes`` that could apply)."""
    walker, tree = scanner.walker, scanner.tree
    if walker is None or tree is None:
        return None
    reader = scanner.trees.reader
    raw: list[tuple[bytes, bytes]] = []
    if not _tree_diff(reader, a, b, b"", raw):
        return None
    raw.sort(key=lambda r: r[1])
    fields = [f for record in raw for f in record]
    dirs = walker.dirs

    def names_of(d: str) -> Collection[str]:
        record = dirs.get(d)
        return record.names if record is not None else ()

    paths = [os.fsdecode(p) for _h, p in raw]
    if _attributes_apply(reader, tree, names_of, scanner.unsynced)(paths):
        return None
    counted = count_lines(reader, fields, {})
    return None if counted is None else fields + counted


def _tree_diff(
    reader: TreeReader, a: str | None, b: str | None, prefix: bytes, out: list[tuple[bytes, bytes]]
) -> bool:
    """Add the raw records of ``a`` -> ``b`` (``None``: no tree; paths under ``prefix``) to
    ``out``, as ``diff-tree -r`` (a file and a folder of one name: the one is deleted, the
    other's files added); False: too many changes (git is asked)."""
    ea = reader.entries(a) if a is not None else {}
    eb = reader.entries(b) if b is not None else {}
    for name in ea.keys() | eb.keys():
        x, y = ea.get(name), eb.get(name)
        if x == y:
            continue
        x_tree = x is not None and x[0] == TREE_MODE
        y_tree = y is not None and y[0] == TREE_MODE
        path = prefix + name
        if x_tree or y_tree:
            sub_a = x[1] if x is not None and x_tree else None
            sub_b = y[1] if y is not None and y_tree else None
            if not _tree_diff(reader, sub_a, sub_b, path + b"/", out):
                return False
            if x is not None and not x_tree:
                _record(x, None, path, out)
            if y is not None and not y_tree:
                _record(None, y, path, out)
        else:
            _record(x, y, path, out)
        if len(out) > MAX_DIFF_PATHS:
            return False
    return True


def _record(
    x: tuple[int, str] | None,
    y: tuple[int, str] | None,
    path: bytes,
    out: list[tuple[bytes, bytes]],
) -> None:
    om, oo = x if x is not None else (0, _ZERO)
    nm, no = y if y is not None else (0, _ZERO)
    status = "A" if x is None else "D" if y is None else "M"
    if status == "M" and stat.S_IFMT(om) != stat.S_IFMT(nm):
        status = "T"
    out.append((f":{om:06o} {nm:06o} {oo} {no} {status}".encode(), path))


def count_lines(
    reader: TreeReader, raw: list[bytes], data: Mapping[str, bytes]
) -> list[bytes] | None:
    """``--numstat`` records (``added\\tdeleted\\tpath``) of the ``raw`` records, new contents
    in ``data`` (path -> bytes), old ones read; ``None`` for anything but regular files, or
    what ``numstat`` leaves to git."""
    out: list[bytes] = []
    for head, path in zip(raw[::2], raw[1::2], strict=True):
        old_mode, new_mode, old_oid, new_oid, status = head[1:].split(b" ")
        if status not in (b"A", b"D", b"M") or not {old_mode, new_mode} <= _REGULAR:
            return None
        p = os.fsdecode(path)
        old = reader.read(old_oid.decode(), "blob") if status != b"A" else None
        new = None
        if status != b"D":
            new = data.get(p)
            new = reader.read(new_oid.decode(), "blob") if new is None else new
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
    writer: TreeWriter,
    tree: str,
    feed: Sequence[str],
    stale: Collection[str],
    files: Mapping[str, Key],
) -> tuple[str, dict[str, Change], dict[str, str], dict[str, bytes]] | None:
    """The tree ``tree`` becomes when the ``feed`` paths take their content on disk (``files``:
    their stat keys, from the walk) and the ``stale`` paths go; the entries that changed; the
    blob id of each path hashed; the content of each changed one. ``None`` when git should do it (see the module). Only what
    ``tree`` lacks is written (an object it holds may be packed: never written loose again)."""
    reader = writer.reader
    changes: dict[str, Change] = {p: None for p in stale if reader.lookup(tree, p) is not None}
    hashed: dict[str, str] = {}
    contents: dict[str, bytes] = {}
    for p in feed:
        key = files[p]
        data = _read(root, p, key[MODE])
        if data is None:
            return None
        entry = (git_mode(key[MODE]), blob_oid(data))
        hashed[p] = entry[1]
        old = reader.lookup(tree, p)
        if old == entry:
            continue
        if old is None or old[1] != entry[1]:
            writer.blob(data)
            contents[p] = data
        changes[p] = entry
    if not changes:
        return tree, changes, hashed, contents
    try:
        return writer.edit(tree, changes), changes, hashed, contents
    except Unsupported:
        return None


def edit_records(reader: TreeReader, base: str, changes: Mapping[str, Change]) -> list[bytes]:
    """``diff-tree -r -z --raw`` of ``base`` and ``base`` with ``changes`` made, split at NUL
    (head, path, head, path...; paths in git's order, unchanged ones left out)."""
    out: list[bytes] = []
    zero = "0" * 40
    for path in sorted(changes, key=os.fsencode):
        old, new = reader.lookup(base, path), changes[path]
        if old == new:
            continue
        om, oo = old if old is not None else (0, zero)
        nm, no = new if new is not None else (0, zero)
        status = "A" if old is None else "D" if new is None else "M"
        if status == "M" and stat.S_IFMT(om) != stat.S_IFMT(nm):
            status = "T"
        out += [f":{om:06o} {nm:06o} {oo} {no} {status}".encode(), os.fsencode(path)]
    return out


def blob_id_of(root: Path, rel: str, st_mode: int, limit: int) -> str | None:
    """git's blob id of a file or symlink as it is now, if it can be read and is at most
    ``limit`` bytes (else ``None``)."""
    data = _read(root, rel, st_mode, limit)
    return None if data is None or len(data) > limit else blob_oid(data)


def _read(root: Path, rel: str, st_mode: int, limit: int = -1) -> bytes | None:
    """A file's content (a symlink's target), as git would hash it; ``None`` when it cannot be
    read as the walk saw it (gone, replaced by a folder or a symlink: git is asked then).
    ``limit``: read at most one byte more than this."""
    path = os.path.join(root, rel)
    try:
        if stat.S_ISLNK(st_mode):
            return os.fsencode(os.readlink(path))
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            with os.fdopen(os.dup(fd), "rb") as fh:
                return fh.read(limit + 1 if limit >= 0 else -1)
        finally:
            os.close(fd)
    except OSError:
        return None
