"""Packing: the store's loose objects and refs into packs, a few snapshots' worth at a time.

A snapshot of a small change writes about a dozen small files: its commit, the trees along the
changed paths, the changed files' blobs, its ref (and a metadata blob when modes change). Each
takes at least one filesystem block (4 KiB) however small it is, so twenty snapshots of 2-file
changes cost ~1 MiB of blocks for ~30 KiB of data. After a capture, once the loose files take more
than ``FRACTION`` (2%) of what the packs take (and at least ``FLOOR`` bytes, so that small stores do not
pay a git process on every capture), ``git repack -d --geometric=2`` rolls them into a pack (packs
stay few: each is at least twice the size of the next smaller one), and ``git pack-refs`` moves
the loose refs into ``packed-refs``. The small packs that scans made in the process write
(``_trees.ObjectBatch``: a block or two for a few objects) count with the loose files.

Both are git's own crash-safe operations: a new pack is written under a temporary name and
renamed into place (index last) before any loose object or older pack it replaces is deleted, and
``packed-refs`` is replaced by rename before a loose ref is pruned. A kill at any point leaves
every object readable, at worst twice (loose and packed) or with a ``tmp_pack_*`` left over, which
the next ``gc`` removes; a stale ``packed-refs.lock`` is reclaimed under the store lock
(``_lock.reclaim_git_locks``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

FLOOR = 128 * 1024
"""Loose files below this many bytes on disk are never packed (~32 files: ~3 small snapshots),
so that a repack (several git processes, a few fsyncs) is paid once per few captures."""
FRACTION = 0.02
"""Pack when loose files take more than this fraction of the packs' bytes on disk."""
MAX_PACKS = 16
"""Pack when there are more packs than this (each scan made in the process adds one)."""
SMALL_PACK = 32 * 1024
"""Packs smaller than this on disk count with the loose objects (see ``Loose.small_bytes``)."""
_HEX2 = frozenset(f"{i:02x}" for i in range(256))

Run = Callable[..., bytes]


@dataclass(frozen=True)
class Loose:
    """Loose objects and loose refs, and the bytes on disk of those and of the packs."""

    objects: int
    refs: int
    loose_bytes: int
    pack_bytes: int
    packs: int = 0
    """Packs (a scan made in the process writes a small one: ``_trees.ObjectBatch``)."""
    small_bytes: int = 0
    """Bytes on disk of the packs under ``SMALL_PACK``: a scan's pack takes a block or two for
    a few objects, like loose objects, and counts with them."""


class Packer:
    """Decides when to pack a store's loose objects and refs, and packs them."""

    def __init__(self, git_dir: Path, run: Run) -> None:
        self.git_dir = git_dir
        self.run = run
        self.floor = FLOOR
        self.fraction = FRACTION
        self.packs = 0
        """Times this object packed (for tests and benchmarks)."""
        self.enabled = True
        """False for a store whose objects belong to another store (a search worker's): the
        owner packs them, under its own lock."""

    def loose(self) -> Loose:
        """Count the loose objects and refs (one ``scandir`` per object folder that exists)."""
        objects = refs = loose_bytes = pack_bytes = 0
        obj_dir = self.git_dir / "objects"
        with os.scandir(obj_dir) as it:
            subdirs = [e.path for e in it if e.name in _HEX2]
        for d in subdirs:
            with os.scandir(d) as it:
                for e in it:
                    objects += 1
                    loose_bytes += _disk(e)
        per_pack: dict[str, int] = {}
        with contextlib.suppress(FileNotFoundError), os.scandir(obj_dir / "pack") as it:
            for e in it:
                if e.name.startswith("pack-"):  # (not a writer's temporary file)
                    stem = e.name.rsplit(".", 1)[0]
                    per_pack[stem] = per_pack.get(stem, 0) + _disk(e)
        packs = len(per_pack)
        pack_bytes = sum(per_pack.values())
        small_bytes = sum(b for b in per_pack.values() if b < SMALL_PACK)
        for dirpath, _dirs, names in os.walk(self.git_dir / "refs" / "treesearch"):
            for name in names:
                refs += 1
                with contextlib.suppress(FileNotFoundError):
                    loose_bytes += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
        return Loose(objects, refs, loose_bytes, pack_bytes, packs, small_bytes)

    def due(self, state: Loose) -> bool:
        if state.packs > MAX_PACKS:
            return True  # small packs of scans: rolled together (``--geometric``)
        small = state.loose_bytes + state.small_bytes
        return small >= max(self.floor, self.fraction * (state.pack_bytes - state.small_bytes))

    def maybe_pack(self) -> bool:
        """Pack when ``due``; True when it did (the caller holds the store lock)."""
        if not self.enabled:
            return False
        state = self.loose()
        if not self.due(state):
            return False
        self.pack(state)
        return True

    def pack(self, state: Loose | None = None) -> None:
        """Roll loose objects into packs and loose refs into ``packed-refs``."""
        state = state or self.loose()
        if state.objects:
            self.run(
                [
                    "-c",
                    "repack.updateServerInfo=false",
                    "repack",
                    "-d",
                    "-q",
                    "--geometric=2",
                    "--no-write-bitmap-index",
                ]
            )
        if state.refs:
            self.run(["pack-refs", "--all", "--prune"])
        self.packs += 1


def _disk(entry: os.DirEntry[str]) -> int:
    try:
        return entry.stat(follow_symlinks=False).st_blocks * 512
    except FileNotFoundError:
        return 0
