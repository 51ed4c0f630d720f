"""Packing the store's loose objects and refs after captures (``store/_pack.py``).

Regression (#13): every snapshot of a small change left about a dozen loose files (its commit,
the trees along the changed paths, the changed blobs, its ref), each taking a filesystem block,
so twenty snapshots of 2-file changes grew the store by ~20% of a 14k-file checkout.
"""

from __future__ import annotations

import os
import random
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from treesearch.store import ShadowStore
from treesearch.store._pack import Packer
from treesearch.types import CommitId, Snapshot

pytestmark = pytest.mark.usefixtures("watch_mode")


def _tree(ws: Path, n: int = 60) -> None:
    for i in range(n):
        p = ws / f"pkg{i % 6}" / f"sub{i % 3}" / f"mod{i}.py"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"value = {i}\n" * 30)


def _contents(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }


def _check_every_snapshot(
    store: ShadowStore, expected: Mapping[CommitId, dict[str, bytes]], tmp: Path
) -> None:
    """Every snapshot reads back byte for byte (each blob read from loose object or pack)."""
    store.fsck()
    for i, (commit, files) in enumerate(expected.items()):
        dest = tmp / f"m{i}"
        store.materialize(commit, dest)
        assert _contents(dest) == files, commit


def test_captures_of_small_changes_pack_loose_objects_and_refs_and_every_snapshot_reads_back(
    workspace: Path, home: Path, tmp_path: Path
) -> None:
    _tree(workspace)
    store = ShadowStore.open(workspace, home=home)
    expected = {store.capture().commit: _contents(workspace)}
    for round_ in range(20):
        for k in range(2):
            (workspace / f"pkg{k}" / f"sub{k}" / f"mod{k + 6 * round_}.py").write_text(
                f"changed in round {round_}\n"
            )
        expected[store.capture().commit] = _contents(workspace)
    left = store._packer.loose()
    # Without packing: ~20 x (commit + 2 blobs + 6 trees + ref) loose files, ~500 KiB of blocks.
    assert store._packer.packs >= 1
    assert left.loose_bytes < store._packer.floor
    packed_refs = (store.git_dir / "packed-refs").read_text()
    assert sum("refs/treesearch/snapshots/" in line for line in packed_refs.splitlines()) >= 10
    assert len(store.log()) == 21
    _check_every_snapshot(store, expected, tmp_path)
    # A new process reads the packed store the same way, and restores from it.
    again = ShadowStore.open(workspace, home=home)
    first = next(iter(expected))
    again.restore(first)
    assert _contents(workspace) == expected[first]


def test_gc_after_packing_drops_the_objects_of_dropped_snapshots_and_keeps_the_rest(
    workspace: Path, home: Path, tmp_path: Path
) -> None:
    _tree(workspace, 12)
    store = ShadowStore.open(workspace, home=home)
    store._packer.floor = 0  # pack after every capture
    secret = workspace / "pkg0" / "sub0" / "secret.txt"
    secret.write_text("only in the dropped snapshot\n")
    dropped = store.capture()
    secret.unlink()
    kept = store.capture()
    kept_files = _contents(workspace)
    assert store._packer.packs == 2 and store._packer.loose().objects == 0
    blob = store._git.run(["rev-parse", f"{dropped.tree}:pkg0/sub0/secret.txt"]).decode().strip()
    store.gc(keep_last=1, keep_safety=0, drop=[dropped.commit])
    assert [s.commit for s in store.log()] == [kept.commit]
    gone = subprocess.run(
        ["git", "cat-file", "-e", blob], env=store._git.env, capture_output=True, check=False
    )
    assert gone.returncode != 0  # pruned from the packs, not only unreferenced
    _check_every_snapshot(store, {kept.commit: kept_files}, tmp_path)


def test_a_pack_of_refs_killed_before_it_finished_is_reclaimed_by_the_next_capture(
    workspace: Path, home: Path
) -> None:
    _tree(workspace, 12)
    store = ShadowStore.open(workspace, home=home)
    store._packer.floor = 0
    first = store.capture()
    # What a kill during `git pack-refs` leaves: its lock file (and the loose refs, still good).
    (store.git_dir / "packed-refs.lock").write_text("torn")
    (workspace / "pkg1" / "sub1" / "mod1.py").write_text("after the kill\n")
    second = store.capture()
    assert not (store.git_dir / "packed-refs.lock").exists()
    assert {s.commit for s in store.log()} == {first.commit, second.commit}
    assert store._packer.loose().refs == 0


