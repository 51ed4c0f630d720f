"""Small changes captured, diffed and restored by a long-lived store: a search worker's objects
are the controller's, the diffs are git's own (also with a ``.gitattributes`` on the path), and
the index follows a restore that came after a small capture."""

from __future__ import annotations

from pathlib import Path

from treesearch.store import ShadowStore
from treesearch.store._diffs import parse_diff
from treesearch.store.values import Diff, TreeHash
from treesearch.store.workers import adopt, open_worker_store, worker_view


def test_a_worker_s_small_capture_is_readable_by_the_search_s_store(tmp_path: Path) -> None:
    """A worker's store writes its trees and blobs into the search store's objects (where its
    git writes them), so the controller records and materializes its state."""
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "a.py").write_text("a = 1\n")
    main = ShadowStore.open(ws, home=tmp_path / "home")
    try:
        root = main.capture()
        (tmp_path / "w1").mkdir()
        worker = open_worker_store(worker_view(main), tmp_path / "w1")
        try:
            adopt(worker, root.tree, modes=root.modes, empty_dirs=root.empty_dirs)
            worker.restore(root.tree)
            worker.capture()
            (worker.workspace / "pkg" / "b.py").write_text("b = 2\n")
            snap = worker.capture()
            own = worker.git_dir / "objects" / snap.tree[:2] / snap.tree[2:]
            assert not own.exists()
        finally:
            worker.close()
        node = adopt(main, snap.tree, modes=snap.modes, empty_dirs=snap.empty_dirs)
        main.materialize(node.commit, tmp_path / "out")
        assert (tmp_path / "out" / "pkg" / "b.py").read_text() == "b = 2\n"
        main.fsck()
    finally:
        main.close()


def test_a_big_restore_drops_older_waiting_entries_of_its_paths_regression(
    tmp_path: Path, watch_mode: bool
) -> None:
    """A small capture of ``f0`` and then a restore too big to defer its own index entries: the
    next big capture holds the restored ``f0``, not the newer one (a waiting entry of the capture
    once followed the restore's and won)."""
    ws = tmp_path / "ws"
    (ws / "d").mkdir(parents=True)
    for i in range(100):
        (ws / "d" / f"f{i}.txt").write_text(f"{i}\n")
    store = ShadowStore.open(ws, home=tmp_path / "home")
    try:
        first = store.capture()
        for i in range(100):
            (ws / "d" / f"f{i}.txt").write_text(f"{i} changed\n")
        store.capture()
        (ws / "d" / "f0.txt").write_text("0 changed again\n")
        store.capture()
        store.restore(first.commit)  # 100 entries: told to git at once
        assert "d/f0.txt" not in store._scanner.unsynced
        for n in range(140):  # a big change: update-index with whatever waits
            (ws / "e" / f"{n}.txt").parent.mkdir(exist_ok=True)
            (ws / "e" / f"{n}.txt").write_text(f"{n}\n")
        snap = store.capture()
        store.materialize(snap.commit, tmp_path / "out")
        assert (tmp_path / "out" / "d" / "f0.txt").read_text() == "0\n"
    finally:
        store.close()


def _git_diff(store: ShadowStore, a: str, b: str) -> Diff:
    out = store._git.run(["diff-tree", "-r", "-z", "--no-renames", "--raw", "--numstat", a, b])
    return parse_diff(TreeHash(a), TreeHash(b), out.split(b"\0"), 0)


def test_diffs_with_a_gitattributes_on_the_path_are_git_s(tmp_path: Path, watch_mode: bool) -> None:
    """A ``.gitattributes`` can make git count a text file as binary (``-diff``): the step's
    counts and the diffs are then git's own."""
    ws = tmp_path / "ws"
    (ws / "data").mkdir(parents=True)
    (ws / "data" / ".gitattributes").write_text("*.dat -diff\n")
    (ws / "data" / "a.dat").write_text("one\n")
    (ws / "b.txt").write_text("one\n")
    store = ShadowStore.open(ws, home=tmp_path / "home")
    try:
        first = store.capture()
        store.capture()
        (ws / "data" / "a.dat").write_text("one\ntwo\n")
        (ws / "b.txt").write_text("one\ntwo\n")
        second = store.capture()
        diff = store.diff(first.commit, second.commit, max_patch_bytes=0)
        by_path = {f.path: f for f in diff.files}
        assert by_path["data/a.dat"].binary and not by_path["b.txt"].binary
        assert by_path["b.txt"].added_lines == 1
        assert diff.files == _git_diff(store, first.tree, second.tree).files
        store._diffs.cache.clear()
        assert store.diffs([(first.commit, second.commit)])[0].files == diff.files
    finally:
        store.close()


def test_a_folder_replaced_by_a_file_captured_in_the_process_gives_git_s_diff_records_regression(
    tmp_path: Path, watch_mode: bool
) -> None:
    """A capture that replaces a folder by a symlink (and a file by a folder) is made in the
    process; the raw records it keeps for later diffs and restores must be ``diff-tree``'s
    (the folder's files deleted, the link added), not a type change of the folder itself (a
    restore back then refused: "the file or symlink in the way is not captured")."""
    ws = tmp_path / "ws"
    (ws / "d" / "sub").mkdir(parents=True)
    (ws / "d" / "sub" / "x.txt").write_text("x\n")
    (ws / "f").write_text("a file\n")
    store = ShadowStore.open(ws, home=tmp_path / "home")
    try:
        first = store.capture()
        (ws / "d" / "sub" / "x.txt").unlink()
        (ws / "d" / "sub").rmdir()
        (ws / "d").rmdir()
        (ws / "d").symlink_to("elsewhere")
        (ws / "f").unlink()
        (ws / "f").mkdir()
        (ws / "f" / "y.txt").write_text("y\n")
        second = store.capture()
        git_raw = store._git.run(["diff-tree", "-r", "-z", "--no-renames", first.tree, second.tree])
        assert store._diffs.known_raw(first.tree, second.tree) == git_raw.split(b"\0")[:-1]
        store.restore(first.commit)
        assert (ws / "d" / "sub" / "x.txt").read_text() == "x\n"
        assert (ws / "f").read_text() == "a file\n"
    finally:
        store.close()
