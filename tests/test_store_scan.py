"""Scans without the watcher (``watch=False``): every folder and file is checked against the last
walk, and only what differs is listed again; the answer is the full walk's."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest
from test_store_watch import _canon, _Ops, _rules

from treesearch.store import ShadowStore
from treesearch.store._recheck import Recheck
from treesearch.store._walk import IgnoreRules, NeedFullWalk, Walker, walk


@pytest.mark.parametrize(("seed", "settle"), [(0, 0), (1, 0), (2, 0), (3, 0), (4, 0.06), (5, 0.06)])
def test_a_walk_relisting_what_recheck_finds_matches_a_full_walk_after_random_edits(
    tmp_path: Path, seed: int, settle: float
) -> None:
    """Every edit the watcher's test makes, including those no event reports (writes through a
    hard link from outside, same-size edits with the mtime put back, folder mtimes set back).
    ``settle``: seconds between the edits and the check, so that folders checked before are
    past the timestamp tick and trusted by their stamp (their names are not read again)."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "src" / "pkg" / "a.py").write_text("a = 1\n")
    (ws / "docs").mkdir()
    (ws / "empty").mkdir()
    (ws / "docs" / "linked.txt").write_text("has a second link outside\n")
    os.link(ws / "docs" / "linked.txt", outside / "hardlink")
    walker = Walker(str(ws), _rules, max_file_bytes=None)
    prev = walker.full()
    ops = _Ops(ws, outside, random.Random(seed))
    incremental = 0
    recheck = Recheck()
    for _ in range(60):
        done = [ops.step() for _ in range(random.Random(seed * 1000 + ops.n).randint(1, 4))]
        time.sleep(settle)
        dirty, fresh, names = recheck(walker)
        try:
            got = walker.update(dirty, fresh, names=names)
            incremental += 1
            differ = {
                p
                for p in prev.files.keys() | got.files.keys()
                if prev.files.get(p) != got.files.get(p)
            }
            assert got.touched is not None and differ <= got.touched, f"after {done}"
        except NeedFullWalk:
            got = walker.full()
        want = walk(str(ws), _rules, max_file_bytes=None)
        assert _canon(got) == _canon(want), f"after {done}"
        prev = got
    assert incremental >= 50  # nearly every round was answered without a full walk