_PACK_CHILD = r"""
import os, sys
from treesearch.store import ShadowStore
from treesearch.store._pack import Packer
WATCH = os.environ.get("TREESEARCH_WATCH") != "0"
s = ShadowStore.open(sys.argv[1], home=sys.argv[2], watch=WATCH)
s._packer.floor = 0
s._packer.fraction = 0.0
print("ready", flush=True)
i = 0
while True:
    i += 1
    with open(os.path.join(sys.argv[1], "pkg0", "sub0", f"child{i % 7}.py"), "w") as fh:
        fh.write(f"child {sys.argv[3]} {i}\n")
    s.capture()
"""


@pytest.mark.slow
def test_a_capture_killed_while_packing_leaves_every_snapshot_readable(
    workspace: Path, home: Path, tmp_path: Path
) -> None:
    _tree(workspace, 40)
    store = ShadowStore.open(workspace, home=home)
    expected = {store.capture().commit: _contents(workspace)}
    rng = random.Random(13)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for trial in range(6):
        child = subprocess.Popen(
            [sys.executable, "-c", _PACK_CHILD, str(workspace), str(home), str(trial)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.2, 1.5))  # captures and packs run back to back: kill anywhere
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
        reopened = ShadowStore.open(workspace, home=home)
        expected[reopened.capture().commit] = _contents(workspace)
        _check_every_snapshot(reopened, expected, tmp_path / f"trial{trial}")
        # Every snapshot the killed child recorded reads back too.
        for snap in reopened.log():
            reopened.files(snap.commit)
    store = ShadowStore.open(workspace, home=home)
    store._packer.pack()
    store.gc(keep_last=3, keep_safety=0)
    _check_every_snapshot(store, {c: expected[c] for c in list(expected)[-1:]}, tmp_path / "end")


