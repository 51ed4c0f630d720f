"""A small capture writes its blobs and trees in the process (``store/_trees.py``,
``store/_scan_edit.py``): the trees must be git's own, byte for byte, the store must stay whole
(``git fsck``), a search worker's objects must be the controller's, and a small capture of a
session must start no git process at all (what makes it cheap; a test so that it stays so)."""

from __future__ import annotations

import os
import random
import stat
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest
from conftest import tree_digest

from treesearch.session import TransactionalSession
from treesearch.store import ShadowStore, _git
from treesearch.store._diffs import parse_diff
from treesearch.store._git import GitRunner, isolated_env
from treesearch.store._objects import write_object
from treesearch.store._trees import EMPTY_TREE, Trees, store_trees
from treesearch.store.values import Diff, TreeHash
from treesearch.store.workers import adopt, open_worker_store, worker_view

NAMES = ["a", "a.b", "a-b", "a0", "a_", "b", "ab", "a b", "é", "Z", "z.txt"]
"""Names that sort differently when a folder's name is compared as ``name/`` (``a``, ``a.b``,
``a-b``, ``a0`` against a folder ``a``)."""


def _calls(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if line]


def _plain_repo(tmp_path: Path) -> GitRunner:
    git_dir = tmp_path / "repo.git"
    subprocess.run(
        [_git.git_executable(), "init", "-q", "--bare", str(git_dir)],
        check=True,
        env=isolated_env(),
    )
    return GitRunner(git_dir, tmp_path, tmp_path / "plain-index")


def _blob(trees: Trees, data: bytes) -> str:
    return write_object(trees.objects_dir(), "blob", data, tmp_dir=trees.objects_dir().parent)


def _random_path(rng: random.Random) -> str:
    depth = rng.choice([1, 1, 2, 2, 3])
    return "/".join(rng.choice(NAMES) for _ in range(depth))


# ---------------------------------------------------------------------------- the writer alone


def test_tree_writer_edits_give_git_write_tree_s_bytes_on_random_edits(tmp_path: Path) -> None:
    """Random entries (names that sort differently with git's ``/`` rule, modes 100644, 100755
    and 120000; files replacing folders and the other way round) put into an index with
    ``update-index --cacheinfo``; after each round, ``write-tree``'s id is
    ``Trees.update``'s, and every tree it wrote is the object git has."""
    git = _plain_repo(tmp_path)
    trees = store_trees(git)
    rng = random.Random(1301)
    blobs = [_blob(trees, f"content {i}\n".encode()) for i in range(6)]
    files: dict[str, tuple[int, str]] = {}
    base = EMPTY_TREE
    checked = 0
    try:
        for _round in range(200):
            changes: dict[str, tuple[int, str] | None] = {}
            for _ in range(rng.randint(1, 6)):
                if files and rng.random() < 0.4:
                    changes[rng.choice(sorted(files))] = None
                else:
                    p = _random_path(rng)
                    mode = rng.choice([0o100644, 0o100644, 0o100755, 0o120000])
                    changes[p] = (mode, rng.choice(blobs))
            after = dict(files)
            for p, e in changes.items():
                if e is None:
                    after.pop(p, None)
                else:
                    after[p] = e
            if _conflicts(after):
                continue  # a file and a folder of one name: not a state an index can hold
            try:
                tree = trees.update(base, changes)
            except ValueError:
                # Only when the edit has a file and a folder of one name (git's --replace).
                assert _conflicts({**files, **{p: e for p, e in changes.items() if e}})
                continue
            files = after
            git.run(["read-tree", "--empty"])
            if files:
                args = ["update-index", "--add"]
                for p, (mode, oid) in sorted(files.items()):
                    args += ["--cacheinfo", f"{mode:o},{oid},{p}"]
                git.run(args)
            want = git.run(["write-tree"]).decode().strip()
            assert tree == want, (changes, files)
            assert git.run(["cat-file", "-t", tree]).strip() == b"tree"
            base = tree
            checked += 1
        assert checked >= 60
        git.run(["fsck", "--no-progress", "--no-dangling"])
    finally:
        trees.objects.close()


def _conflicts(files: Mapping[str, object]) -> bool:
    folders = {p.rsplit("/", 1)[0] for p in files if "/" in p}
    parents = {"/".join(f.split("/")[:i]) for f in folders for i in range(1, f.count("/") + 2)}
    return bool(parents & set(files))