def test_a_no_change_scan_without_a_watcher_lists_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (#13): without the watcher every scan walked and recorded the whole workspace
    again (1.9x an lstat walk on 14,100 files); now it only checks the last walk's stat data."""
    ws = tmp_path / "ws"
    for i in range(30):
        d = ws / f"d{i:02d}"
        d.mkdir(parents=True)
        for j in range(3):
            (d / f"f{j}.txt").write_text(f"{i} {j}\n")
    store = ShadowStore.open(ws, home=tmp_path / "home", watch=False)
    first = store.capture()
    scanner = store._scanner
    assert scanner.watch is None and scanner.walker is not None and scanner.walker.listed == 31
    assert store.capture().commit == first.commit and scanner.walker.listed == 0
    # Once past the timestamp tick, a folder's unchanged stamp stands for its names.
    time.sleep(0.1)
    store.capture()
    listed: list[object] = []
    real_listdir = os.listdir

    def listdir(path: object) -> list[str]:
        listed.append(path)
        return real_listdir(path)  # type: ignore[call-overload,no-any-return]

    monkeypatch.setattr(os, "listdir", listdir)
    assert store.capture().commit == first.commit and listed == []
    monkeypatch.undo()
    (ws / "d07" / "f1.txt").write_text("changed\n")
    second = store.capture()
    # Only the changed file is looked at again: its folder is not listed.
    assert second.changed == ("d07/f1.txt",) and scanner.walker.listed == 0
    assert scanner.walker.patched == 1
    # The restore's safety scan sees an edit made since, and looks only at it.
    (ws / "d08" / "f2.txt").write_text("not captured yet\n")
    res = store.restore(first.commit)
    assert scanner.walker.listed == 0 and scanner.walker.patched == 1
    assert (ws / "d08" / "f2.txt").read_text() == "8 2\n"
    assert (ws / "d07" / "f1.txt").read_text() == "7 1\n"
    assert store.capture().tree == first.tree
    store.undo()
    assert (ws / "d08" / "f2.txt").read_text() == "not captured yet\n"
    assert res.safety.tree != second.tree
    store.close()


def test_a_file_added_to_a_checked_folder_whose_mtime_is_set_back_is_captured_without_a_watcher(
    tmp_path: Path,
) -> None:
    """A folder's mtime alone cannot say that its entries are the same (``tar x`` and ``touch``
    set it back; a coarse clock leaves it unchanged): the names are compared too."""
    ws = tmp_path / "ws"
    (ws / "d").mkdir(parents=True)
    (ws / "d" / "a.txt").write_text("a\n")
    store = ShadowStore.open(ws, home=tmp_path / "home", watch=False)
    store.capture()
    time.sleep(0.1)
    store.capture()  # the folder's names checked once more, past the timestamp tick
    st = os.stat(ws / "d")
    (ws / "d" / "b.txt").write_text("b\n")
    os.utime(ws / "d", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(ws / "d").st_mtime_ns == st.st_mtime_ns
    snap = store.capture()
    assert snap.changed == ("d/b.txt",)
    store.close()


def test_a_folder_replaced_by_a_symlink_is_not_followed_without_a_watcher(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "d" / "sub").mkdir(parents=True)
    (ws / "d" / "sub" / "x.txt").write_text("x\n")
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "x.txt").write_text("x\n")  # the same names and content outside
    store = ShadowStore.open(ws, home=tmp_path / "home", watch=False)
    first = store.capture()
    (ws / "d" / "sub" / "x.txt").unlink()
    (ws / "d" / "sub").rmdir()
    (ws / "d").rmdir()
    (ws / "d").symlink_to(outside)
    snap = store.capture()
    assert {e.path for e in store.files(snap.commit)} == {"d"}  # the link, not what it points to
    store.restore(first.commit)
    assert not (ws / "d").is_symlink() and (ws / "d" / "sub" / "x.txt").read_text() == "x\n"
    assert (outside / "sub" / "x.txt").exists()
    store.close()


def _git_commands(store: ShadowStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The git subcommands the store runs from now on (real git runs them)."""
    seen: list[str] = []
    runner = store._scanner.git
    real_run = runner.run

    def run(args: list[str], **kw: object) -> bytes:
        seen.append(next(a for a in args if not a.startswith("-")))
        return real_run(args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(runner, "run", run)
    return seen


@pytest.mark.usefixtures("watch_mode")
def test_new_files_cost_no_ignore_question_when_nothing_can_be_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ``.gitignore``, no ``info/exclude``, no pattern: git is not asked about new names."""
    ws = tmp_path / "ws"
    (ws / "d").mkdir(parents=True)
    (ws / "d" / "a.txt").write_text("a\n")
    store = ShadowStore.open(ws, home=tmp_path / "home")
    store.capture()
    seen = _git_commands(store, monkeypatch)
    (ws / "d" / "new.txt").write_text("new\n")
    (ws / "e").mkdir()
    (ws / "e" / "deep.txt").write_text("deep\n")
    snap = store.capture()
    assert set(snap.changed) == {"d/new.txt", "e/deep.txt"}
    assert "ls-files" not in seen, seen
    # Once an ignore file exists, new names are classified by git again.
    (ws / ".gitignore").write_text("*.log\n")
    (ws / "d" / "x.log").write_text("ignored\n")
    (ws / "d" / "y.txt").write_text("kept\n")
    snap = store.capture()
    assert set(snap.changed) == {".gitignore", "d/y.txt"}
    (ws / "e" / "z.log").write_text("ignored too\n")
    (ws / "e" / "w.txt").write_text("kept\n")
    seen.clear()
    snap = store.capture()
    assert snap.changed == ("e/w.txt",) and "ls-files" in seen
    store.close()


@pytest.mark.usefixtures("watch_mode")
@pytest.mark.parametrize("where", ["user repo's info/exclude", "a .gitignore symlink"])
def test_new_files_matching_only_a_rarer_ignore_input_are_not_captured(
    tmp_path: Path, where: str
) -> None:
    ws = tmp_path / "ws"
    (ws / "d").mkdir(parents=True)
    (ws / "d" / "a.txt").write_text("a\n")
    if where == "user repo's info/exclude":
        (ws / ".git" / "info").mkdir(parents=True)
        (ws / ".git" / "info" / "exclude").write_text("*.log\n")
    else:
        (tmp_path / "patterns").write_text("*.log\n")
        (ws / ".gitignore").symlink_to(tmp_path / "patterns")
    store = ShadowStore.open(ws, home=tmp_path / "home")
    store.capture()
    (ws / "d" / "x.log").write_text("ignored?\n")
    (ws / "d" / "y.txt").write_text("kept\n")
    snap = store.capture()
    files = {e.path for e in store.files(snap.commit)}
    assert "d/y.txt" in files
    # Whatever git decides about a symlinked .gitignore, the first walk and later ones agree.
    fresh = ShadowStore.open(ws, home=tmp_path / "home2")
    assert {e.path for e in fresh.files(fresh.capture().commit)} == files
    if where == "user repo's info/exclude":
        assert "d/x.log" not in files
    fresh.close()
    store.close()


def _file_to_folder(p: Path) -> None:
    p.unlink()
    p.mkdir()


def _folder_to_file(p: Path) -> None:
    p.rmdir()
    p.write_text("a file again\n")


def _named_rules(rel: str) -> IgnoreRules:
    # Files ignored by name (``*.log`` as git lists them), a folder ignored whole.
    return IgnoreRules(files={"d/x.log", "d/y.log"}, dirs={"d/cache/"})


@pytest.mark.parametrize("mode", ["recheck", "watch"])
def test_a_walk_that_looks_only_at_named_entries_matches_a_full_walk_in_every_case(
    tmp_path: Path, mode: str
) -> None:
    """A folder brought up to date entry by entry (``Walker.update(names=...)``) must give the
    full walk's answer whatever the entries became: ignored names, a file grown past the size
    limit, a hard link, a fifo, a folder where a file was, a ``.gitignore``, a mode; those a
    look at one entry cannot classify send the folder to be listed."""
    from treesearch.store._watch import Inotify

    ws = tmp_path / "ws"
    (ws / "d").mkdir(parents=True)
    (ws / "e").mkdir()
    for i in range(6):
        (ws / "d" / f"f{i}.txt").write_text(f"{i}\n")
    (ws / "d" / "x.log").write_text("ignored\n")
    watch = Inotify.create(str(ws)) if mode == "watch" else None
    if mode == "watch" and watch is None:
        pytest.skip("no inotify here")
    walker = Walker(str(ws), _named_rules, max_file_bytes=100, watch=watch)
    walker.full()
    recheck = Recheck()
    d = ws / "d"
    edits = [
        lambda: (d / "f0.txt").write_text("changed\n"),
        lambda: (d / "y.log").write_text("a new ignored name\n"),
        lambda: (d / "x.log").unlink(),
        lambda: (d / "f1.txt").write_text("x" * 200),  # past max_file_bytes
        lambda: (d / "f1.txt").write_text("small again\n"),
        lambda: (d / "f2.txt").chmod(0o600),
        lambda: os.link(d / "f3.txt", ws / "e" / "second-link"),
        lambda: (ws / "e" / "second-link").write_text("through a hard link\n"),
        lambda: (ws / "e" / "second-link").unlink(),
        lambda: os.mkfifo(d / "pipe"),
        lambda: (d / "pipe").unlink(),
        lambda: _file_to_folder(d / "f4.txt"),
        lambda: _folder_to_file(d / "f4.txt"),
        lambda: (d / ".gitignore").write_text("*.tmp\n"),
        lambda: (d / "cache").mkdir(),
        lambda: (d / "link").symlink_to("f5.txt"),
        lambda: (d / "f5.txt").rename(d / "f6.txt"),
    ]
    patched = 0
    for i, edit in enumerate(edits):
        edit()
        if watch is not None:
            changes = watch.read()
            assert changes is not None
            got = walker.update(changes.dirty, changes.fresh, names=changes.names)
        else:
            dirty, fresh, names = recheck(walker)
            got = walker.update(dirty, fresh, names=names)
        patched += walker.patched
        want = walk(str(ws), _named_rules, max_file_bytes=100)
        assert _canon(got) == _canon(want), f"after edit {i}"
    assert patched >= 5  # most edits were handled entry by entry
