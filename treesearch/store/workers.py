"""Worker folders of a parallel search: a store per folder that shares the search's objects.

A parallel search (``search.parallel``) expands several nodes at once, each in a folder of its
own that stands in for the workspace. Each such folder gets a store of its own (its own index,
refs, state file and lock, in a store home beside the folder) whose git objects are the search
store's: git runs with ``GIT_OBJECT_DIRECTORY`` set to the search store's object folder, so no
object is copied and whatever a worker captures is at once readable by the search's store.

Lock discipline: a worker's store takes only its own lock and writes only its own files; the one
thing it shares, the object folder, git writes safely from several processes at once (each object
goes to a temporary file that is renamed into place). Nothing a worker does moves a ref, a label,
the state file or the index of the search's store; the controller records the states that become
nodes in its own store (``adopt``) under that store's lock. ``gc`` of the search's store cannot
run meanwhile: it needs the workspace hold, which the search keeps for its whole duration.

The worker folder has no ``.git`` of its own, so the ignore inputs that come from the workspace's
repository (``.git/info/exclude``, files its index tracks although a pattern ignores them) are
handed over (``scan.Mirror``): a worker captures exactly the files the search's store would.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from treesearch.errors import StoreError
from treesearch.store._errors import errors
from treesearch.store._scan import Mirror
from treesearch.store._seed import user_git_dir
from treesearch.store.shadow import ShadowStore
from treesearch.store.values import CaptureStats, Snapshot

__all__ = ["WorkerView", "adopt", "open_worker_store", "worker_view"]


@dataclass(frozen=True)
class WorkerView:
    """Everything a worker process needs to open a store on its own folder (picklable)."""

    objects: str
    """The search store's object folder."""
    excludes: tuple[str, ...]
    respect_gitignore: bool
    max_file_bytes: int | None
    mirror: Mirror
    workspace: str
    """The workspace the worker folders stand in for."""
    uncaptured: tuple[str, ...] = ()
    """Paths of the workspace the store does not capture (ignored, excluded, oversize; folders
    end in ``/``), copied once into each worker folder: the tests may read them (fixtures,
    built files) and a restore never touches them. Caches (``_CACHES``) are left out."""


def worker_view(store: ShadowStore) -> WorkerView:
    """What workers need to stand in for ``store``'s workspace.

    Raises ``StoreError`` when the workspace holds a nested git repository: its own ignore
    rules and tracked files would not be seen in a worker folder, so a worker could capture
    other files than the search's store does.
    """
    with store.lock(), errors(StoreError, f"cannot prepare worker folders of {store.workspace}"):
        scan = store._scanner.scan()
        nested = sorted(scan.walk.nested_repos)
        rules = store._scanner.ignore_rules("")
        uncaptured = sorted(
            p
            for p in (*rules.files, *rules.dirs, *(s.path for s in scan.walk.skipped))
            if p.rstrip("/").rsplit("/", 1)[-1] not in _CACHES and not p.endswith(".pyc")
        )
        keep: frozenset[str] = frozenset()
        exclude_from: tuple[str, ...] = ()
        if store.respect_gitignore:
            keep = store._scanner._tracked_by_user(store.workspace)
            gitdir = user_git_dir(store.workspace)
            info = gitdir / "info" / "exclude" if gitdir is not None else None
            if info is not None and info.is_file():
                exclude_from = (str(info),)
    if nested:
        raise StoreError(
            f"the workspace {store.workspace} holds nested git repositories ({nested[0]}"
            f"{', ...' if len(nested) > 1 else ''}): parallel expansion cannot mirror their "
            "ignore rules; set search.workers: 1"
        )
    return WorkerView(
        objects=str(store.git_dir / "objects"),
        excludes=store.excludes,
        respect_gitignore=store.respect_gitignore,
        max_file_bytes=store.max_file_bytes,
        mirror=Mirror(exclude_from, keep),
        workspace=str(store.workspace),
        uncaptured=tuple(uncaptured),
    )


def open_worker_store(view: WorkerView, folder: Path) -> ShadowStore:
    """A store of the worker folder ``folder/ws`` (created empty if missing), kept in
    ``folder/home``, that reads and writes the objects of the store ``view`` describes.

    ``folder`` is the worker's own scratch folder (``lifecycle.scratch_dir``): outside the
    user's project and the search's store, removed with the worker.
    """
    ws = folder / "ws"
    if not ws.exists():
        ws.mkdir()
        _copy_uncaptured(Path(view.workspace), ws, view.uncaptured)
    store = ShadowStore.open(
        ws,
        home=folder / "home",
        excludes=view.excludes,
        respect_gitignore=view.respect_gitignore,
        max_file_bytes=view.max_file_bytes,
        fixed_dates=True,
    )
    if not os.path.isdir(view.objects):
        raise StoreError(f"the object folder {view.objects} of the search's store is missing")
    store._git.env["GIT_OBJECT_DIRECTORY"] = view.objects  # (objects written here go there too)
    store._packer.enabled = False  # the search's store packs the objects it owns
    store._scanner.mirror = view.mirror
    return store


_CACHES = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".git"})
"""Folders a worker's own runs make again: not worth copying (``.git``: never copied)."""


def _copy_uncaptured(src: Path, dest: Path, paths: tuple[str, ...]) -> None:
    """Copy ``paths`` (relative; folders end in ``/``) from ``src`` into ``dest``, links as
    links; a path that vanished meanwhile is skipped."""
    for rel in paths:
        s, d = src / rel.rstrip("/"), dest / rel.rstrip("/")
        if not _within(s, src):
            continue
        d.parent.mkdir(parents=True, exist_ok=True)
        try:
            if s.is_dir() and not s.is_symlink():
                shutil.copytree(s, d, symlinks=True, dirs_exist_ok=True)
            else:
                shutil.copy2(s, d, follow_symlinks=False)
        except FileNotFoundError:
            continue


def _within(path: Path, root: Path) -> bool:
    try:
        path.parent.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


def adopt(
    store: ShadowStore,
    tree: str,
    *,
    modes: dict[str, int],
    empty_dirs: tuple[str, ...],
    meta: dict[str, object] | None = None,
) -> Snapshot:
    """Record ``tree`` (whose objects are already in ``store``'s object folder) as a snapshot
    of ``store`` with the given permission bits and empty folders, without touching its
    workspace: how the search's store takes in a state a worker made, and how a worker's store
    learns a node it is to start from. The newest snapshot of ``tree`` with the same metadata
    is reused."""
    with store.lock(), errors(StoreError, f"cannot record tree {tree[:12]} in {store.path}"):
        cat = store._catalogue
        for snap in cat.newest_first():
            same = snap.modes == modes and snap.empty_dirs == tuple(empty_dirs)
            if snap.tree == tree and same and (meta is None or snap.meta == meta):
                return snap
        return cat.record(
            "capture",
            tree,  # type: ignore[arg-type]
            label=None,
            meta=dict(meta or {}),
            modes=dict(modes),
            empty_dirs=tuple(empty_dirs),
            skipped=(),
            changed=(),
            stats=CaptureStats(0, 0, 0.0),
            fixed_dates=store.fixed_dates,
        )