def test_tree_writer_removing_every_file_gives_git_s_empty_tree(tmp_path: Path) -> None:
    git = _plain_repo(tmp_path)
    trees = store_trees(git)
    try:
        blob = _blob(trees, b"x\n")
        tree = trees.update(EMPTY_TREE, {"d/e/f": (0o100644, blob), "g": (0o100755, blob)})
        assert trees.update(tree, {"d/e/f": None, "g": None}) == EMPTY_TREE
        folder_gone = trees.update(tree, {"d/e/f": None})
        assert git.run(["ls-tree", "-r", "--name-only", folder_gone]) == b"g\n"
        # Written (git knows the empty tree without it, but a snapshot's commit may name it).
        present = git.run(["cat-file", "--batch-check", "--batch-all-objects"]).decode()
        assert EMPTY_TREE in present
    finally:
        trees.objects.close()


def test_tree_reader_finds_a_tree_packed_after_its_cat_file_started(tmp_path: Path) -> None:
    """A tree another process wrote and packed after the reader's ``cat-file`` started is found
    (``cat-file`` is restarted once on a miss), and a tree that is nowhere is an error, not an
    empty tree."""
    git = _plain_repo(tmp_path)
    trees = store_trees(git)
    try:
        blob = _blob(trees, b"x\n")
        first = trees.update(EMPTY_TREE, {"a": (0o100644, blob)})
        _pack_only(git, first)  # now only in a pack: read through cat-file
        trees._cache.clear()
        assert trees.entries(first)[b"a"] == (0o100644, blob)
        assert trees.objects.started == 1
        git.run(["read-tree", "--empty"])
        git.run(["update-index", "--add", "--cacheinfo", f"100644,{blob},later"])
        later = git.run(["write-tree"]).decode().strip()
        _pack_only(git, later)
        assert not (git.git_dir / "objects" / later[:2] / later[2:]).exists()
        assert set(trees.entries(later)) == {b"later"}
        with pytest.raises(_git.GitFailed, match="not in the store"):
            trees.entries("1" * 40)
    finally:
        trees.objects.close()


def _pack_only(git: GitRunner, tree: str) -> None:
    """Make ``tree`` reachable and pack it: no loose object of it is left."""
    commit = git.run(["commit-tree", tree, "-m", "keep"]).decode().strip()
    git.run(["update-ref", f"refs/keep/{tree}", commit])
    git.run(["repack", "-a", "-d", "-q"])


# ---------------------------------------------------------------------------- through the store


def _edit_randomly(ws: Path, rng: random.Random) -> None:
    files = sorted(p for p in ws.rglob("*") if p.is_file() or p.is_symlink())
    for _ in range(rng.randint(1, 5)):
        action = rng.random()
        if files and action < 0.3:
            victim = rng.choice(files)
            if victim.exists() or victim.is_symlink():
                victim.unlink()
        elif files and action < 0.45:
            target = rng.choice(files)
            if target.is_file() and not target.is_symlink():
                target.chmod(target.stat().st_mode ^ stat.S_IXUSR)
        elif action < 0.55:
            link = ws / rng.choice(NAMES)
            if not link.exists() and not link.is_symlink():
                os.symlink(rng.choice(["a", "../x", "d/e"]), link)
        else:
            p = ws / _random_path(rng)
            try:
                p.parent.mkdir(parents=True, exist_ok=True)
                if p.is_dir() and not p.is_symlink():
                    continue
                if p.is_symlink():
                    p.unlink()
                p.write_text(f"{rng.random()}\n" * rng.randint(0, 3))
            except (NotADirectoryError, FileExistsError):
                continue  # a file where a folder is asked for


def test_small_captures_written_in_the_process_equal_a_fresh_store_s_git_trees(
    tmp_path: Path, watch_mode: bool
) -> None:
    """Random small edits (names sorting with git's ``/`` rule, exec bits, symlinks, a folder
    emptied, a file where a folder was), captured by one long-lived store: each snapshot's
    tree is the one git makes of the same files (a fresh store, whose first capture runs
    ``update-index`` and ``write-tree``), most of them written without git; ``fsck`` is clean,
    and the index, once git is told, agrees."""
    ws = tmp_path / "ws"
    (ws / "a").mkdir(parents=True)
    (ws / "a" / "x").write_text("x\n")
    (ws / "a.b").write_text("a.b\n")
    store = ShadowStore.open(ws, home=tmp_path / "home")
    rng = random.Random(13)
    in_process = 0
    try:
        store.capture()
        for i in range(25):
            _edit_randomly(ws, rng)
            waiting = len(store._scanner.unsynced)
            snap = store.capture(label=f"round {i}")
            in_process += len(store._scanner.unsynced) > waiting
            fresh = ShadowStore.open(ws, home=tmp_path / f"fresh{i}")
            try:
                assert snap.tree == fresh.capture().tree, i
            finally:
                fresh.close()
        assert in_process >= 10
        store.fsck()
        # Git told (a big change runs update-index with the waiting entries first): same tree.
        for n in range(140):
            (ws / "many" / f"{n}.txt").parent.mkdir(exist_ok=True)
            (ws / "many" / f"{n}.txt").write_text(f"{n}\n")
        big = store.capture()
        assert not store._scanner.unsynced
        assert big.tree == store._git.run(["write-tree"]).decode().strip()
        store.materialize(big.commit, tmp_path / "out")
        assert tree_digest(tmp_path / "out") == tree_digest(ws)
    finally:
        store.close()


