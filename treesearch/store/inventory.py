"""The stores under a store home, as ``treesearch clean`` sees them; removing one is file deletion.

A folder of the home counts as a store only with every mark the store writes: a name made by
``store_dir_for`` from the workspace its ``workspace`` file records, and a ``format`` file. Anything
else in the home (the ``copies`` folder, a store whose marker a kill left empty, a stranger's
folder) is never listed, so never removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from treesearch.lifecycle import remove_tree
from treesearch.store.shadow import store_dir_for

__all__ = ["StoreEntry", "list_stores", "remove_store", "TRASH_PREFIX"]

TRASH_PREFIX = ".trash-"
"""A store being removed is first renamed to ``<home>/.trash-...``, so a kill mid-way never
leaves half a store that still looks like one; ``list_stores`` reports such leftovers."""


@dataclass(frozen=True)
class StoreEntry:
    path: Path
    workspace: Path
    """The workspace the store belongs to (from its marker)."""
    last_used: float
    """Newest modification time of the store's own files (seconds since the epoch)."""
    bytes: int
    in_use: bool
    """Another process holds the store's lock right now."""


def _last_used(path: Path) -> float:
    times = []
    for name in ("", "state.json", "lock", "index", "journal.json", "git/refs", "git/packed-refs"):
        with contextlib.suppress(OSError):
            times.append(os.stat(path / name).st_mtime)
    return max(times, default=0.0)


def folder_bytes(path: Path) -> int:
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


def _locked(path: Path) -> bool:
    try:
        fd = os.open(path / "lock", os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # cannot tell: treat as in use
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops our flock, if we got it
    return False


def list_stores(home: Path) -> tuple[list[StoreEntry], list[Path]]:
    """The stores under ``home``, and the ``.trash-*`` leftovers of an interrupted removal."""
    stores: list[StoreEntry] = []
    trash: list[Path] = []
    try:
        entries = sorted(home.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return stores, trash
    for entry in entries:
        if entry.is_symlink() or not entry.is_dir():
            continue
        if entry.name.startswith(TRASH_PREFIX):
            trash.append(entry)
            continue
        try:
            recorded = (entry / "workspace").read_text(encoding="utf-8", errors="surrogateescape")
        except OSError:
            continue
        if not recorded or not (entry / "format").is_file():
            continue
        workspace = Path(recorded)
        if not workspace.is_absolute() or store_dir_for(workspace, home).name != entry.name:
            continue
        stores.append(
            StoreEntry(entry, workspace, _last_used(entry), folder_bytes(entry), _locked(entry))
        )
    return stores, trash


def remove_store(path: Path) -> bool:
    """Delete the store folder ``path`` (renamed into the trash first); False if any of it stays.

    Refuses (returns False, removes nothing) while another process holds the store's lock.
    """
    try:
        fd = os.open(path / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        trash = path.with_name(f"{TRASH_PREFIX}{path.name}-{secrets.token_hex(4)}")
        os.rename(path, trash)
    except OSError:
        return False
    finally:
        os.close(fd)
    return remove_tree(trash)
