"""Change notification (inotify): an incremental walk must see exactly what a full walk sees."""

from __future__ import annotations

import argparse
import os
import random
import shutil
import time
from pathlib import Path

import pytest

from treesearch import _cli_common as cli
from treesearch.store import ShadowStore
from treesearch.store._walk import IgnoreRules, NeedFullWalk, Walker, WalkResult, walk
from treesearch.store._watch import Inotify, local_filesystem

pytestmark = pytest.mark.skipif(
    Inotify.create(os.getcwd()) is None and Inotify.create("/tmp") is None,
    reason="no inotify on a local filesystem here",
)


def _canon(w: WalkResult) -> dict[str, object]:
    return {
        "files": dict(sorted(w.files.items())),
        "empty_dirs": sorted(w.empty_dirs),
        "skipped": sorted((s.path, s.reason) for s in w.skipped),
        "nested": sorted(w.nested_repos),
        "modes": dict(sorted(w.modes.items())),
        "dir_mtimes": dict(sorted(w.dir_mtimes.items())),
        "dir_names": dict(sorted(w.dir_names.items())),
        "ignore_files": dict(sorted(w.ignore_files.items())),
    }


def _rules(rel: str) -> IgnoreRules:
    # "build/" is ignored, except build/keep.txt, which the user's repository tracks.
    return IgnoreRules(dirs={"build/"}, keep={"build/keep.txt"}, keep_dirs={"build"})


class _Ops:
    """Random edits of a workspace: files, folders, renames in and out, links, modes."""

    def __init__(self, ws: Path, outside: Path, rng: random.Random) -> None:
        self.ws, self.outside, self.rng = ws, outside, rng
        self.n = 0

    def _dirs(self) -> list[Path]:
        return [self.ws] + sorted(
            p
            for p in self.ws.rglob("*")
            if p.is_dir() and not p.is_symlink() and ".git" not in p.parts
        )

    def _files(self) -> list[Path]:
        return sorted(
            p
            for p in self.ws.rglob("*")
            if (p.is_file() or p.is_symlink()) and ".git" not in p.parts
        )

    def step(self) -> str:
        rng = self.rng
        self.n += 1
        n = self.n
        files, dirs = self._files(), self._dirs()
        op = rng.choice(
            [
                "create", "create", "modify", "modify_same_size", "delete", "mkdir", "mkdir_deep",
                "rmtree", "rename_file", "rename_dir", "dir_to_file", "symlink", "chmod",
                "move_in", "move_out", "hardlink_write", "utime_dir", "gitignore", "build",
                "nested_repo", "link_inside", "link_out_write",
            ]
        )  # fmt: skip
        d = rng.choice(dirs)
        if op == "create" or (not files and op in ("modify", "modify_same_size", "delete")):
            (d / f"f{n}.txt").write_text(f"new {n}\n")
        elif op == "modify":
            f = rng.choice(files)
            if f.is_file() and not f.is_symlink():
                f.write_text(f"changed {n} " * rng.randint(1, 3))
        elif op == "modify_same_size":
            f = rng.choice(files)
            if f.is_file() and not f.is_symlink():
                data = bytearray(f.read_bytes() or b"x")
                data[0] = (data[0] + 1) % 256
                st = f.stat()
                f.write_bytes(bytes(data))
                os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size, same mtime
        elif op == "delete":
            rng.choice(files).unlink()
        elif op == "mkdir":
            (d / f"d{n}").mkdir()
        elif op == "mkdir_deep":
            deep = d / f"deep{n}" / "a" / "b"
            deep.mkdir(parents=True)
            (deep / "x.txt").write_text("x")
            (deep.parent / "y.txt").write_text("y")
        elif op == "rmtree" and d != self.ws:
            shutil.rmtree(d)
        elif op == "rename_file" and files:
            f = rng.choice(files)
            f.rename(rng.choice(dirs) / f"moved{n}")
        elif op == "rename_dir" and d != self.ws:
            target = rng.choice(dirs)
            if target != d and d not in target.parents:
                d.rename(target / f"rd{n}")
        elif op == "dir_to_file" and d != self.ws:
            shutil.rmtree(d)
            d.write_text("was a folder\n")
        elif op == "symlink":
            os.symlink(f"target{n}", d / f"link{n}")
        elif op == "chmod" and files:
            f = rng.choice(files)
            if f.is_file() and not f.is_symlink():
                f.chmod(rng.choice([0o600, 0o644, 0o755, 0o700]))
        elif op == "move_in":
            src = self.outside / f"in{n}"
            (src / "sub").mkdir(parents=True)
            (src / "sub" / "z.txt").write_text("z")
            src.rename(d / f"in{n}")
        elif op == "move_out" and d != self.ws:
            d.rename(self.outside / f"out{n}")
            (self.outside / f"out{n}" / "after.txt").write_text("written after the move")
        elif op == "hardlink_write":
            # Written through a link outside the workspace: no event in the workspace's folders.
            link = self.outside / "hardlink"
            if link.stat().st_nlink > 1:
                link.write_text(f"through the other link {n}")
        elif op == "link_inside" and files:
            f = rng.choice(files)
            if f.is_file() and not f.is_symlink():
                # A later write through either name changes both. (A new link in an ignored
                # folder is like one from outside: only a verifying walk sees it.)
                to = rng.choice([x for x in dirs if "build" not in x.relative_to(self.ws).parts])
                os.link(f, to / f"hl{n}")
        elif op == "link_out_write" and files:
            # A new link from outside, written through at once: no event reports it.
            f = rng.choice(files)
            if f.is_file() and not f.is_symlink():
                os.link(f, self.outside / f"new-link{n}")
                (self.outside / f"new-link{n}").write_text(f"through a new outside link {n}")
        elif op == "utime_dir":
            os.utime(d, ns=(1, 1_000_000_000 * n))
        elif op == "gitignore":
            (d / ".gitignore").write_text(f"# {n}\n")
        elif op == "build":
            b = self.ws / "build"
            if b.is_symlink() or b.is_file():
                b.unlink()  # a folder turned into a file earlier
            b.mkdir(exist_ok=True)
            (b / f"out{n}.o").write_text("ignored")
            (b / "keep.txt").write_text(f"tracked {n}")
        elif op == "nested_repo" and d != self.ws:
            (d / ".git").mkdir(exist_ok=True)
        else:
            (d / f"f{n}.txt").write_text(f"fallback {n}\n")
        return op