def _packed_store(ws: Path, home: Path, folder: str, files: int) -> ShadowStore:
    """A store of ``ws`` holding ``files`` small modules in ``folder``, captured and packed
    (packing, a few captures apart, is not what the tests count)."""
    (ws / folder).mkdir(parents=True)
    for i in range(files):
        (ws / folder / f"m{i}.py").write_text(f"x = {i}\n")
    store = ShadowStore.open(ws, home=home)
    store.capture()
    store._packer.pack()
    return store


def test_a_session_step_s_small_capture_starts_no_git_process(
    tmp_path: Path, watch_mode: bool, git_path_log: Path
) -> None:
    """The capture after a step that wrote one small file: no git process (not ``update-index``,
    ``write-tree``, ``diff-tree`` nor a ``cat-file``), counted by a wrapper ``git`` on the
    store's path; the snapshot has the file."""
    ws = tmp_path / "ws"
    store = _packed_store(ws, tmp_path / "home", "src", 30)
    try:
        (ws / "src" / "m0.py").write_text("x = 'warm-up'\n")
        store.capture()  # (a first small capture may start the store's cat-file: kept open)
        before = _calls(git_path_log)
        (ws / "src" / "m1.py").write_text("x = 'edited'\n")
        (ws / "notes.txt").write_text("a new file\n")
        snap = store.capture(if_changed=True)
        assert _calls(git_path_log) == before
        assert set(snap.changed) == {"src/m1.py", "notes.txt"}
        by_path = {e.path: e for e in store.files(snap.commit)}
        assert store._git.run(["cat-file", "blob", by_path["notes.txt"].oid]) == b"a new file\n"
    finally:
        store.close()


def test_a_session_step_writing_a_small_file_starts_no_git_process(
    tmp_path: Path, watch_mode: bool, git_path_log: Path
) -> None:
    """Through the session: its captures before and after a step that writes a small file;
    the step's diff summary has the line counts git gives."""
    ws = tmp_path / "ws"
    store = _packed_store(ws, tmp_path / "home", "pkg", 20)
    try:
        session = TransactionalSession.create(store)
        session.step([{"name": "write_file", "arguments": {"path": "pkg/m0.py", "content": "0\n"}}])
        captures: list[list[str]] = []
        original = store.capture

        def capture(*a, **kw):  # type: ignore[no-untyped-def]  # observes the real capture
            start = len(_calls(git_path_log))
            try:
                return original(*a, **kw)
            finally:
                captures.append(_calls(git_path_log)[start:])

        store.capture = capture  # type: ignore[method-assign]
        step = session.step(
            [{"name": "write_file", "arguments": {"path": "pkg/m1.py", "content": "1\n2\n"}}]
        )
        assert step.tree_before != step.tree_after
        assert captures == [[], []]
        out = store._git.run(["diff-tree", "-r", "--numstat", step.tree_before, step.tree_after])
        assert out == b"2\t1\tpkg/m1.py\n"
        assert (step.diff.files, step.diff.insertions, step.diff.deletions) == (1, 2, 1)
        session.close()
    finally:
        store.close()


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
            waiting = len(worker._scanner.unsynced)
            snap = worker.capture()
            assert len(worker._scanner.unsynced) > waiting  # written in the process
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
    """A capture left ``f0``'s new entry waiting; a restore too big to defer its own entries
    told git ``f0``'s old content; the waiting entry must not follow it on the next
    ``update-index`` (the index, and so the next tree, would hold the newer ``f0``)."""
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
        store.capture()  # one path: written here, its entry waits
        assert "d/f0.txt" in store._scanner.unsynced
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
