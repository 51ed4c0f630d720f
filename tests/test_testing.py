"""The shipped test doubles (``treesearch.testing``): they keep the protocols of ``treesearch.types``
and behave like the real parts where the controller can tell."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from treesearch.errors import MaterializeError, RefError
from treesearch.runs import RunDir
from treesearch.scoring import Scorer
from treesearch.scoring.spec import TestSpec
from treesearch.store import PatchError, ShadowStore
from treesearch.testing import FunctionScorer, MemorySink, MemoryStore, read_files
from treesearch.types import RunSink, SnapshotStore, StateScorer


def tricky(folder: Path) -> Path:
    """Nested folders, an executable, a symlink, a name with a space, no final newline."""
    (folder / "a" / "b").mkdir(parents=True)
    (folder / "a-b").mkdir()
    (folder / "a" / "b" / "x.txt").write_text("hi\n")
    (folder / "a-b" / "f").write_text("1\n")
    (folder / "sp ace").write_bytes(b"no newline")
    run = folder / "run.sh"
    run.write_text("#!/bin/sh\n")
    run.chmod(0o755)
    os.symlink("a/b/x.txt", folder / "link")
    (folder / "empty").write_bytes(b"")
    return folder


def make(tmp_path: Path) -> MemoryStore:
    ws = tmp_path / "ws"
    ws.mkdir()
    return MemoryStore(tricky(ws))


def test_memory_store_tree_hash_is_the_shadow_stores_git_tree_hash(tmp_path: Path) -> None:
    store = make(tmp_path)
    shadow = ShadowStore.open(store.workspace, home=tmp_path / "home")
    try:
        assert store.capture().tree == shadow.capture().tree
    finally:
        shadow.close()


def test_memory_store_applies_a_patch_as_the_shadow_store_does(tmp_path: Path) -> None:
    store = make(tmp_path)
    shadow_ws = tmp_path / "shadow-ws"
    shadow_ws.mkdir()
    shadow = ShadowStore.open(tricky(shadow_ws), home=tmp_path / "home")
    patch = (
        "--- a/a/b/x.txt\n+++ b/a/b/x.txt\n@@ -1 +1 @@\n-hi\n+ho\n"
        "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+n\n"
    )
    try:
        assert store.apply_patch(patch) == shadow.apply_patch(patch)
        assert store.capture().tree == shadow.capture().tree
        with pytest.raises(PatchError, match="patch failed: a/b/x.txt:1"):
            store.apply_patch(patch)
    finally:
        shadow.close()


def test_memory_store_capture_without_change_gives_the_same_tree(tmp_path: Path) -> None:
    store = make(tmp_path)
    a, b = store.capture(), store.capture()
    assert a.tree == b.tree and a.commit != b.commit and b.changed == ()
    (store.workspace / "a-b" / "f").write_text("2\n")
    c = store.capture()
    assert c.tree != a.tree and c.changed == ("a-b/f",)


def test_memory_store_restore_puts_back_content_modes_links_and_removes_new_files(
    tmp_path: Path,
) -> None:
    store = make(tmp_path)
    ws = store.workspace
    before = {p: (ws / p).read_bytes() for p in ("a/b/x.txt", "sp ace", "run.sh", "empty")}
    a = store.capture()
    (ws / "a" / "b" / "x.txt").write_text("changed\n")
    (ws / "run.sh").chmod(0o644)
    (ws / "new" / "deep").mkdir(parents=True)
    (ws / "new" / "deep" / "n.txt").write_text("new\n")
    (ws / "link").unlink()
    (ws / "link").write_text("now a file\n")
    (ws / "sp ace").unlink()
    res = store.restore(a.tree)
    assert {p: (ws / p).read_bytes() for p in before} == before
    assert stat.S_IMODE((ws / "run.sh").stat().st_mode) == 0o755
    assert os.readlink(ws / "link") == "a/b/x.txt"
    assert not (ws / "new").exists()
    assert set(res.deleted) == {"new/deep/n.txt"}
    assert set(res.pruned) == {"new/deep", "new"}
    assert store.capture().tree == a.tree
    store.restore(res.safety.tree)  # the safety snapshot undoes it
    assert (ws / "new" / "deep" / "n.txt").read_text() == "new\n"


def test_memory_store_restore_never_writes_through_a_symlinked_folder(tmp_path: Path) -> None:
    store = make(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    a = store.capture()
    ws = store.workspace
    shutil.rmtree(ws / "a")
    os.symlink(outside, ws / "a")
    store.restore(a.tree)
    assert list(outside.iterdir()) == []
    assert (ws / "a").is_dir() and not (ws / "a").is_symlink()
    assert (ws / "a" / "b" / "x.txt").read_text() == "hi\n"


def test_memory_store_leaves_git_folders_alone(tmp_path: Path) -> None:
    store = make(tmp_path)
    (store.workspace / ".git").mkdir()
    (store.workspace / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (store.workspace / "sub").mkdir()
    (store.workspace / "sub" / ".git").write_text("gitdir: ../elsewhere\n")  # a worktree's
    a = store.capture()
    (store.workspace / "extra").write_text("x")
    store.restore(a.tree)
    assert (store.workspace / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert (store.workspace / "sub" / ".git").read_text() == "gitdir: ../elsewhere\n"
    files = read_files(store.workspace)
    assert ".git/HEAD" not in files and "sub/.git" not in files


def test_memory_store_diff_counts_lines_and_writes_a_patch(tmp_path: Path) -> None:
    store = make(tmp_path)
    a = store.capture()
    (store.workspace / "a" / "b" / "x.txt").write_text("hi\nthere\n")
    (store.workspace / "empty").unlink()
    (store.workspace / "add.txt").write_text("one\ntwo\n")
    b = store.capture()
    d = store.diff(a.tree, b.tree)
    assert d.name_status().splitlines() == ["M\ta/b/x.txt", "A\tadd.txt", "D\tempty"]
    assert [(f.added_lines, f.deleted_lines) for f in d.files] == [(1, 0), (2, 0), (0, 0)]
    assert "+++ b/a/b/x.txt\n" in d.patch and "+there\n" in d.patch
    assert store.diff(a.tree).files == d.files  # against the live workspace
    [short] = store.diffs([(a.tree, b.tree)])
    assert short.files == d.files and short.patch == ""


def test_memory_store_resolves_labels_and_prefixes_and_refuses_unknown(tmp_path: Path) -> None:
    store = make(tmp_path)
    a = store.capture(label="start")
    assert store.resolve("start") == a
    assert store.resolve(a.tree[:8]) == a
    assert store.resolve(a.commit) == a
    with pytest.raises(RefError):
        store.resolve("nothing-like-this")


def test_memory_store_materialize_refuses_a_folder_with_files(tmp_path: Path) -> None:
    store = make(tmp_path)
    a = store.capture()
    store.materialize(a.tree, tmp_path / "copy")
    assert read_files(tmp_path / "copy") == read_files(store.workspace)
    with pytest.raises(MaterializeError, match="not an empty folder"):
        store.materialize(a.tree, tmp_path / "copy")


def test_function_scorer_runs_a_tree_once_and_serves_it_from_memory_after(
    tmp_path: Path,
) -> None:
    store = make(tmp_path)
    scorer = FunctionScorer(lambda files: 1.0 if files["a-b/f"] == "1\n" else 0.25)
    tree = store.capture().tree
    first = scorer.score(store.workspace, tree)
    again = scorer.score(store.workspace, tree)
    assert (first.score, first.resolved, first.cached) == (1.0, True, False)
    assert (again.score, again.cached) == (1.0, True)
    assert (scorer.test_runs, scorer.cache_hits) == (1, 1)
    (store.workspace / "a-b" / "f").write_text("2\n")
    low = scorer.score(store.workspace)
    assert (low.score, low.resolved, low.run.failing[0].id) == (0.25, False, "score")


def test_the_real_parts_and_the_doubles_keep_the_protocols(tmp_path: Path) -> None:
    store = make(tmp_path)
    assert isinstance(store, SnapshotStore)
    assert isinstance(FunctionScorer(lambda files: 0.0), StateScorer)
    assert isinstance(MemorySink(), RunSink)
    assert isinstance(RunDir(tmp_path), RunSink)
    assert isinstance(Scorer(TestSpec.from_config({"command": "true"})), StateScorer)
    shadow = ShadowStore.open(store.workspace, home=tmp_path / "home")
    try:
        assert isinstance(shadow, SnapshotStore)
    finally:
        shadow.close()
