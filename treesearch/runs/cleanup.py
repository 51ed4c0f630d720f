"""Workspace copies of ``workspace.copy`` runs, and ``treesearch clean``, which prunes what runs leave.

A copy run searches ``<store home>/copies/<run id>-xxxx/<name>/``, a copy of the configured folder.
Next to the copy (never inside it) ``copy.json`` records what it is: the run id and directory, the
source folder, when it was made and by which process. The copy stays after the run so that the user
can look at the best state; ``treesearch clean`` removes copies older than ``DEFAULT_KEEP_DAYS``.

``plan_clean`` lists, without touching anything:

* copies (recognised by their ``copy.json`` only, never by a name) whose last use (made, last
  event of their run, last store operation) is older than the cut-off, and that no running
  search claims (the run that made it, or a resume: ``claim_copy``);
* the stores of those copies;
* orphan stores: their recorded workspace no longer exists, and they have not been used since the
  cut-off (a store of an existing workspace is never listed);
* the leftovers of dead treesearch processes in the temp root: process groups and scratch folders
  (``treesearch.lifecycle.reap``).

``apply_clean`` removes exactly what a plan lists, re-checking each item first. The module never
prints.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from treesearch import lifecycle
from treesearch._atomic import write_text
from treesearch.errors import RunError
from treesearch.store.inventory import StoreEntry, folder_bytes, list_stores, remove_store

__all__ = [
    "COPY_MARKER",
    "DEFAULT_KEEP_DAYS",
    "CleanItem",
    "CleanPlan",
    "apply_clean",
    "claim_copy",
    "copy_note",
    "make_workspace_copy",
    "plan_clean",
]

COPY_MARKER = "copy.json"
_COPY_KIND = "treesearch-workspace-copy"
DEFAULT_KEEP_DAYS = 7


def copies_root(home: Path) -> Path:
    return home / "copies"


def make_workspace_copy(source: Path, home: Path, *, run_id: str, run_dir: Path) -> Path:
    """Copy ``source`` to ``<home>/copies/<run_id>-xxxx/<source name>`` and return that path.

    The marker is written (atomically) before the copy starts, so a copy cut short by a kill is
    still recognised and pruned by ``treesearch clean``.
    """
    import shutil

    root = copies_root(home)
    root.mkdir(parents=True, exist_ok=True)
    folder = root / f"{run_id}-{secrets.token_hex(2)}"
    folder.mkdir()
    workspace = folder / source.name
    marker = {
        "kind": _COPY_KIND,
        "run_id": run_id,
        "run_dir": str(run_dir),
        "source": str(source),
        "workspace": str(workspace),
        "created": time.time(),
        "owner": _owner_record(),
    }
    _write_marker(folder, marker)
    try:
        shutil.copytree(source, workspace, symlinks=True)
    except BaseException as exc:
        # Nothing half-made stays behind (the marker goes last, as in `apply_clean`).
        lifecycle.remove_tree(workspace) and lifecycle.remove_tree(folder)
        if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list):
            what = "; ".join(str(why) for _src, _dst, why in exc.args[0][:3])
            raise RunError(f"cannot copy the workspace {source} (workspace.copy): {what}") from exc
        if isinstance(exc, OSError):
            raise RunError(f"cannot copy the workspace {source} (workspace.copy): {exc}") from exc
        raise
    return workspace


def _write_marker(folder: Path, marker: dict[str, Any]) -> None:
    write_text(folder / COPY_MARKER, json.dumps(marker, indent=2) + "\n")


def _owner_record() -> dict[str, Any]:
    owner = lifecycle.process_owner()
    return {"pid": owner.pid, "start": owner.start, "boot": owner.boot, "ns": owner.ns}


def claim_copy(workspace: Path) -> bool:
    """Record this process as the one searching the copy ``workspace`` (a resume does this), so
    that ``treesearch clean`` keeps it while this process runs. False if it is not a copy."""
    folder = Path(os.path.abspath(workspace)).parent
    try:
        marker = json.loads((folder / COPY_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(marker, dict) or marker.get("kind") != _COPY_KIND:
        return False
    if Path(str(marker.get("workspace", ""))).parent != folder:
        return False
    marker["owner"] = _owner_record()
    _write_marker(folder, marker)
    return True


def copy_note(workspace: Path, source: str) -> dict[str, Any]:
    """What ``summary.json`` says of a copy run's workspace."""
    return {
        "path": str(workspace),
        "source": source,
        "kept": f"until `treesearch clean` (it removes copies unused for {DEFAULT_KEEP_DAYS} days)",
        "clean": "treesearch clean --dry-run",
    }


