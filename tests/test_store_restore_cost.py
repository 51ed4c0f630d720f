"""What a search expansion costs the store (#13, search overhead): a restore checks the files it
changes instead of every file, plans from a diff the store already made, leaves a small index
update to the next capture's git process; a session records a snapshot only for a new state.
Each test also checks that the cheaper way keeps the store's promises."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from conftest import tree_digest

from treesearch.session import TransactionalSession
from treesearch.store import ShadowStore
from treesearch.store._watch import Inotify
from treesearch.testing import MemoryStore


def _count_git(store: ShadowStore) -> list[list[str]]:
    """The git commands the store runs from now on (through its runner: not ``cat-file``)."""
    calls: list[list[str]] = []
    original = store._git.run

    def counting(args, **kw):  # type: ignore[no-untyped-def]  # observes the real runner
        calls.append(list(args))
        return original(args, **kw)

    store._git.run = counting  # type: ignore[method-assign]
    return calls


def _commands(calls: list[list[str]]) -> list[str]:
    return [next(a for a in c if not a.startswith("-") and "=" not in a) for c in calls]


def _project(ws: Path, folders: int = 5, files: int = 10) -> None:
    for d in range(folders):
        (ws / f"d{d}").mkdir(parents=True)
        for f in range(files):
            (ws / f"d{d}" / f"f{f}.txt").write_text(f"{d} {f}\n")


def _mmap_write(path: Path, data: bytes) -> None:
    import mmap

    with open(path, "r+b") as fh, mmap.mmap(fh.fileno(), 0) as mm:
        mm[: len(data)] = data
        mm.flush()


# ---------------------------------------------------------------------------- restore


@pytest.mark.skipif(Inotify.create("/tmp") is None, reason="no inotify here")
def test_a_restore_with_the_watcher_checks_the_files_it_changes_not_every_file(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    _project(ws)
    store = ShadowStore.open(ws, home=tmp_path / "home", watch=True)
    first = store.capture()
    (ws / "d1" / "f1.txt").write_text("edited\n")
    store.capture()
    store.restore(first.commit)
    walker = store._scanner.walker
    assert walker is not None and walker.relisted is not None  # an incremental walk
    assert walker.verified == 0, "the restore's scan checked every file's stat data"
    assert (ws / "d1" / "f1.txt").read_text() == "1 1\n"


def test_a_write_no_event_reports_to_a_file_a_restore_overwrites_is_in_its_safety_snapshot(
    tmp_path: Path, watch_mode: bool
) -> None:
    """The restore's check of the files it changes finds a write through a shared mmap (no
    event) among many files the restore leaves alone, and undo brings it back."""
    ws = tmp_path / "ws"
    _project(ws)
    store = ShadowStore.open(ws, home=tmp_path / "home")
    first = store.capture()
    (ws / "d2" / "f3.txt").write_text("second\n")
    time.sleep(0.1)  # out of the racy window: only the stat data can tell the next write
    store.capture()
    time.sleep(0.1)
    _mmap_write(ws / "d2" / "f3.txt", b"mapped\n")
    res = store.restore(first.commit)
    assert (ws / "d2" / "f3.txt").read_text() == "2 3\n"
    store.materialize(res.safety.commit, tmp_path / "safety")
    assert (tmp_path / "safety" / "d2" / "f3.txt").read_bytes() == b"mapped\n"
    store.undo()
    assert (ws / "d2" / "f3.txt").read_bytes() == b"mapped\n"


def test_a_restore_to_a_tree_the_store_just_diffed_runs_no_diff_tree(
    tmp_path: Path, watch_mode: bool
) -> None:
    """Planned from the diff the store made of the two trees (reversed: the search diffs
    parent -> child, then restores child -> parent), with adds, deletes, edits, an exec bit,
    a file that became a symlink and a folder that became a file: byte-exact all the same."""
    ws = tmp_path / "ws"
    _project(ws, folders=2, files=3)
    (ws / "tool.sh").write_text("#!/bin/sh\n")
    (ws / "link").write_text("a file first\n")
    store = ShadowStore.open(ws, home=tmp_path / "home")
    parent = store.capture()
    want = tree_digest(ws)
    (ws / "d0" / "f0.txt").write_text("edited\n")
    (ws / "d1" / "f2.txt").unlink()
    (ws / "new.txt").write_text("new\n")
    os.chmod(ws / "tool.sh", 0o755)
    (ws / "link").unlink()
    os.symlink("d0/f1.txt", ws / "link")
    for f in (ws / "d1").iterdir():
        f.unlink()
    (ws / "d1").rmdir()
    (ws / "d1").write_text("a file where a folder was\n")
    child = store.capture()
    store.diffs([(parent.commit, child.commit)])
    calls = _count_git(store)
    store.restore(parent.commit)
    assert "diff-tree" not in _commands(calls)
    assert tree_digest(ws) == want
    again = store.capture()
    assert again.tree == parent.tree
    # And forward again, planned from the same diff.
    calls.clear()
    store.restore(child.commit)
    assert "diff-tree" not in _commands(calls)
    assert store.capture().tree == child.tree and os.readlink(ws / "link") == "d0/f1.txt"


def test_a_small_restore_updates_the_index_with_the_next_capture_not_a_git_of_its_own(
    tmp_path: Path, watch_mode: bool
) -> None:
    """In a process whose scans follow the last walk (the watcher's events, or without a watcher
    a recheck of the last walk's folders: a search, a session); in a one-shot command, whose
    only scan walks everything, the restore tells git itself."""
    ws = tmp_path / "ws"
    _project(ws, folders=2, files=3)
    time.sleep(0.1)  # out of the racy window: a racy file the store cannot hash asks git
    store = ShadowStore.open(ws, home=tmp_path / "home")
    first = store.capture()
    (ws / "d0" / "f0.txt").write_text("edited\n")
    (ws / "d0" / "gone.txt").write_text("made after the first\n")
    time.sleep(0.1)
    second = store.capture()
    calls = _count_git(store)
    deferred = store._scanner.incremental  # a watcher's events or a recheck of the last walk
    store.restore(first.commit)
    assert ("update-index" in _commands(calls)) != deferred
    assert store.capture().tree == first.tree  # nothing changed since: no git
    assert _commands(calls).count("update-index") == (0 if deferred else 1)
    (ws / "d1" / "f1.txt").write_text("a step's edit\n")
    third = store.capture()
    # A small capture writes its tree itself (``_scan_edit.py``): the restore's entries and
    # its own wait for the next ``update-index`` a scan runs.
    assert _commands(calls).count("update-index") == (0 if deferred else 1)
    assert "d1/f1.txt" in store._scanner.unsynced
    store.materialize(third.commit, tmp_path / "third")
    want = tree_digest(ws)
    assert tree_digest(tmp_path / "third") == want
    assert third.tree != second.tree != first.tree


@pytest.mark.parametrize("after", ["edit", "delete", "recreate", "new process"])
def test_what_happens_after_a_restore_beats_its_index_entries_left_for_later(
    tmp_path: Path, watch_mode: bool, after: str
) -> None:
    """The restore's index entries go first on the next ``update-index``: an edit of a restored
    file in the same timestamp tick with the same size, the deletion of a restored file, a file
    the restore deleted made again, all are in the next capture; a process that opens the
    store after one whose restore left them (and that ended) finds them by their stat data."""
    ws = tmp_path / "ws"
    _project(ws, folders=2, files=3)
    home = tmp_path / "home"
    store = ShadowStore.open(ws, home=home)
    first = store.capture()
    (ws / "d0" / "f0.txt").write_text("second\n")
    (ws / "d0" / "extra.txt").write_text("only in the second\n")
    store.capture()
    for i in range(5):
        store.restore(first.commit)
        if after == "edit":
            (ws / "d0" / "f0.txt").write_text(f"x{i}\n")  # as "0 0\n": same size, same tick
        elif after == "delete":
            (ws / "d0" / "f0.txt").unlink()
        elif after == "recreate":
            (ws / "d0" / "extra.txt").write_text(f"made again {i}\n")
        else:
            store.close()
            store = ShadowStore.open(ws, home=home)
        (ws / "d1" / "f1.txt").write_text(f"a change that runs git {i}\n")
        snap = store.capture()
        store.materialize(snap.commit, tmp_path / f"check{i}")
        assert tree_digest(tmp_path / f"check{i}") == tree_digest(ws), f"round {i}"
        store.restore(snap.commit)  # and back to a state with the second's files
        (ws / "d0" / "f0.txt").write_text("second\n")
        (ws / "d0" / "extra.txt").write_text("only in the second\n")
        store.capture()


# ---------------------------------------------------------------------------- session


def test_a_session_records_a_snapshot_only_for_a_new_state(
    tmp_path: Path, watch_mode: bool
) -> None:
    """The capture that starts a session and the one before each step record nothing when the
    workspace did not change (no commit, no packing); a change made outside the steps is still
    recorded, with the session's metadata."""
    ws = tmp_path / "ws"
    _project(ws, folders=2, files=3)
    store = ShadowStore.open(ws, home=tmp_path / "home")
    base = store.capture()
    with TransactionalSession.create(store) as session:
        assert session.root_commit == base.commit and len(store.log()) == 1
        session.step([{"name": "write_file", "arguments": {"path": "a.txt", "content": "a\n"}}])
        session.step([{"name": "write_file", "arguments": {"path": "b.txt", "content": "b\n"}}])
        assert len(store.log()) == 3  # one per step: the captures before them recorded nothing
        (ws / "outside.txt").write_text("made between steps\n")
        step = session.step(
            [{"name": "write_file", "arguments": {"path": "c.txt", "content": "c\n"}}]
        )
    snaps = store.log()
    assert len(snaps) == 5
    before = next(s for s in snaps if s.tree == step.tree_before)
    assert before.meta["when"] == "before" and before.meta["step"] == 3
    assert step.diff.files == 1  # c.txt only: the outside change is the before snapshot's


def test_a_memory_store_session_records_a_snapshot_only_for_a_new_state(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _project(ws, folders=1, files=2)
    store = MemoryStore(ws)
    store.capture()
    with TransactionalSession.create(store) as session:
        session.step([{"name": "write_file", "arguments": {"path": "a.txt", "content": "a\n"}}])
    assert len(store.snapshots) == 2
    assert store.capture(meta={"x": 1}, if_changed=True) is not None
    assert len(store.snapshots) == 2
    assert store.capture(meta={"x": 1}).meta == {"x": 1} and len(store.snapshots) == 3


@pytest.mark.parametrize("cap", [256, 1])
def test_index_entries_of_restores_in_a_row_reach_the_index_in_order(
    tmp_path: Path, watch_mode: bool, monkeypatch: pytest.MonkeyPatch, cap: int
) -> None:
    """Restores back and forth with no git process between them leave their index entries to
    the next scan that runs git (the later restore's entry wins); past the cap, a restore's
    entries go to the index at once, and the older ones of the same paths are dropped."""
    monkeypatch.setattr("treesearch.store._scan._UNSYNCED_MAX", cap)
    ws = tmp_path / "ws"
    _project(ws, folders=2, files=3)
    store = ShadowStore.open(ws, home=tmp_path / "home")
    first = store.capture()
    (ws / "d0" / "f0.txt").write_text("second\n")
    (ws / "d1" / "only-second.txt").write_text("s\n")
    second = store.capture()
    (ws / "d0" / "f0.txt").write_text("third\n")
    (ws / "d1" / "only-second.txt").unlink()
    (ws / "d1" / "only-third.txt").write_text("t\n")
    third = store.capture()
    for target in (first, second, third, second, first, third, second):
        store.restore(target.commit)
    (ws / "d0" / "f1.txt").write_text("a change that runs git\n")
    snap = store.capture()
    store.materialize(snap.commit, tmp_path / "check")
    assert tree_digest(tmp_path / "check") == tree_digest(ws)
    assert (tmp_path / "check" / "d1" / "only-second.txt").exists()


def test_a_folder_made_again_with_files_git_classified_before_needs_no_ignore_listing(
    tmp_path: Path, watch_mode: bool
) -> None:
    """A restore prunes a folder an agent made, the next agent makes it again with the same
    files: their ignore verdicts stand (an ignored one stays out), without asking git again."""
    import shutil

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".gitignore").write_text("*.log\n")
    (ws / "a.txt").write_text("a\n")
    store = ShadowStore.open(ws, home=tmp_path / "home")
    base = store.capture()

    def make() -> None:
        (ws / "notes").mkdir()
        (ws / "notes" / "n.txt").write_text("note\n")
        (ws / "notes" / "x.log").write_text("ignored\n")

    make()
    made = store.capture()
    shutil.rmtree(ws / "notes")
    assert store.capture().tree == base.tree
    make()
    calls = _count_git(store)
    again = store.capture()
    assert "ls-files" not in _commands(calls)
    assert again.tree == made.tree
    assert {e.path for e in store.files(again.commit)} == {".gitignore", "a.txt", "notes/n.txt"}
    (ws / "notes" / "new.log").write_text("a new name: git is asked\n")
    calls.clear()
    newer = store.capture()
    assert "ls-files" in _commands(calls) and newer.tree == made.tree
