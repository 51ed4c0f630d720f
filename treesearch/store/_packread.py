"""Objects read from the store's packs in this process (no ``cat-file`` round trip).

A restore reads the target's files and a few trees; each read through the long-lived
``git cat-file --batch`` (``_trees.ObjectReader``) costs a round trip to another process: two
wake-ups, a scheduling delay on a busy machine. ``PackSet`` reads the packs' ``.idx`` and
``.pack`` files directly (memory-mapped): the index's fan-out and sorted ids find the object, the
pack entry is inflated, and an entry stored as a delta (``OFS_DELTA`` against an earlier entry of
the same pack, ``REF_DELTA`` against an object named by id) is applied to its base. Every object
read is checked against its id (the SHA-1 of its header and content); anything unusual (an
index or pack version it does not know, an object bigger than ``limit``, a damaged entry, an id
that does not match) gives ``None``, and the caller asks git, which reads and reports it.

Packs are immutable once in place: a pack added later is found when an id is not (the folder is
listed again when its mtime moved), and one a repack removed is dropped then (its mapping kept
it readable until then).
"""

from __future__ import annotations

import mmap
import os
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

from treesearch.store._objects import object_id

_TYPES = {1: b"commit", 2: b"tree", 3: b"blob", 4: b"tag"}
_OFS_DELTA, _REF_DELTA = 6, 7
_MAX_CHAIN = 64
"""Longer delta chains are left to git (git's own default depth is 50)."""


class _Pack:
    """One ``.idx`` (version 2) and its ``.pack`` (version 2), mapped."""

    def __init__(self, idx_path: str) -> None:
        self.idx = _map(idx_path)
        self.pack = _map(idx_path[:-4] + ".pack")
        idx, pack = self.idx, self.pack
        if idx[:8] != b"\377tOc\0\0\0\2" or pack[:8] != b"PACK\0\0\0\2":
            raise ValueError("not a version 2 pack")
        self.count = struct.unpack_from(">I", idx, 8 + 255 * 4)[0]
        if struct.unpack_from(">I", pack, 8)[0] != self.count:
            raise ValueError("the index and the pack disagree")
        self.ids = 8 + 256 * 4
        self.offsets = self.ids + self.count * 24  # after the ids and the CRCs
        self.large = self.offsets + self.count * 4
        if len(idx) < self.large + 40:
            raise ValueError("index too short")

    def close(self) -> None:
        self.idx.close()
        self.pack.close()

    def find(self, raw: bytes) -> int | None:
        """The offset of object ``raw`` (20 bytes) in the pack, or ``None``."""
        idx, first = self.idx, raw[0]
        lo = struct.unpack_from(">I", idx, 8 + (first - 1) * 4)[0] if first else 0
        hi = struct.unpack_from(">I", idx, 8 + first * 4)[0]
        base = self.ids
        while lo < hi:
            mid = (lo + hi) // 2
            at = base + mid * 20
            got = idx[at : at + 20]
            if got == raw:
                off = struct.unpack_from(">I", idx, self.offsets + mid * 4)[0]
                if off & 0x80000000:
                    off = struct.unpack_from(">Q", idx, self.large + (off & 0x7FFFFFFF) * 8)[0]
                return int(off)
            if got < raw:
                lo = mid + 1
            else:
                hi = mid
        return None

    def entry(self, offset: int, limit: int) -> tuple[int, bytes, int | bytes | None] | None:
        """``(type, inflated data, base)`` of the entry at ``offset``: ``base`` is the base's
        offset (``OFS_DELTA``), its id (``REF_DELTA``) or ``None``; ``None`` when its data is
        bigger than ``limit``."""
        pack = self.pack
        c = pack[offset]
        kind, size, shift, pos = (c >> 4) & 7, c & 15, 4, offset + 1
        while c & 0x80:
            c = pack[pos]
            pos += 1
            size |= (c & 0x7F) << shift
            shift += 7
        if size > limit:
            return None
        base: int | bytes | None = None
        if kind == _OFS_DELTA:
            c = pack[pos]
            pos += 1
            back = c & 0x7F
            while c & 0x80:
                c = pack[pos]
                pos += 1
                back = ((back + 1) << 7) | (c & 0x7F)
            base = offset - back
        elif kind == _REF_DELTA:
            base = pack[pos : pos + 20]
            pos += 20
        # Deflate never grows data by more than 5 bytes per 16 KiB block and 6 in all.
        inflater = zlib.decompressobj()
        data = inflater.decompress(pack[pos : pos + size + (size >> 10) + 64], size)
        if len(data) != size or not inflater.eof:
            raise ValueError("damaged pack entry")
        return kind, data, base