@dataclass
class CleanItem:
    kind: str
    """``copy``, ``store``, ``trash`` (a store removal cut short), ``processes`` or ``scratch``."""
    path: str
    reason: str
    bytes: int = 0
    removed: bool | None = None
    """After ``apply_clean``: True once gone; False when it stayed (see ``reason``)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": self.path,
            "reason": self.reason,
            "bytes": self.bytes,
            "removed": self.removed,
        }


@dataclass
class CleanPlan:
    items: list[CleanItem] = field(default_factory=list)
    kept: list[CleanItem] = field(default_factory=list)
    """Copies and stores looked at and kept, with the reason."""
    home: str = ""
    temp_root: str = ""
    older_than: float = 0.0
    dry_run: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "home": self.home,
            "temp_root": self.temp_root,
            "older_than_seconds": self.older_than,
            "dry_run": self.dry_run,
            "items": [i.to_dict() for i in self.items],
            "kept": [i.to_dict() for i in self.kept],
        }


@dataclass(frozen=True)
class _Copy:
    folder: Path
    workspace: Path
    marker: dict[str, Any]


def _read_copies(home: Path) -> list[_Copy]:
    copies: list[_Copy] = []
    try:
        entries = sorted(copies_root(home).iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return copies
    for folder in entries:
        if folder.is_symlink() or not folder.is_dir():
            continue
        try:
            marker = json.loads((folder / COPY_MARKER).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(marker, dict) or marker.get("kind") != _COPY_KIND:
            continue
        workspace = Path(str(marker.get("workspace", "")))
        if workspace.parent != folder:  # the marker must describe this very folder
            continue
        copies.append(_Copy(folder, workspace, marker))
    return copies


def _age(seconds: float) -> str:
    days = seconds / 86400
    return f"{days:.1f} days" if days >= 1 else f"{seconds / 3600:.1f} hours"


def _copy_alive(copy: _Copy) -> bool:
    o = copy.marker.get("owner") or {}
    try:
        owner = lifecycle.Owner(int(o["pid"]), int(o["start"]), str(o["boot"]), str(o["ns"]))
    except (KeyError, TypeError, ValueError):
        return False
    return lifecycle.owner_alive(owner)


def plan_clean(
    home: Path,
    *,
    older_than: float,
    temp_base: str | os.PathLike[str] | None = None,
    runs_dir: Path | None = None,
    now: float | None = None,
) -> CleanPlan:
    """List what ``treesearch clean`` would remove (nothing is touched).

    ``older_than``: seconds since last use for copies and orphan stores. ``runs_dir``: only the
    copies of runs whose directory is in that folder (and their stores). ``temp_base``: the temp
    folder holding the temp root (default: the system's).
    """
    now = time.time() if now is None else now
    cutoff = now - older_than
    home = Path(os.path.abspath(home))
    home = home.resolve() if home.exists() else home
    plan = CleanPlan(home=str(home), older_than=older_than)
    stores, trash = list_stores(home)
    by_workspace = {s.workspace: s for s in stores}
    copy_workspaces: set[Path] = set()
    for copy in _read_copies(home):
        copy_workspaces.add(copy.workspace)
        run_dir = Path(str(copy.marker.get("run_dir", "")))
        if runs_dir is not None and run_dir.parent != runs_dir.resolve():
            continue
        _plan_copy(plan, copy, run_dir, by_workspace.get(copy.workspace), now, cutoff)
    if runs_dir is None:  # --runs-dir narrows the clean to those runs' copies
        for store in stores:
            if store.workspace in copy_workspaces or os.path.lexists(store.workspace):
                continue
            _plan_orphan(plan, store, now, cutoff)
    for t in trash:
        plan.items.append(CleanItem("trash", str(t), "a store removal cut short", folder_bytes(t)))
    try:
        plan.temp_root = str(lifecycle.temp_root(temp_base, create=False))
    except OSError:
        return plan
    _plan_leftovers(plan, temp_base)
    return plan


def _plan_copy(
    plan: CleanPlan,
    copy: _Copy,
    run_dir: Path,
    store: StoreEntry | None,
    now: float,
    cutoff: float,
) -> None:
    """Keep or list one workspace copy (and its store) made by a run."""
    last = 0.0  # file times, not the marker's `created`: a copy's last use counts
    for f in (run_dir / "events.jsonl", copy.folder / COPY_MARKER):
        with contextlib.suppress(OSError):
            last = max(last, f.stat().st_mtime)
    if store is not None:
        last = max(last, store.last_used)
    source = copy.marker.get("source", "?")
    what = f"copy of {source} made by run {copy.marker.get('run_id', '?')}"
    if _copy_alive(copy):
        plan.kept.append(CleanItem("copy", str(copy.folder), f"{what}: a search on it is running"))
        return
    if store is not None and store.in_use:
        plan.kept.append(CleanItem("copy", str(copy.folder), f"{what}: its store is in use"))
        return
    if last > cutoff:
        plan.kept.append(
            CleanItem("copy", str(copy.folder), f"{what}: last used {_age(now - last)} ago")
        )
        return
    plan.items.append(
        CleanItem(
            "copy",
            str(copy.folder),
            f"{what}, last used {_age(now - last)} ago",
            folder_bytes(copy.folder),
        )
    )
    if store is not None:
        plan.items.append(CleanItem("store", str(store.path), "store of that copy", store.bytes))


def _plan_orphan(plan: CleanPlan, store: StoreEntry, now: float, cutoff: float) -> None:
    """Keep or list a store whose workspace no longer exists."""
    why = f"orphan: its workspace {store.workspace} no longer exists"
    if store.in_use:
        plan.kept.append(CleanItem("store", str(store.path), f"{why}, but it is in use"))
    elif store.last_used > cutoff:
        plan.kept.append(
            CleanItem("store", str(store.path), f"{why}; used {_age(now - store.last_used)} ago")
        )
    else:
        plan.items.append(
            CleanItem(
                "store",
                str(store.path),
                f"{why}; last used {_age(now - store.last_used)} ago",
                store.bytes,
            )
        )


def _plan_leftovers(plan: CleanPlan, temp_base: str | os.PathLike[str] | None) -> None:
    """List the process groups and scratch folders that killed treesearch processes left."""
    reaped = lifecycle.reap(temp_base, dry_run=True)
    for group in reaped.groups:
        pids = ", ".join(str(p) for p in group["pids"])  # type: ignore[attr-defined]
        path = f"process group {group['pgid']}"
        plan.items.append(
            CleanItem("processes", path, f"left by a killed treesearch process: pids {pids}")
        )
    for folder in reaped.folders:
        plan.items.append(
            CleanItem(
                "scratch",
                folder,
                "scratch folder of a treesearch process that is gone",
                folder_bytes(Path(folder)),
            )
        )


def apply_clean(plan: CleanPlan, temp_base: str | os.PathLike[str] | None = None) -> CleanPlan:
    """Remove what ``plan`` lists, and nothing else; each item says whether it went."""
    plan.dry_run = False
    home = Path(plan.home)
    live = {str(c.folder): c for c in _read_copies(home)}
    stores = {str(s.path): s for s in list_stores(home)[0]}
    groups = {int(i.path.rsplit(" ", 1)[1]) for i in plan.items if i.kind == "processes"}
    folders = {i.path for i in plan.items if i.kind == "scratch"}
    reap: lifecycle.ReapReport | None = None
    for item in plan.items:
        if item.kind == "copy":
            copy = live.get(item.path)
            if copy is None or _copy_alive(copy):
                item.removed, item.reason = False, item.reason + " (changed since listed: kept)"
                continue
            # The workspace first, the marker last: a clean cut short leaves a marked folder.
            item.removed = lifecycle.remove_tree(copy.workspace) and lifecycle.remove_tree(
                copy.folder
            )
        elif item.kind == "store":
            entry = stores.get(item.path)
            if entry is None or entry.in_use or os.path.lexists(entry.workspace):
                item.removed, item.reason = False, item.reason + " (changed since listed: kept)"
                continue
            item.removed = remove_store(entry.path)
        elif item.kind == "trash":
            item.removed = lifecycle.remove_tree(Path(item.path))
        elif reap is None:  # processes and scratch folders: the reaper re-checks every owner
            reap = lifecycle.reap(temp_base, only_groups=groups, only_folders=folders)
    if reap is not None:
        gone_groups = {f"process group {g['pgid']}" for g in reap.groups}
        for item in plan.items:
            if item.kind == "processes":
                item.removed = item.path in gone_groups
            elif item.kind == "scratch":
                item.removed = item.path in reap.folders
    return plan


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.0f} KB"


def describe(plan: CleanPlan) -> list[str]:
    """The lines ``treesearch clean`` prints for ``plan`` (listed or applied)."""
    lines = []
    for item in plan.items:
        size = f", {_size(item.bytes)}" if item.bytes else ""
        state = "" if item.removed is None else ("removed " if item.removed else "NOT removed ")
        lines.append(f"{state}{item.kind:<9} {item.path}  ({item.reason}{size})")
    for item in plan.kept:
        lines.append(f"kept      {item.path}  ({item.reason})")
    total = sum(i.bytes for i in plan.items)
    if plan.dry_run:
        lines.append(
            f"would remove {len(plan.items)} item(s) ({_size(total)}); "
            "run `treesearch clean` without --dry-run to remove them"
        )
    else:
        done = [i for i in plan.items if i.removed]
        freed = sum(i.bytes for i in done)
        lines.append(f"removed {len(done)} of {len(plan.items)} item(s) ({_size(freed)})")
    return lines