@pytest.mark.parametrize("seed", range(4))
def test_incremental_walk_matches_a_full_walk_after_random_edits(tmp_path: Path, seed: int) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "src" / "pkg" / "a.py").write_text("a = 1\n")
    (ws / "docs").mkdir()
    (ws / "empty").mkdir()
    (ws / "docs" / "linked.txt").write_text("has a second link outside\n")
    os.link(ws / "docs" / "linked.txt", outside / "hardlink")
    watch = Inotify.create(str(ws))
    assert watch is not None
    walker = Walker(str(ws), _rules, max_file_bytes=None, watch=watch)
    prev = walker.full()
    ops = _Ops(ws, outside, random.Random(seed))
    incremental = 0
    for _ in range(60):
        done = [ops.step() for _ in range(random.Random(seed * 1000 + ops.n).randint(1, 4))]
        changes = watch.read()
        if changes is None or watch.lost:
            got = walker.full()
        else:
            try:
                # Only a verifying walk (a restore's safety scan) sees a write through a link
                # made from outside since the last walk, or through one made and gone again.
                gone = {"delete", "rename_dir", "rmtree", "dir_to_file", "move_out"}
                verify = "link_out_write" in done or bool(
                    "link_inside" in done and gone & set(done)
                )
                got = walker.update(
                    changes.dirty, changes.fresh, verify=verify, names=changes.names
                )
                incremental += 1
                # Every path that differs from the last walk is among those it says it touched.
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
    assert incremental >= 30  # most rounds were answered without a full walk
    watch.close()