class PackSet:
    """The packs of one objects folder (see the module)."""

    def __init__(self, objects_dir: Callable[[], Path]) -> None:
        self._objects_dir = objects_dir
        self._folder = ""
        self._stamp = 0
        self._packs: dict[str, _Pack] = {}

    def read(self, oid: str, limit: int) -> tuple[bytes, bytes] | None:
        """``(type, content)`` of ``oid`` from a pack, checked against its id; ``None``: not in
        a pack here, bigger than ``limit``, or anything this reader leaves to git."""
        try:
            raw = bytes.fromhex(oid)
        except ValueError:
            return None
        if len(raw) != 20:
            return None
        for fresh in (False, True):
            if fresh and not self.refresh():
                return None
            for pack in self._packs.values():
                offset = pack.find(raw)
                if offset is not None:
                    got = self._resolve(pack, offset, limit)
                    if got is None or object_id(got[0].decode(), got[1]) != oid:
                        return None
                    return got
        return None

    def has(self, oid: str) -> bool:
        """Is ``oid`` in one of the packs known now (no listing of the folder)?"""
        raw = bytes.fromhex(oid)
        return any(pack.find(raw) is not None for pack in self._packs.values())

    def close(self) -> None:
        for pack in self._packs.values():
            pack.close()
        self._packs = {}
        self._stamp = 0

    def refresh(self) -> bool:
        """List the pack folder again if it changed; True when it did."""
        folder = str(self._objects_dir() / "pack")
        try:
            stamp = os.stat(folder).st_mtime_ns
        except OSError:
            return False
        if folder == self._folder and stamp == self._stamp:
            return False
        if folder != self._folder:
            self.close()
        self._folder, self._stamp = folder, stamp
        names = {n for n in os.listdir(folder) if n.endswith(".idx") and n.startswith("pack-")}
        for gone in set(self._packs) - names:
            self._packs.pop(gone).close()
        for name in sorted(names - set(self._packs)):
            try:
                self._packs[name] = _Pack(os.path.join(folder, name))
            except (OSError, ValueError, struct.error):
                continue  # half written, or a format this reader does not know: git reads it
        return True

    def _resolve(self, pack: _Pack, offset: int, limit: int) -> tuple[bytes, bytes] | None:
        """The object at ``offset``, its delta chain applied; ``None``: left to git."""
        deltas: list[bytes] = []
        try:
            for _ in range(_MAX_CHAIN):
                got = pack.entry(offset, limit)
                if got is None:
                    return None
                kind, data, base = got
                if base is None:
                    if kind not in _TYPES:
                        return None
                    for delta in reversed(deltas):
                        data = _apply(data, delta, limit)
                    return _TYPES[kind], data
                deltas.append(data)
                if isinstance(base, int):
                    offset = base
                    continue
                found = pack.find(base)
                if found is None:
                    return None  # a base in another pack (a thin pack's): git reads it
                offset = found
        except (IndexError, ValueError, struct.error, zlib.error):
            return None
        return None


def _map(path: str) -> mmap.mmap:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        c = data[i]
        i += 1
        value |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return value, i


def _apply(base: bytes, delta: bytes, limit: int) -> bytes:
    """``base`` with git's ``delta`` (copy and insert instructions) applied."""
    src, i = _varint(delta, 0)
    dst, i = _varint(delta, i)
    if src != len(base) or dst > limit:
        raise ValueError("delta does not fit its base")
    out = bytearray()
    n = len(delta)
    while i < n:
        op = delta[i]
        i += 1
        if op & 0x80:
            off = size = 0
            for k in range(4):
                if op & (1 << k):
                    off |= delta[i] << (8 * k)
                    i += 1
            for k in range(3):
                if op & (0x10 << k):
                    size |= delta[i] << (8 * k)
                    i += 1
            size = size or 0x10000
            if off + size > len(base):
                raise ValueError("delta copies past its base")
            out += base[off : off + size]
        elif op:
            out += delta[i : i + op]
            i += op
        else:
            raise ValueError("reserved delta instruction")
    if len(out) != dst:
        raise ValueError("delta result has the wrong size")
    return bytes(out)
