"""What git's tree cannot hold (permission bits beyond 644/755, empty folders) is stored once per
distinct value, as a blob shared between snapshots, not once per snapshot.

Regression (#13): every snapshot's commit message carried the mode of every file whose bits were
not git's defaults; with a 0664 checkout (umask 002) that was every file, in every snapshot.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from treesearch.store import ShadowStore

pytestmark = pytest.mark.usefixtures("watch_mode")


def _umask_002_tree(ws: Path, n: int) -> None:
    for i in range(n):
        p = ws / f"pkg{i % 10}" / f"mod{i}.py"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"value = {i}\n" * 20)
        p.chmod(0o664)
    (ws / "empty" / "folder").mkdir(parents=True)


def _commit_message(store: ShadowStore, commit: str) -> str:
    return store._git.run(["cat-file", "commit", commit]).decode()


def _meta_refs(store: ShadowStore) -> list[str]:
    out = store._git.run(["for-each-ref", "--format=%(refname)", "refs/treesearch/meta/"])
    return out.decode().split()


def test_snapshots_of_a_umask_002_checkout_share_one_metadata_blob(
    workspace: Path, home: Path
) -> None:
    _umask_002_tree(workspace, 300)
    store = ShadowStore.open(workspace, home=home)
    first = store.capture()
    assert len(first.modes) == 300 and first.empty_dirs == ("empty/folder",)
    sizes = []
    for round_ in range(20):
        for k in range(2):
            p = workspace / f"pkg{k}" / f"mod{k + 10 * round_}.py"
            p.write_text(f"changed {round_}\n")
        snap = store.capture()
        sizes.append(len(_commit_message(store, snap.commit)))
    assert len(_meta_refs(store)) == 1  # one blob for 21 snapshots
    assert max(sizes) < 2000  # the message no longer lists 300 modes
    # Read back by a new process: the modes come from the blob, and a restore applies them.
    again = ShadowStore.open(workspace, home=home)
    assert again.resolve(first.commit).modes == first.modes
    (workspace / "pkg3" / "mod3.py").chmod(0o600)
    again.restore(first.commit)
    assert stat.S_IMODE((workspace / "pkg3" / "mod3.py").stat().st_mode) == 0o664
    assert (workspace / "empty" / "folder").is_dir()


def test_a_change_of_metadata_makes_a_new_blob_and_gc_drops_the_unused_one(
    workspace: Path, home: Path
) -> None:
    _umask_002_tree(workspace, 20)
    store = ShadowStore.open(workspace, home=home)
    old = store.capture()
    (workspace / "pkg0" / "mod0.py").chmod(0o600)
    new = store.capture()
    assert new.modes["pkg0/mod0.py"] == 0o600 and len(_meta_refs(store)) == 2
    store.gc(keep_last=1, keep_safety=0, drop=[old.commit])
    assert [s.commit for s in store.log()] == [new.commit]
    assert len(_meta_refs(store)) == 1
    store.fsck()
    fresh = ShadowStore.open(workspace, home=home)
    assert fresh.resolve(new.commit).modes == new.modes


def test_a_snapshot_of_format_1_with_modes_in_its_message_is_read_and_restored(
    workspace: Path, home: Path
) -> None:
    """Snapshots written before the metadata blob (format 1) keep working."""
    _umask_002_tree(workspace, 5)
    store = ShadowStore.open(workspace, home=home)
    tree = store.capture().tree
    modes = {f"pkg{i}/mod{i}.py": 0o664 for i in range(5)}
    body = {
        "format": 1,
        "kind": "capture",
        "label": "old-format",
        "meta": {},
        "parent": None,
        "created_at": 1.0,
        "modes": modes,
        "empty_dirs": ["empty/folder"],
        "skipped": [],
        "changed": [],
        "changed_count": 0,
        "stats": {"files_seen": 5, "files_hashed": 5},
    }
    message = "treesearch capture: old-format\n\n" + json.dumps(body, sort_keys=True) + "\n"
    commit = (
        store._git.run(["commit-tree", tree, "-F", "-"], input=message.encode()).decode().strip()
    )
    store._git.run(["update-ref", f"refs/treesearch/snapshots/{commit}", commit])
    reader = ShadowStore.open(workspace, home=home)
    old = reader.resolve("old-format")
    assert old.modes == modes and old.empty_dirs == ("empty/folder",)
    (workspace / "pkg1" / "mod1.py").chmod(0o644)
    (workspace / "empty" / "folder").rmdir()
    reader.restore("old-format")
    assert stat.S_IMODE((workspace / "pkg1" / "mod1.py").stat().st_mode) == 0o664
    assert (workspace / "empty" / "folder").is_dir()


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_a_restored_file_gets_exactly_its_permission_bits_under_any_umask(
    tmp_path: Path, umask: int
) -> None:
    """Files are made with their final bits where the umask lets them through (no ``fchmod``
    then); bits the umask takes away, and setuid, are set afterwards."""
    from treesearch.store._fs import SafeTree

    old = os.umask(umask)
    try:
        with SafeTree(str(tmp_path)) as tree:
            for perm in (0o644, 0o755, 0o600, 0o664, 0o775, 0o4755, 0o444):
                tree.write_file(f"f{perm:o}", _write_x, perm, "t")
                got = stat.S_IMODE(os.lstat(tmp_path / f"f{perm:o}").st_mode)
                assert got == perm, (oct(umask), oct(perm), oct(got))
    finally:
        os.umask(old)


def _write_x(fd: int) -> None:
    os.write(fd, b"x")
