"""Creating a store folder, and repairing what a process killed while creating one left behind.

Every file is written atomically (``_fs.atomic_write``) and the workspace marker last, so a store
whose marker names its workspace is complete. Stores made before that (or damaged since) may hold
an empty or torn marker, a half-initialised repository or a torn config: ``open`` repairs them here.
Nothing valuable is ever deleted: ``git init`` on an existing repository keeps its refs and objects.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from treesearch.errors import StoreLocationError
from treesearch.store._fs import atomic_write, is_temp_of_dead_process
from treesearch.store._git import GitRunner, isolated_env

MARKER = "workspace"


def marker_problem(store: Path, workspace: Path, expected: dict[str, str]) -> str | None:
    """What needs creating or repairing (``None``: the store is complete).

    Raises ``StoreLocationError`` when the marker names another workspace.
    """
    try:
        recorded = (store / MARKER).read_bytes().decode("utf-8", "surrogateescape")
    except FileNotFoundError:
        return "new"
    except OSError as exc:
        raise StoreLocationError(f"cannot read the store marker {store / MARKER}: {exc}") from exc
    ws = str(workspace)
    if recorded != ws:
        if ws.startswith(recorded):
            # Empty or cut short: a kill while the marker was written in place. The folder's name
            # is a hash of this workspace's path, so the store is this workspace's.
            return f"its workspace marker was {'empty' if not recorded else 'cut short'}"
        raise StoreLocationError(
            f"store {store} belongs to workspace {recorded}, not {ws}: "
            "use that workspace, or another store home (--home)"
        )
    git_dir = store / "git"
    if not (git_dir / "HEAD").is_file() or not (git_dir / "objects").is_dir():
        return "its repository was half created"
    for rel, text in expected.items():
        try:
            if (store / rel).read_text(encoding="utf-8") != text:
                return f"{rel} did not hold what this version writes"
        except (OSError, ValueError):
            return f"{rel} was missing"
    return None


def create_or_repair(
    store: Path, workspace: Path, git: GitRunner, expected: dict[str, str]
) -> str | None:
    """Make ``store`` a complete store of ``workspace`` (the caller holds the store lock).

    ``expected`` maps files below ``store`` (``git/config``, ...) to their content. Returns what
    was repaired (``None`` for a new store or nothing to do).
    """
    problem = marker_problem(store, workspace, expected)
    if problem is None:
        return None
    git_dir = store / "git"
    if not (git_dir / "HEAD").is_file() or not (git_dir / "objects").is_dir():
        with contextlib.suppress(FileNotFoundError):
            (git_dir / "config").unlink()  # possibly torn; git init must not have to parse it
        env = isolated_env(GIT_DIR=str(git_dir))
        git.run(["init", "--quiet", "--template="], env=env, cwd=store)
    (store / "no-hooks").mkdir(exist_ok=True)
    (git_dir / "info").mkdir(exist_ok=True)
    for rel, text in expected.items():
        path = store / rel
        try:
            same = path.read_text(encoding="utf-8") == text
        except (OSError, ValueError):
            same = False
        if not same:
            atomic_write(path, text, durable=True)
    sweep_temps(store)
    atomic_write(store / MARKER, str(workspace), durable=True)
    return None if problem == "new" else f"repaired the store {store}: {problem}"


def sweep_temps(store: Path) -> None:
    """Remove temporary files that writers killed before their rename left in the store, beside
    its object folder (``_catalogue.Catalogue._object_tmp``) and beside its packs
    (``_trees.ObjectBatch``)."""
    for folder in (store, store / "git", store / "git" / "objects" / "pack"):
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            for entry in entries:
                if ".tmp-" in entry.name and is_temp_of_dead_process(entry.name):
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
