"""Git objects read and written in this process: one long-lived ``git cat-file --batch`` per store,
a cache of parsed trees, trees compared and made without a git process.

A restore used to run ``diff-tree`` for its plan, a ``cat-file --batch`` of its own for the
contents, and ``update-index`` + ``write-tree`` for the safety snapshot of a few changed files:
four process starts, most of a small restore. Here:

- ``ObjectReader`` reads loose objects itself (zlib, id checked), and packed ones through one
  ``cat-file --batch`` started when first needed and kept until the store closes (GitPython
  keeps one the same way). Objects written later by other processes are seen: loose ones are read from
  disk, and git looks for new packs when an object is not found; should it still answer
  "missing", the process is started again once before the object is called missing (a pack
  written and an old one removed by a repack since it started).
- ``Trees`` keeps parsed trees by id (a tree never changes), compares two trees going down only
  where the ids of subtrees differ (``diff``: the records ``diff-tree -r -z --no-renames`` prints,
  so the cost is that of the change, not of the tree), and makes the tree of a base tree with a
  few entries changed (``update``: new tree objects only along the changed paths, byte for byte
  what ``write-tree`` writes, so the ids are git's).
- ``hash_files`` hashes a scan's few changed files in this process, each checked to have the
  walk's stat data before and after it is read; with ``update``, a small scan (a session's step,
  a restore's safety snapshot) needs no ``update-index`` and no ``write-tree``
  (``_scan_edit.write_in_process``).
- ``ObjectBatch`` writes one scan's new objects as one small pack (two files, not one per
  object and its folder).
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import os
import stat
import struct
import subprocess
import weakref
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from treesearch.store._fs import atomic_write, create_file
from treesearch.store._git import BinarySink, GitFailed, GitRunner, git_executable
from treesearch.store._objects import object_id
from treesearch.store._stat import git_mode

Entry = tuple[int, str]
"""A tree entry: (git mode, object id)."""
TREE_MODE = 0o40000
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
_LOOSE_MAX = 8 << 20
AHEAD_MAX = 64
"""At most this many requests are sent to ``cat-file`` ahead of their reads (their 41 bytes each
stay far below a pipe's buffer, so the write never waits for ``cat-file`` to read)."""
_ZERO = "0" * 40
_CACHED_TREES = 8192
UNSYNCED_MAX = 256
"""At most this many index entries wait for git (``Scanner.unsynced``): they ride on the
command line of the next ``update-index`` a scan runs."""


def objects_dir_of(git: GitRunner) -> Path:
    """Where git writes this repository's objects: ``GIT_OBJECT_DIRECTORY`` if the store runs
    git with one (a search worker shares the search store's objects), else ``<git dir>/objects``."""
    env_dir = git.env.get("GIT_OBJECT_DIRECTORY")
    return Path(env_dir) if env_dir else git.git_dir / "objects"


class MissingObject(GitFailed):
    """An object the store needs is not in it (a git failure to every caller)."""


class ObjectReader:
    """Reads objects of one store: loose ones directly, others through one long-lived
    ``git cat-file --batch`` (see the module)."""

    def __init__(self, git: GitRunner, objects_dir: Callable[[], Path]) -> None:
        self._git = git
        self._objects_dir = objects_dir
        """Where the store's git processes write objects (a search worker's store: the search
        store's, through ``GIT_OBJECT_DIRECTORY``); read at every use."""
        self._proc: subprocess.Popen[bytes] | None = None
        self._env: dict[str, str] = {}
        self._pid = 0
        self._stop: weakref.finalize | None = None
        self._ahead: collections.deque[str] = collections.deque()
        """Ids asked for ahead (``ask_ahead``) whose answers wait in the pipe, in order."""
        self.started = 0
        """How many ``cat-file`` processes this reader started (a test reads it)."""

    # ------------------------------------------------------------------ reading

    def read_object(self, oid: str) -> tuple[bytes, bytes]:
        """``(type, content)`` of object ``oid``; raises ``MissingObject``."""
        got = self._loose(oid)
        if got is not None:
            return got
        buf = _Buffer()
        kind = self._batch(oid, buf)
        return kind, b"".join(buf.parts)

    def read(self, oid: str) -> bytes:
        """The content of blob ``oid``."""
        buf = _Buffer()
        self.read_to(oid, buf)
        return b"".join(buf.parts)

    def ask_ahead(self, oids: Sequence[str]) -> None:
        """Send the requests for ``oids`` (at most ``AHEAD_MAX`` blobs about to be read with
        ``read_to``, in this order) to ``cat-file`` in one write: each read then only takes its
        answer (one round trip for all of them, not one each). A read of another id first drops
        the answers with the process (a failure part-way: the next read starts another)."""
        if self._ahead:
            self.close()
        if not oids or len(oids) > AHEAD_MAX:
            return
        proc = self._process()
        assert proc.stdin is not None
        try:
            proc.stdin.write(b"".join(oid.encode() + b"\n" for oid in oids))
            proc.stdin.flush()
        except OSError:
            self.close()  # each read asks again
            return
        self._ahead.extend(oids)

    def read_to(self, oid: str, sink: BinarySink) -> int:
        """Stream blob ``oid`` into ``sink``; return its size."""
        loose = None
        if not (self._ahead and self._ahead[0] == oid):
            loose = self._loose(oid)
        if loose is not None:
            if loose[0] != b"blob":
                raise GitFailed(["cat-file", oid], 1, b"not a blob: " + loose[0])
            sink.write(loose[1])
            return len(loose[1])
        size = 0

        class _Counting:
            def write(self, data: bytes) -> int:
                nonlocal size
                size += len(data)
                sink.write(data)
                return len(data)

        kind = self._batch(oid, _Counting())
        if kind != b"blob":
            raise GitFailed(["cat-file", oid], 1, b"not a blob: " + kind)
        return size

    def _loose(self, oid: str) -> tuple[bytes, bytes] | None:
        """The object from its loose file, or ``None`` (packed, large, damaged: git then reads
        it, and reports any damage)."""
        path = os.path.join(self._objects_dir(), oid[:2], oid[2:])
        try:
            with open(path, "rb") as fh:
                raw = fh.read(_LOOSE_MAX + 1)
        except OSError:
            return None
        if len(raw) > _LOOSE_MAX:
            return None
        try:
            full = zlib.decompress(raw)
        except zlib.error:
            return None
        head, sep, data = full.partition(b"\0")
        kind, _, size = head.partition(b" ")
        if not sep or size != b"%d" % len(data) or kind not in (b"blob", b"tree", b"commit"):
            return None
        if object_id(kind.decode(), data) != oid:
            return None
        return kind, data

    def _batch(self, oid: str, sink: BinarySink) -> bytes:
        """Ask the long-lived ``cat-file --batch`` for ``oid``; a "missing" answer starts it
        again once (objects packed since it started) before the object is called missing."""
        for attempt in (0, 1):
            proc = self._process(restart=attempt == 1)  # (a new one has nothing asked ahead)
            if self._ahead and self._ahead[0] != oid:
                self.close()  # asked ahead in another order: drop those answers
                proc = self._process()
            asked = bool(self._ahead)
            if asked:
                self._ahead.popleft()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                if not asked:
                    proc.stdin.write(oid.encode() + b"\n")
                    proc.stdin.flush()
                header = proc.stdout.readline()
            except OSError as exc:
                self.close()
                if attempt:
                    raise GitFailed(["cat-file", "--batch", oid], 1, str(exc).encode()) from exc
                continue
            parts = header.split()
            if len(parts) == 2 and parts[1] == b"missing":
                continue
            if len(parts) != 3 or parts[0] != oid.encode():
                self.close()  # out of step: never reuse it
                raise GitFailed(["cat-file", "--batch", oid], 1, header or b"no answer")
            kind, left = parts[1], int(parts[2])
            out = proc.stdout
            try:
                while left:
                    chunk = out.read(min(left, 1 << 20))
                    if not chunk:
                        raise GitFailed(["cat-file", "--batch", oid], 1, b"short read")
                    sink.write(chunk)
                    left -= len(chunk)
            except BaseException:
                self.close()  # the rest of the answer is left in the pipe: never reuse it
                raise
            out.read(1)  # the LF after the content
            return kind
        raise MissingObject(
            ["cat-file", "--batch", oid], 128, b"object not in the store: " + oid.encode()
        )

    def _process(self, restart: bool = False) -> subprocess.Popen[bytes]:
        env = self._git.env
        if restart or (self._proc is not None and (self._pid != os.getpid() or self._env != env)):
            self.close()
        if self._proc is None:
            # No lock descriptor is passed on: this process outlives every lock the store takes.
            self._proc = subprocess.Popen(
                [git_executable(), "cat-file", "--batch"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=dict(env),
                cwd=str(self._git.git_dir),
            )
            self._env, self._pid = dict(env), os.getpid()
            self.started += 1
            # Ended when the reader is (a store dropped without ``close``) or at exit.
            self._stop = weakref.finalize(self, _stop, self._proc, self._pid)
        return self._proc

    def close(self) -> None:
        """End the ``cat-file`` process (a later read starts another)."""
        self._proc = None
        self._ahead.clear()
        if self._stop is not None:
            self._stop()
            self._stop = None


def _stop(proc: subprocess.Popen[bytes], pid: int) -> None:
    if pid != os.getpid():
        return  # a forked child's copy: the parent's process is the parent's to end
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class _Buffer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.parts.append(data)
        return len(data)


# ---------------------------------------------------------------------- trees


def parse_tree(data: bytes) -> dict[bytes, Entry]:
    """A tree object's entries: name -> (mode, id)."""
    out: dict[bytes, Entry] = {}
    i, n = 0, len(data)
    while i < n:
        sp = data.index(b" ", i)
        nul = data.index(b"\0", sp)
        out[data[sp + 1 : nul]] = (int(data[i:sp], 8), data[nul + 1 : nul + 21].hex())
        i = nul + 21
    return out


def tree_bytes(entries: Mapping[bytes, Entry]) -> bytes:
    """A tree object's content, as git writes it (entries in git's order: a folder's name sorts
    as if it ended with ``/``)."""
    order = sorted(entries, key=lambda n: n + b"/" if entries[n][0] == TREE_MODE else n)
    return b"".join(b"%o %s\0" % (entries[n][0], n) + bytes.fromhex(entries[n][1]) for n in order)


class TooBig(Exception):
    """A diff would read more trees than the caller allows (private)."""


class Trees:
    """Parsed trees by id, their comparison and new trees made from them (see the module)."""

    def __init__(self, objects: ObjectReader, objects_dir: Callable[[], Path]) -> None:
        self.objects = objects
        self.objects_dir = objects_dir
        self._cache: dict[str, dict[bytes, Entry]] = {}
        self.pending: ObjectBatch | None = None
        """Inside ``one_pack``: the objects saved since, written together by ``flush``."""

    def entries(self, oid: str) -> dict[bytes, Entry]:
        """The entries of tree ``oid`` (do not change the answer: it is cached)."""
        got = self._cache.get(oid)
        if got is not None:
            return got
        if oid == EMPTY_TREE:
            got = {}
        else:
            held = self.pending.objects.get(oid) if self.pending is not None else None
            kind, data = (held[0].encode(), held[1]) if held else self.objects.read_object(oid)
            if kind != b"tree":
                raise GitFailed(["cat-file", oid], 1, b"not a tree: " + kind)
            got = parse_tree(data)
        self._keep(oid, got)
        return got

    def lookup(self, tree: str, path: str) -> Entry | None:
        """The entry of ``path`` in tree ``tree``; ``None``: not there."""
        *folders, name = os.fsencode(path).split(b"/")
        for part in folders:
            entry = self.entries(tree).get(part)
            if entry is None or entry[0] != TREE_MODE:
                return None
            tree = entry[1]
        return self.entries(tree).get(name)

    def _keep(self, oid: str, entries: dict[bytes, Entry]) -> None:
        if len(self._cache) >= _CACHED_TREES:
            for key in list(self._cache)[: _CACHED_TREES // 4]:
                del self._cache[key]
        self._cache[oid] = entries

    # ------------------------------------------------------------------ comparing

    def diff(self, a: str, b: str, max_reads: int = 512) -> list[bytes] | None:
        """The records ``diff-tree -r -z --no-renames a b`` prints (head, path, head, path...),
        or ``None`` when that would read more than ``max_reads`` trees not in the cache (a big
        change: ``diff-tree`` is quicker then)."""
        budget = [max_reads]
        out: list[bytes] = []
        try:
            self._diff(a, b, b"", out, budget)
        except TooBig:
            return None
        # git's order: by whole path (a folder's files sort as ``name/...``, after ``name.x``).
        pairs = sorted(zip(out[::2], out[1::2], strict=True), key=lambda r: r[1])
        return [field for pair in pairs for field in pair]

    def _load(self, oid: str, budget: list[int]) -> dict[bytes, Entry]:
        if oid not in self._cache:
            budget[0] -= 1
            if budget[0] < 0:
                raise TooBig
        return self.entries(oid)

    def _diff(self, a: str, b: str, prefix: bytes, out: list[bytes], budget: list[int]) -> None:
        if a == b:
            return
        ea, eb = self._load(a, budget), self._load(b, budget)
        # The names whose entries differ, found in C (a folder of hundreds of entries where
        # one changed costs no loop over the others).
        for name in sorted({n for n, _e in ea.items() ^ eb.items()}):
            old, new = ea.get(name), eb.get(name)
            path = prefix + name
            old_tree = old is not None and old[0] == TREE_MODE
            new_tree = new is not None and new[0] == TREE_MODE
            if old_tree and new_tree:
                assert old is not None and new is not None
                self._diff(old[1], new[1], path + b"/", out, budget)
                continue
            if old_tree:
                assert old is not None
                self._all(old[1], path + b"/", out, budget, gone=True)
                old = None
            if new_tree:
                assert new is not None
                self._all(new[1], path + b"/", out, budget, gone=False)
                new = None
            if old is None and new is None:
                continue
            out += (_record(old, new), path)

    def _all(
        self, oid: str, prefix: bytes, out: list[bytes], budget: list[int], *, gone: bool
    ) -> None:
        """Every file below tree ``oid``, as deleted (``gone``) or added."""
        for name, entry in sorted(self._load(oid, budget).items()):
            if entry[0] == TREE_MODE:
                self._all(entry[1], prefix + name + b"/", out, budget, gone=gone)
            else:
                out += (_record(entry, None) if gone else _record(None, entry), prefix + name)

    # ------------------------------------------------------------------ making trees

    def save(self, batch: ObjectBatch) -> None:
        """Write ``batch``'s objects where the store's git writes them (one pack); inside
        ``one_pack``, with the block's other objects."""
        if self.pending is not None:
            for oid, item in batch.objects.items():
                self.pending.objects.setdefault(oid, item)
            batch.objects = {}
            return
        batch.write(self.objects_dir())

    @contextlib.contextmanager
    def one_pack(self, lost: Callable[[], None]) -> Iterator[None]:
        """Objects saved inside the block (a restore's safety scan) are written as one pack with
        those a ``flush`` adds (its snapshot's commit, which ``Catalogue.record`` writes so, before
        any ref names it), not a pack each; what is left is written when the block ends, however
        it ends. Should that fail, ``lost()`` is called (what was made from those objects must not
        be trusted) and the error raised."""
        if self.pending is not None:
            yield  # (nested: the outer block writes them)
            return
        self.pending = ObjectBatch()
        try:
            yield
        finally:
            try:
                self.flush()
            except BaseException:
                lost()
                raise
            finally:
                self.pending = None

    def flush(self) -> None:
        """Write the objects ``one_pack`` holds so far (nothing outside it)."""
        if self.pending is not None:
            self.pending.write(self.objects_dir())

    def update(
        self, base: str, changes: Mapping[str, Entry | None], batch: ObjectBatch | None = None
    ) -> str:
        """The id of ``base`` with ``changes`` (path -> new entry, ``None``: removed) made,
        writing the new trees (a folder left empty goes, as ``write-tree`` leaves it out).
        Raises ``ValueError`` for changes that do not fit the tree (a file set where a folder
        with files stays): the caller asks git then. With ``batch``, the new trees join it (the
        caller saves it); else they are saved now."""
        split: dict[bytes, Entry | None] = {os.fsencode(p): e for p, e in changes.items()}
        own = batch if batch is not None else ObjectBatch()
        made = self._update(base, split, own)
        if made is None:
            made = own.add("tree", b"")  # written: a commit's tree must be in the store
        if batch is None:
            self.save(own)
        return made

    def _update(
        self, base: str | None, changes: Mapping[bytes, Entry | None], batch: ObjectBatch
    ) -> str | None:
        before = self.entries(base) if base is not None else {}
        entries = dict(before)
        below: dict[bytes, dict[bytes, Entry | None]] = {}
        files: set[bytes] = set()
        for path, entry in changes.items():
            head, sep, rest = path.partition(b"/")
            if sep:
                below.setdefault(head, {})[rest] = entry
                continue
            if entry is None:
                old = entries.get(head)
                if old is not None and old[0] == TREE_MODE:
                    raise ValueError(f"{os.fsdecode(path)} is a folder in the tree")
                entries.pop(head, None)
            else:
                entries[head] = entry
                files.add(head)
        for name, sub in below.items():
            old = before.get(name)
            child = old[1] if old is not None and old[0] == TREE_MODE else None
            if old is not None and child is None and name in entries and _adds(sub):
                raise ValueError(f"{os.fsdecode(name)} is a file in the tree")
            made = self._update(child, sub, batch) if child is not None or _adds(sub) else None
            if name in files:
                if made is not None:
                    raise ValueError(f"{os.fsdecode(name)} would be a file and a folder")
                continue
            if made is None:
                if child is not None:
                    entries.pop(name, None)
                continue
            entries[name] = (TREE_MODE, made)
        if not entries:
            return None
        oid = batch.add("tree", tree_bytes(entries))
        self._keep(oid, entries)
        return oid


def _adds(changes: Mapping[bytes, Entry | None]) -> bool:
    return any(e is not None for e in changes.values())


def _record(old: Entry | None, new: Entry | None) -> bytes:
    """A raw record of ``diff-tree`` (without the path)."""
    om, oo = (old[0], old[1]) if old is not None else (0, _ZERO)
    nm, no = (new[0], new[1]) if new is not None else (0, _ZERO)
    if old is None:
        status = b"A"
    elif new is None:
        status = b"D"
    elif (om == 0o120000) != (nm == 0o120000) or (om == 0o160000) != (nm == 0o160000):
        status = b"T"
    else:
        status = b"M"
    return b":%06o %06o %s %s %s" % (om, nm, oo.encode(), no.encode(), status)


# ---------------------------------------------------------------------- blobs of a scan

_HASH_MAX = 1 << 20
"""Files up to this size are hashed here (bigger ones: git)."""
_NOFOLLOW = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def hash_files(
    root: str,
    paths: Sequence[str],
    keys: Mapping[str, tuple[int, int, int, int, int]],
    limit: int = _HASH_MAX,
) -> dict[str, tuple[Entry, bytes]] | None:
    """The blob of each of ``paths`` (files and symlinks) as it is on disk, each checked to have
    the stat data ``keys`` (the walk's) before and after it is read: path -> ((mode, blob id),
    content); or ``None`` when one cannot be done here (bigger than ``limit``, changed since
    the walk, unreadable, not a file): git is asked then. Nothing is written."""
    out: dict[str, tuple[Entry, bytes]] = {}
    for p in paths:
        key = keys[p]
        full = os.path.join(root, p)
        try:
            if stat.S_ISLNK(key[4]):
                data = os.fsencode(os.readlink(full))
                st = os.lstat(full)
            elif stat.S_ISREG(key[4]) and key[2] <= limit:
                fd = os.open(full, _NOFOLLOW)  # (non-blocking: a fifo put there is not waited on)
                try:
                    if _key(os.fstat(fd)) != key:
                        return None
                    data = _read_all(fd, key[2])
                    st = os.fstat(fd)
                finally:
                    os.close(fd)
            else:
                return None
        except OSError:
            return None
        if _key(st) != key or len(data) != key[2]:
            return None
        out[p] = ((git_mode(key[4]), object_id("blob", data)), data)
    return out


def _key(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode)


def _read_all(fd: int, size: int) -> bytes:
    parts: list[bytes] = []
    while True:
        chunk = os.read(fd, max(size + 1, 1 << 16))
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)


_PACK_TYPES = {"commit": 1, "tree": 2, "blob": 3}


def pack_bytes(objects: Sequence[tuple[str, str, bytes]]) -> tuple[bytes, bytes, str]:
    """A pack (version 2, no deltas) of ``objects`` ((id, kind, content)), its index (version
    2) and its name's hash, as git writes them."""
    body = [b"PACK", struct.pack(">II", 2, len(objects))]
    offset = 12
    entries: list[tuple[bytes, int, int]] = []
    for oid, kind, content in objects:
        size = len(content)
        byte = (_PACK_TYPES[kind] << 4) | (size & 0x0F)
        size >>= 4
        head = bytearray()
        while size:
            head.append(byte | 0x80)
            byte, size = size & 0x7F, size >> 7
        head.append(byte)
        item = bytes(head) + zlib.compress(content, 1)
        entries.append((bytes.fromhex(oid), zlib.crc32(item), offset))
        body.append(item)
        offset += len(item)
    data = b"".join(body)
    trailer = hashlib.sha1(data).digest()
    pack = data + trailer
    entries.sort()
    fanout = [0] * 256
    for oid_raw, _crc, _off in entries:
        fanout[oid_raw[0]] += 1
    total = 0
    for i in range(256):
        total += fanout[i]
        fanout[i] = total
    idx = b"".join(
        [
            b"\377tOc",
            struct.pack(">I", 2),
            struct.pack(">256I", *fanout),
            *(e[0] for e in entries),
            *(struct.pack(">I", e[1]) for e in entries),
            *(struct.pack(">I", e[2]) for e in entries),
            trailer,
        ]
    )
    idx += hashlib.sha1(idx).digest()
    return pack, idx, trailer.hex()


class ObjectBatch:
    """Objects to write together as one pack: two files in one folder, whatever their number (a
    session's step makes a blob and a few trees; loose, each is a file of its own and often a
    new fan-out folder: measured 1.5x slower for a capture, 1.4x for a restore). ``add`` returns
    the id at once; ``write`` puts the pack in place (pack first, its index last, renamed into
    place: git sees a pack only by its index, so a kill leaves no half-made object).
    ``_pack.MAX_PACKS`` bounds how many pile up between repacks."""

    def __init__(self) -> None:
        self.objects: dict[str, tuple[str, bytes]] = {}

    def add(self, kind: str, content: bytes) -> str:
        oid = object_id(kind, content)
        self.objects.setdefault(oid, (kind, content))
        return oid

    def write(self, objects_dir: Path) -> None:
        if not self.objects:
            return
        pack, idx, name = pack_bytes([(o, k, c) for o, (k, c) in self.objects.items()])
        folder = objects_dir / "pack"
        if not folder.is_dir():
            folder.mkdir(parents=True, exist_ok=True)
        # The pack is written in place: git sees a pack only through its
        # index, renamed into place once the pack is whole. A file of that name already there
        # (a killed writer's, or another process writing the same objects into a shared objects
        # folder) is replaced whole, through a temporary file. Temporary files go beside the
        # pack (a rename within a folder costs half of one across folders here);
        # ``_init.sweep_temps`` removes those a killed writer left.
        pack_path = folder / f"pack-{name}.pack"
        if not create_file(pack_path, pack, perm=0o444):
            atomic_write(pack_path, pack, tmp_dir=folder, perm=0o444)
        atomic_write(folder / f"pack-{name}.idx", idx, tmp_dir=folder, perm=0o444)
        self.objects = {}


def store_trees(git: GitRunner) -> Trees:
    """The object reader and tree cache of one store: objects go to (and are read first from)
    where its git writes them (``objects_dir_of``)."""

    def objects_dir() -> Path:
        return objects_dir_of(git)

    return Trees(ObjectReader(git, objects_dir), objects_dir)