def test_a_scan_with_a_watcher_lists_only_the_changed_folders(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    for i in range(30):
        d = ws / f"d{i:02d}"
        d.mkdir(parents=True)
        for j in range(5):
            (d / f"f{j}.txt").write_text(f"{i} {j}\n")
    store = ShadowStore.open(ws, home=tmp_path / "home")
    first = store.capture()
    assert store._scanner.watch is not None and store._scanner.walker is not None
    assert store._scanner.walker.listed == 31
    again = store.capture()
    assert again.commit == first.commit and store._scanner.walker.listed == 0
    (ws / "d07" / "f1.txt").write_text("changed\n")
    second = store.capture()
    # Only the file an event named is looked at again: its folder is not listed.
    assert second.changed == ("d07/f1.txt",) and store._scanner.walker.listed == 0
    assert store._scanner.walker.patched == 1
    # The restore's safety scan is incremental too, and still sees an unrecorded edit.
    (ws / "d08" / "f2.txt").write_text("not captured yet\n")
    res = store.restore(first.tree)
    assert store._scanner.walker.listed == 0 and store._scanner.walker.patched == 1
    assert (ws / "d08" / "f2.txt").read_text() == "8 2\n"
    store.undo()
    assert (ws / "d08" / "f2.txt").read_text() == "not captured yet\n"
    assert res.safety.tree != second.tree
    store.close()
    assert store._scanner.watch is None


def test_a_no_change_scan_with_a_watcher_copies_nothing_per_folder_or_file(
    tmp_path: Path,
) -> None:
    """Regression (#13): a no-change capture with the watcher grew with the number of folders
    (each scan copied the walk's dicts of every file and folder and compared them again)."""
    ws = tmp_path / "ws"
    for i in range(40):
        d = ws / f"d{i:02d}"
        d.mkdir(parents=True)
        (d / "f.txt").write_text(f"{i}\n")
        (d / "f.txt").chmod(0o664)  # a mode git cannot say: every file is in ``modes``
    (ws / "empty").mkdir()
    store = ShadowStore.open(ws, home=tmp_path / "home")
    first = store.capture()
    assert len(first.modes) == 40 and first.empty_dirs == ("empty",)
    scanner = store._scanner
    a = scanner.scan().walk
    b = scanner.scan().walk
    assert scanner.walker is not None and scanner.walker.listed == 0
    # The same answer again, not a copy: nothing per file or folder was built or compared.
    assert b.files is a.files and b.modes is a.modes and b.dir_mtimes is a.dir_mtimes
    assert b.empty_dirs is a.empty_dirs and b.touched == set()
    assert store.capture().commit == first.commit
    # A change gives a new answer holding it; the old answer (the stat cache) is untouched.
    (ws / "d03" / "f.txt").write_text("changed\n")
    (ws / "d05" / "f.txt").chmod(0o600)
    second = store.capture()
    assert second.changed == ("d03/f.txt", "d05/f.txt") and second.modes["d05/f.txt"] == 0o600
    c = scanner.scan().walk
    assert c.files is not a.files and a.modes["d05/f.txt"] == 0o664
    # A restore updates the stat cache without changing the walk's shared answer.
    store.restore(first.commit)
    assert store.capture().tree == first.tree and c.modes["d05/f.txt"] == 0o600
    assert (ws / "d03" / "f.txt").read_text() == "3\n"


def test_an_overflowing_event_queue_falls_back_to_a_full_walk(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "a").mkdir(parents=True)
    (ws / "b").mkdir()
    (ws / "a" / "keep").write_text("a")
    (ws / "b" / "keep").write_text("b")
    store = ShadowStore.open(ws, home=tmp_path / "home")
    store.capture()
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    # Alternating files: the kernel merges only identical consecutive events.
    fa, fb = (
        os.open(ws / "a" / "x", os.O_WRONLY | os.O_CREAT),
        os.open(ws / "a" / "y", os.O_WRONLY | os.O_CREAT),
    )
    try:
        for _ in range(limit // 2 + 10):
            os.write(fa, b"x")
            os.write(fb, b"y")
    finally:
        os.close(fa)
        os.close(fb)
    (ws / "b" / "late.txt").write_text("late\n")
    snap = store.capture()
    assert (
        store._scanner.walker is not None and store._scanner.walker.listed == 3
    )  # everything again
    assert set(snap.changed) == {"a/x", "a/y", "b/late.txt"}


def test_watching_can_be_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "f").write_text("1")
    off = ShadowStore.open(ws, home=tmp_path / "home", watch=False)
    off.capture()
    assert off._scanner.watch is None
    (ws / "f").write_text("2")
    assert off.capture().changed == ("f",)
    # Found by the check of every file's stat data (no event): that file alone looked at again.
    assert off._scanner.walker is not None and off._scanner.walker.patched == 1
    # TREESEARCH_WATCH is read by the command line (cli.py) and passed down; the library reads
    # no environment variable.
    monkeypatch.setenv("TREESEARCH_WATCH", "0")
    args = argparse.Namespace(home=str(tmp_path / "home2"), workspace=str(ws))
    env_off = cli._open_store(args)
    assert env_off._scanner.watching is False
    env_off.capture()
    assert env_off._scanner.watch is None
    (ws / "f").write_text("3")
    assert env_off.capture().changed == ("f",)
    assert env_off._scanner.walker is not None and env_off._scanner.walker.patched == 1
    library = ShadowStore.open(ws, home=tmp_path / "home3")
    library.capture()
    assert library._scanner.watch is not None  # the default: on, whatever the environment says


def test_only_local_filesystems_are_watched(tmp_path: Path) -> None:
    info = (
        b"1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"
        b"2 1 0:50 / /srv/nfs rw - nfs4 server:/x rw\n"
        b"3 1 0:51 / /home/u/my\\040proj rw - tmpfs tmpfs rw\n"
        b"4 3 0:52 / /home/u/my\\040proj/mnt rw - fuse.sshfs host: rw\n"
    )
    assert local_filesystem("/home/u/other", info)
    assert not local_filesystem("/srv/nfs/project", info)
    assert not local_filesystem("/srv", info)  # a network mount below it
    assert not local_filesystem("/home/u/my proj", info)  # FUSE below it
    assert local_filesystem("/home/u/my proj/src", info)
    assert not local_filesystem("/home/u/my proj/mnt/x", info)
    assert not local_filesystem("/proc")


def _count_git(store: ShadowStore) -> list[list[str]]:
    calls: list[list[str]] = []
    original = store._git.run

    def counting(args, **kw):  # type: ignore[no-untyped-def]  # observes the real runner
        calls.append(list(args))
        return original(args, **kw)

    store._git.run = counting  # type: ignore[method-assign]
    return calls


def test_files_a_restore_just_wrote_are_checked_by_hashing_not_by_git(
    tmp_path: Path, watch_mode: bool
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("one\n")
    (ws / "b.txt").write_text("bee\n")
    store = ShadowStore.open(ws, home=tmp_path / "home")
    first = store.capture()
    (ws / "a.txt").write_text("two\n")
    store.capture()
    time.sleep(0.1)
    store.restore(first.tree)  # writes a.txt: racy until its timestamp tick has passed
    calls = _count_git(store)
    again = store.capture()
    assert again.tree == first.tree and calls == []


def test_a_same_size_edit_right_after_a_restore_is_captured(
    tmp_path: Path, watch_mode: bool
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("one\n")
    store = ShadowStore.open(ws, home=tmp_path / "home")
    first = store.capture()
    (ws / "a.txt").write_text("two\n")
    second = store.capture()
    for i in range(20):
        store.restore(first.tree if i % 2 == 0 else second.tree)
        (ws / "a.txt").write_text(f"x{i:02d}\n")  # same size, likely the same timestamp tick
        snap = store.capture()
        files = {e.path: e for e in store.files(snap.commit)}
        store.materialize(snap.commit, tmp_path / f"check{i}")
        assert (tmp_path / f"check{i}" / "a.txt").read_text() == f"x{i:02d}\n", files


def test_a_forked_child_does_not_take_the_parents_events(tmp_path: Path, watch_mode: bool) -> None:
    ws = tmp_path / "ws"
    (ws / "d").mkdir(parents=True)
    (ws / "e").mkdir()
    (ws / "d" / "f.txt").write_text("0\n")
    (ws / "e" / "g.txt").write_text("0\n")
    store = ShadowStore.open(ws, home=tmp_path / "home")
    first = store.capture()
    pid = os.fork()
    if pid == 0:  # the child: edits and scans (a live diff records nothing), then leaves
        code = 1
        try:
            (ws / "e" / "child.txt").write_text("child\n")
            code = 0 if [f.path for f in store.diff(first.commit).files] == ["e/child.txt"] else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    (ws / "d" / "f.txt").write_text("1\n")
    snap = store.capture()  # the parent's watcher still reports the child's change too
    files = {e.path for e in store.files(snap.commit)}
    assert files == {"d/f.txt", "e/g.txt", "e/child.txt"}
    assert store.materialize(snap.commit, tmp_path / "copy") and (
        (tmp_path / "copy" / "d" / "f.txt").read_text() == "1\n"
    )


# ---------------------------------------------------------------------------- regressions of #11


def _replace(ws: Path, kind: str) -> None:
    """Put something the snapshot does not hold where the snapshot has ``d/x.txt`` / ``f.txt``."""
    if kind == "folder replaced by a link":
        shutil.rmtree(ws / "d")
        os.symlink("elsewhere", ws / "d")
    elif kind == "file replaced by a link":
        (ws / "f.txt").unlink()
        os.symlink("elsewhere", ws / "f.txt")
    else:  # a FIFO in place of the file, then deleted (a restore refuses to overwrite a FIFO)
        (ws / "f.txt").unlink()
        os.mkfifo(ws / "f.txt")


@pytest.mark.parametrize(
    "kind", ["folder replaced by a link", "file replaced by a link", "FIFO in place of a file"]
)
def test_deleting_a_file_a_restore_just_wrote_is_captured(
    tmp_path: Path, kind: str, watch_mode: bool
) -> None:
    """Regression (#11): with the watcher, a file a restore wrote where the walker had recorded
    something else, deleted again, stayed in the next capture (the restore updated the stat cache
    but not the walker's folder records), and the next restore to the same snapshot wrote nothing.
    """
    ws = tmp_path / "ws"
    (ws / "d").mkdir(parents=True)
    (ws / "d" / "x.txt").write_text("x\n")
    (ws / "f.txt").write_text("f\n")
    (ws / "keep.txt").write_text("k\n")
    store = ShadowStore.open(ws, home=tmp_path / "home")
    first = store.capture()
    _replace(ws, kind)
    store.capture()
    if kind == "FIFO in place of a file":
        (ws / "f.txt").unlink()
    for _ in range(3):
        store.restore(first.commit)
        assert (ws / "d" / "x.txt").read_text() == "x\n" and (ws / "f.txt").read_text() == "f\n"
        gone = "d/x.txt" if kind.startswith("folder") else "f.txt"
        (ws / gone).unlink()
        snap = store.capture()
        assert gone not in {e.path for e in store.files(snap.commit)}, "a deleted file captured"
        again = store.restore(first.commit)
        assert again.written == (gone,) and (ws / gone).exists()
        _replace(ws, kind)
        store.capture()
        if kind == "FIFO in place of a file":
            (ws / "f.txt").unlink()


def _mmap_write(path: Path, data: bytes) -> None:
    import mmap

    with open(path, "r+b") as fh, mmap.mmap(fh.fileno(), 0) as mm:
        mm[: len(data)] = data
        mm.flush()


def test_a_restores_safety_snapshot_holds_writes_no_event_reports(
    tmp_path: Path, watch_mode: bool
) -> None:
    """Regression (#11): with the watcher, a write through a hard link made after the last scan,
    or through a shared mmap, reports no event; the safety snapshot missed it and undo brought
    back the older version. The safety scan now checks every file's stat data."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "d").mkdir(parents=True)
    outside.mkdir()
    (ws / "d" / "linked.txt").write_text("linked 1\n")
    (ws / "mapped.txt").write_text("mapped 1\n")
    store = ShadowStore.open(ws, home=tmp_path / "home")
    first = store.capture()
    (ws / "d" / "linked.txt").write_text("linked 2\n")
    (ws / "mapped.txt").write_text("mapped 2\n")
    time.sleep(0.1)  # out of the racy window: only stat data can tell the next change
    store.capture()
    time.sleep(0.1)
    os.link(ws / "d" / "linked.txt", outside / "link")
    (outside / "link").write_text("linked 3\n")
    _mmap_write(ws / "mapped.txt", b"mapped 3\n")
    on_disk = {"d/linked.txt": b"linked 3\n", "mapped.txt": b"mapped 3\n"}
    res = store.restore(first.commit)
    store.materialize(res.safety.commit, tmp_path / "safety")
    for rel, data in on_disk.items():
        assert (tmp_path / "safety" / rel).read_bytes() == data, f"safety snapshot missed {rel}"
    store.undo()
    for rel, data in on_disk.items():
        assert (ws / rel).read_bytes() == data


def test_a_write_through_a_new_hard_link_inside_the_workspace_is_captured(
    tmp_path: Path, watch_mode: bool
) -> None:
    """A hard link made inside the workspace after the last scan: a later write through it
    changes the other name too, in a folder that gets no event (the walk that meets the new link
    checks every file's stat data, and that folder is then listed on every scan)."""
    ws = tmp_path / "ws"
    (ws / "a").mkdir(parents=True)
    (ws / "b").mkdir()
    (ws / "a" / "one.txt").write_text("one 1\n")
    store = ShadowStore.open(ws, home=tmp_path / "home")
    store.capture()
    time.sleep(0.1)
    os.link(ws / "a" / "one.txt", ws / "b" / "two.txt")
    store.capture()
    time.sleep(0.1)
    (ws / "b" / "two.txt").write_text("one 2\n")  # same size: only stat data tell
    snap = store.capture()
    store.materialize(snap.commit, tmp_path / "copy")
    assert (tmp_path / "copy" / "a" / "one.txt").read_text() == "one 2\n"
    assert (tmp_path / "copy" / "b" / "two.txt").read_text() == "one 2\n"