def test_a_new_shared_index_removes_the_old_one_regression_store_grew_by_an_index(
    tmp_path: Path, watch_mode: bool
) -> None:
    """Regression (#13, disk): with the split index, a capture that changed over a fifth of the
    entries makes git write a new shared index; the old one (the whole index again: 1.5 MB on
    14,000 files) stayed for a day (``sharedIndexExpire = 1.day.ago``), so 20 snapshots of a
    checkout cost 1.29x the disk of one. Now the old one goes when the new one is written."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(200):
        (ws / f"f{i:03d}.txt").write_text(f"file {i}\n")
    store = ShadowStore.open(ws, home=tmp_path / "home")
    snaps = [store.capture()]
    for round_ in range(3):
        time.sleep(0.05)
        for i in range(0, 200, 2):  # half the entries each time: past splitIndex's 20%
            (ws / f"f{i:03d}.txt").write_text(f"file {i} round {round_}\n")
        snaps.append(store.capture())
    shared = sorted(p.name for p in store.git_dir.glob("sharedindex.*"))
    assert len(shared) == 1, shared
    for snap in snaps:  # every snapshot still reads back
        assert store.resolve(snap.commit).tree == snap.tree
    store.close()


def _own_index_entries(index: Path) -> int:
    """Entries the store's ``index`` file holds itself (with a split index: those not in the
    shared index), from its header (``DIRC``, version, entry count)."""
    sig, _version, count = struct.unpack(">4sII", index.read_bytes()[:12])
    assert sig == b"DIRC"
    return int(count)


def _old_files_store(ws: Path, home: Path) -> tuple[ShadowStore, list[Path]]:
    """4,000 files whose mtimes lie in the past (as after ``cp -p`` or ``tar x``: git has no
    racy entries of its own to keep out of a shared index), captured once."""
    ws.mkdir()
    paths = [ws / f"d{i % 20:02d}" / f"f{i:04d}.txt" for i in range(4000)]
    for i, path in enumerate(paths):
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"file {i}\n")
        os.utime(path, (_PAST, _PAST))
    time.sleep(0.06)  # no file racy (ctime within 50 ms) at the first scan: none fed again later
    store = ShadowStore.open(ws, home=home)
    store.capture()
    return store, paths


def _rewrite_308(store: ShadowStore, paths: list[Path]) -> Snapshot:
    """Rewrite every 13th file (308: over 256 and a twentieth, under git's own fifth), mtimes
    kept in the past, and capture."""
    time.sleep(0.06)  # past the racy window of the first capture's files
    for i in range(0, len(paths), 13):
        paths[i].write_text(f"file {i} changed\n")
        os.utime(paths[i], (_PAST, _PAST))
    snap = store.capture()
    assert len(snap.changed) == 308
    return snap


_PAST = time.time() - 2 * 86400


def test_a_big_capture_folds_the_index_into_a_new_shared_one_regression_index_kept_them(
    tmp_path: Path, watch_mode: bool
) -> None:
    """Regression (#13, disk at umask 002 on 14,100 files: 1.032 or 1.083 from run to run): a
    capture that told git about many paths, but fewer than a fifth of the entries (~2,000 files
    still racy after a bulk copy, hashed again), left them all in the split index's own file,
    +0.3 MiB, read and written by every later ``update-index``. Past ``max(256, files / 20)``
    such entries, a capture now folds them into a new shared index (``--split-index``)."""
    ws = tmp_path / "ws"
    store, paths = _old_files_store(ws, tmp_path / "home")
    index = store.path / "index"
    assert _own_index_entries(index) == 0
    snap = _rewrite_308(store, paths)
    assert _own_index_entries(index) == 0, "the changed entries stayed in the index file"
    assert len(list(store.git_dir.glob("sharedindex.*"))) == 1
    time.sleep(0.06)
    paths[1].write_text("one more\n")  # the index still works after the fold
    again = store.capture()
    assert again.changed == (paths[1].relative_to(ws).as_posix(),)
    assert store.resolve(snap.commit).tree == snap.tree
    store.close()


def test_a_fold_git_refuses_leaves_the_capture_whole(tmp_path: Path, watch_mode: bool) -> None:
    """The fold only makes the index file smaller: when git refuses it (here a config value it
    cannot parse, read only when a shared index is written), the capture is recorded as it
    would be without it, and the store goes on working."""
    store, paths = _old_files_store(tmp_path / "ws", tmp_path / "home")
    config = store.git_dir / "config"
    config.write_text(config.read_text() + "[splitIndex]\n\tsharedIndexExpire = not-a-date\n")
    snap = _rewrite_308(store, paths)
    assert _own_index_entries(store.path / "index") > 256  # not folded
    assert store.resolve(snap.commit).tree == snap.tree
    time.sleep(0.06)
    paths[1].write_text("one more\n")
    assert store.capture().changed == (paths[1].relative_to(store.workspace).as_posix(),)
    store.close()


def test_the_scans_small_packs_count_with_loose_objects_and_big_packs_do_not(
    tmp_path: Path,
) -> None:
    """Regression (issue 13's disk target, 1.06-1.08 after scans wrote their objects as small
    packs): each in-process scan's pack takes two blocks for a few objects, like loose files,
    but only the pack count was watched, so up to 16 of them (128 KiB) sat beside 128 KiB of
    loose files. They now count with the loose files; big packs (git's geometric rolls) never
    make every capture repack."""
    git_dir = tmp_path / "git"
    pack_dir = git_dir / "objects" / "pack"
    pack_dir.mkdir(parents=True)
    (git_dir / "objects" / "ab").mkdir()
    for i in range(10):  # 40 KiB of loose objects
        (git_dir / "objects" / "ab" / f"{i:038x}").write_bytes(os.urandom(4000))

    def pack(name: str, size: int) -> None:
        (pack_dir / f"pack-{name}.pack").write_bytes(os.urandom(size))
        (pack_dir / f"pack-{name}.idx").write_bytes(os.urandom(1100))

    packer = Packer(git_dir, lambda *a, **k: b"")
    pack("big", 4 << 20)
    pack("half", 2 << 20)  # a geometric progression of big packs: no reason to pack
    assert not packer.due(packer.loose())
    for i in range(11):  # the small packs of 11 scans: 88 KiB of blocks
        pack(f"small{i:02}", 900)
    state = packer.loose()
    assert state.packs == 13 and state.small_bytes >= 11 * 8192
    assert packer.due(state)
    # A temporary file of a pack being written is no pack.
    (pack_dir / "tmp_pack_x").write_bytes(b"x")
    assert packer.loose().packs == 13
