"""Git objects read and made in the store's own process (``store/_trees.py``; #13, restore without
the watcher): trees compared and made here agree with git's byte for byte, the long-lived
``cat-file`` sees objects other processes write after it started, and a small restore runs no
git process of its own while keeping every promise of a restore (the safety snapshot holds an edit
no capture saw, the index catches up)."""

from __future__ import annotations

import os
import random
import subprocess
import time
from pathlib import Path

import pytest
from conftest import clean_git_env, tree_digest

from treesearch.store import ShadowStore, _git
from treesearch.store._pack import MAX_PACKS
from treesearch.store._trees import (
    EMPTY_TREE,
    MissingObject,
    ObjectBatch,
    ObjectReader,
    Trees,
    hash_files,
    pack_bytes,
    store_trees,
)


def _repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    git_dir = tmp_path / "repo.git"
    env = clean_git_env(GIT_DIR=str(git_dir), GIT_INDEX_FILE=str(tmp_path / "repo.index"))
    subprocess.run(["git", "init", "-q", "--bare", str(git_dir)], env=env, check=True)
    return git_dir, env


def _git_out(env: dict[str, str], *args: str, input: bytes | None = None) -> bytes:
    return subprocess.run(
        ["git", *args], env=env, input=input, capture_output=True, check=True
    ).stdout


def _trees(git_dir: Path, tmp_path: Path) -> Trees:
    runner = _git.GitRunner(git_dir, tmp_path, tmp_path / "repo.index")
    return store_trees(runner)


def _git_tree(env: dict[str, str], files: dict[str, tuple[int, str]]) -> str:
    """The tree ``write-tree`` makes of ``files`` (path -> (mode, blob id))."""
    _git_out(env, "read-tree", "--empty")
    info = b"".join(
        f"{mode:o} {oid}\t{path}\0".encode() for path, (mode, oid) in sorted(files.items())
    )
    _git_out(env, "update-index", "-z", "--index-info", input=info)
    return _git_out(env, "write-tree").decode().strip()


def _blob(env: dict[str, str], data: bytes) -> str:
    return _git_out(env, "hash-object", "-w", "--stdin", input=data).decode().strip()


def _pack(env: dict[str, str], git_dir: Path, oids: list[str], replace: bool = False) -> None:
    """Pack ``oids`` into a new pack (``replace``: removing every other pack), and remove their
    loose copies."""
    packs = git_dir / "objects" / "pack"
    old = list(packs.glob("pack-*"))
    _git_out(env, "pack-objects", "-q", str(packs / "pack"), input="\n".join(oids).encode() + b"\n")
    if replace:
        for f in old:
            f.unlink()
    _git_out(env, "prune-packed")


def _diff_records(env: dict[str, str], a: str, b: str) -> set[tuple[bytes, bytes]]:
    out = _git_out(env, "diff-tree", "-r", "-z", "--no-renames", a, b).split(b"\0")
    return {(out[i], out[i + 1]) for i in range(0, len(out) - 1, 2)}


def test_trees_made_and_compared_here_are_what_git_makes_and_prints(tmp_path: Path) -> None:
    """Random rounds of adds, edits, deletes, exec bits, symlinks, folders emptied, a folder
    that becomes a file and a file that becomes a folder: ``update`` gives ``write-tree``'s id
    and ``diff`` gives ``diff-tree``'s records."""
    git_dir, env = _repo(tmp_path)
    trees = _trees(git_dir, tmp_path)
    rng = random.Random(7)
    blobs = [_blob(env, f"content {i}\n".encode()) for i in range(6)]
    names = ["a", "b.txt", "a-b", "a.b", "c", "z"]
    files: dict[str, tuple[int, str]] = {}
    for i in range(12):
        files[
            "/".join(rng.choice(names) for _ in range(rng.randint(1, 3))) if i else "deep/er/file"
        ] = (0o100644, blobs[0])
    files = {p: e for p, e in files.items() if not any(q.startswith(p + "/") for q in files)}
    tree = _git_tree(env, files)
    for _round in range(40):
        changes: dict[str, tuple[int, str] | None] = {}
        for _ in range(rng.randint(1, 4)):
            kind = rng.random()
            if kind < 0.3 and files:
                changes[rng.choice(sorted(files))] = None
            elif kind < 0.4 and files:  # a folder replaced by a file of its name
                folder = rng.choice(sorted(files)).rpartition("/")[0]
                if folder:
                    changes.update(dict.fromkeys([p for p in files if p.startswith(folder + "/")]))
                    changes[folder] = (0o100644, rng.choice(blobs))
            else:
                mode = rng.choice([0o100644, 0o100755, 0o120000])
                path = "/".join(rng.choice(names) for _ in range(rng.randint(1, 3)))
                # Whatever stands in the way goes, as on disk.
                for p in [*files, *changes]:
                    if p.startswith(path + "/") or path.startswith(p + "/"):
                        if p in files:
                            changes[p] = None
                        else:
                            changes.pop(p)
                changes[path] = (mode, rng.choice(blobs))
        new_files = dict(files)
        for p, e in changes.items():
            if e is None:
                new_files.pop(p, None)
        for p, e in changes.items():
            if e is not None:
                new_files[p] = e
        want = _git_tree(env, new_files)
        made = trees.update(tree, changes)
        assert made == want, changes
        # The same records, in git's order.
        assert (
            trees.diff(tree, made)
            == _git_out(env, "diff-tree", "-r", "-z", "--no-renames", tree, made).split(b"\0")[:-1]
        )
        tree, files = made, new_files
    assert trees.update(tree, dict.fromkeys(files)) == EMPTY_TREE
    # Each update wrote one pack (the last: the empty tree), which git reads and checks as its own.
    packs = sorted((git_dir / "objects" / "pack").glob("pack-*.idx"))
    assert len(packs) == 41
    for idx in packs:
        _git_out(env, "verify-pack", str(idx))
    _git_out(env, "fsck", "--strict", "--no-dangling")


def test_a_big_diff_is_left_to_git(tmp_path: Path) -> None:
    git_dir, env = _repo(tmp_path)
    files = {f"d{i}/f": (0o100644, _blob(env, b"%d\n" % i)) for i in range(20)}
    tree = _git_tree(env, files)
    trees = _trees(git_dir, tmp_path)
    assert trees.diff(EMPTY_TREE, tree, max_reads=5) is None
    assert len(trees.diff(EMPTY_TREE, tree, max_reads=50) or []) == 40


def test_the_long_lived_reader_reads_objects_written_after_it_started_loose_and_packed(
    tmp_path: Path,
) -> None:
    """Packed objects are read by the long-lived ``cat-file``: packs added or replaced after it
    started are found."""
    git_dir, env = _repo(tmp_path)
    first = _blob(env, b"first\n")
    _pack(env, git_dir, [first])  # packed
    assert not (git_dir / "objects" / first[:2] / first[2:]).exists()
    reader = ObjectReader(
        _git.GitRunner(git_dir, tmp_path, tmp_path / "i"),
        lambda: git_dir / "objects",
    )
    try:
        assert reader.read(first) == b"first\n"
        assert reader.started == 1
        loose = _blob(env, b"loose, written later\n")
        assert reader.read(loose) == b"loose, written later\n"
        later = _blob(env, b"packed, written later\n")
        _pack(env, git_dir, [later])  # a new pack beside the one cat-file opened
        assert not (git_dir / "objects" / later[:2] / later[2:]).exists()
        assert reader.read(later) == b"packed, written later\n"
        _pack(env, git_dir, [first, later], replace=True)  # every pack replaced by a new one
        assert len(list((git_dir / "objects" / "pack").glob("*.pack"))) == 1
        assert reader.read(first) == b"first\n"
        assert reader.read(later) == b"packed, written later\n"
        gone = "0123456789abcdef0123456789abcdef01234567"
        with pytest.raises(MissingObject, match="not in the store"):
            reader.read(gone)
    finally:
        reader.close()


def test_blobs_asked_for_ahead_are_read_in_one_round_trip_and_any_other_order_still_reads_right(
    tmp_path: Path,
) -> None:
    """``ask_ahead`` sends every request at once (a restore's packed files: one round trip to
    ``cat-file``, not one each); a read in another
    order, a missing object or a reader that fails part-way through an answer drops what was
    asked and the next reads are right."""
    git_dir, env = _repo(tmp_path)
    blobs = {_blob(env, f"blob {i}\n".encode() * (i + 1)): f"blob {i}\n".encode() * (i + 1)
             for i in range(6)}  # fmt: skip
    oids = list(blobs)
    _pack(env, git_dir, oids)
    loose = _blob(env, b"a loose one\n")
    blobs[loose] = b"a loose one\n"
    reader = ObjectReader(
        _git.GitRunner(git_dir, tmp_path, tmp_path / "i"),
        lambda: git_dir / "objects",
    )
    requests: list[bytes] = []
    try:
        assert reader.read(oids[0]) == blobs[oids[0]]
        proc = reader._proc
        assert proc is not None and proc.stdin is not None
        real_write = proc.stdin.write

        def write(data: bytes) -> int:
            requests.append(bytes(data))
            return real_write(data)

        proc.stdin.write = write  # type: ignore[method-assign,assignment]
        asked = [*oids, loose]
        reader.ask_ahead(asked)
        assert [reader.read(o) for o in asked] == [blobs[o] for o in asked]
        assert len(requests) == 1 and reader.started == 1  # one write of every request
        # Out of order: the answers asked for are dropped with the process.
        reader.ask_ahead(oids[:3])
        assert reader.read(oids[2]) == blobs[oids[2]]
        assert reader.read(oids[0]) == blobs[oids[0]]
        assert reader.started == 2
        # A missing object among them: it is missing, the others still read.
        gone = "0123456789abcdef0123456789abcdef01234567"
        reader.ask_ahead([gone, oids[1]])
        with pytest.raises(MissingObject):
            reader.read(gone)
        assert reader.read(oids[1]) == blobs[oids[1]]

        # A reader that fails half-way through an answer (a full disk).
        class Full:
            def write(self, data: bytes) -> int:
                raise OSError(28, "No space left on device")

        reader.ask_ahead(oids[3:])
        with pytest.raises(OSError, match="No space"):
            reader.read_to(oids[3], Full())
        # The next one asked for reads right (not the rest of the failed answer).
        assert [reader.read(o) for o in oids[4:]] == [blobs[o] for o in oids[4:]]
        assert reader.read(oids[3]) == blobs[oids[3]]
    finally:
        reader.close()


def test_a_pack_written_in_place_replaces_a_half_written_one_of_its_name_whole(
    tmp_path: Path,
) -> None:
    """A scan's pack is created in place (its index, renamed into place last, is what makes git
    see it); a file of the same name left half written by a killed writer is replaced whole."""
    git_dir, env = _repo(tmp_path)
    batch = ObjectBatch()
    oids = [batch.add("blob", f"blob {i}\n".encode() * 40) for i in range(5)]
    pack, _idx, name = pack_bytes([(o, k, c) for o, (k, c) in batch.objects.items()])
    folder = git_dir / "objects" / "pack"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"pack-{name}.pack").write_bytes(pack[: len(pack) // 2])  # a killed writer's
    batch.write(git_dir / "objects")
    assert (folder / f"pack-{name}.pack").read_bytes() == pack
    _git_out(env, "verify-pack", str(folder / f"pack-{name}.idx"))
    got = _git_out(env, "cat-file", "--batch", input="".join(o + "\n" for o in oids).encode())
    assert got.count(b" blob ") == 5
    assert [p.name for p in folder.iterdir() if ".tmp" in p.name] == []
    again = ObjectBatch()  # the same objects again: the same pack, written whole again
    for i in range(5):
        again.add("blob", f"blob {i}\n".encode() * 40)
    again.write(git_dir / "objects")
    _git_out(env, "verify-pack", str(folder / f"pack-{name}.idx"))


def test_hashing_a_file_changed_since_the_walk_is_left_to_git(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("walked\n")
    st = os.lstat(tmp_path / "f")
    key = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode)
    blob = subprocess.run(
        ["git", "hash-object", "--stdin"], input=b"walked\n", capture_output=True, check=True
    ).stdout.decode()
    made = {"f": ((0o100644, blob.strip()), b"walked\n")}
    assert hash_files(str(tmp_path), ["f"], {"f": key}) == made
    (tmp_path / "f").write_text("changed after the walk\n")
    assert hash_files(str(tmp_path), ["f"], {"f": key}) is None


# ---------------------------------------------------------------------------- restore


def _project(ws: Path) -> None:
    for d in range(3):
        (ws / f"d{d}" / "sub").mkdir(parents=True)
        for f in range(4):
            (ws / f"d{d}" / f"f{f}.txt").write_text(f"{d} {f}\n")
            (ws / f"d{d}" / "sub" / f"g{f}.txt").write_text(f"sub {d} {f}\n")


def _five(ws: Path, n: int) -> None:
    """3 files modified, 1 deleted, 1 added (the benchmark's restore)."""
    for f in range(3):
        with open(ws / "d0" / f"f{f}.txt", "a") as fh:
            fh.write(f"edit {n}\n")
    (ws / "d1" / "sub" / f"g{n}.txt").unlink()
    (ws / "d2" / f"new{n}.txt").write_text(f"new {n}\n")


def _lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_a_small_restore_in_a_process_that_scanned_before_starts_no_git_process(
    tmp_path: Path, watch_mode: bool, git_path_log: Path
) -> None:
    """With no change since the last scan, and after 5 files changed that no capture saw (the
    safety snapshot holds them): no git process at all (the store's one long-lived ``cat-file``
    is started once, by the first restore that needs a packed object); and the index catches up
    with the next capture that runs git."""
    ws = tmp_path / "ws"
    _project(ws)
    store = ShadowStore.open(ws, home=tmp_path / "home")
    first = store.capture()
    _five(ws, 1)
    second = store.capture()
    store.restore(first.commit)
    assert [line.split()[:2] for line in _lines(git_path_log) if "cat-file" in line] in (
        [],
        [["cat-file", "--batch"]],
    )
    before = len(_lines(git_path_log))
    store.restore(second.commit)  # nothing changed since the last scan
    assert _lines(git_path_log)[before:] == []
    want = tree_digest(ws)
    assert want == tree_digest(_materialized(store, second.commit, tmp_path / "m2"))
    _five(ws, 2)
    edited = tree_digest(ws)
    before = len(_lines(git_path_log))
    res = store.restore(first.commit)  # after edits no capture saw
    assert _lines(git_path_log)[before:] == []
    assert tree_digest(ws) == tree_digest(_materialized(store, first.commit, tmp_path / "m1"))
    assert tree_digest(_materialized(store, res.safety.commit, tmp_path / "safety")) == edited
    # The index entries left for later reach git with the next capture that runs it, and a
    # new process (which reads the index) finds the same tree.
    (ws / "d0" / "f3.txt").write_text("a later edit\n")
    third = store.capture()
    store.close()
    again = ShadowStore.open(ws, home=tmp_path / "home")
    assert again.capture().tree == third.tree
    assert tree_digest(_materialized(again, third.commit, tmp_path / "m3")) == tree_digest(ws)
    again.close()


def _materialized(store: ShadowStore, commit: str, dest: Path) -> Path:
    store.materialize(commit, dest)
    return dest


def test_a_restore_after_an_edit_no_capture_saw_keeps_the_edit_in_its_safety_snapshot(
    tmp_path: Path, watch_mode: bool
) -> None:
    """The safety snapshot made in this process holds the edit, a deleted file and a new one,
    byte for byte; undo brings them back; a store opened afterwards agrees."""
    ws = tmp_path / "ws"
    _project(ws)
    store = ShadowStore.open(ws, home=tmp_path / "home")
    first = store.capture()
    time.sleep(0.05)
    (ws / "d0" / "f0.txt").write_bytes(b"an edit no capture saw\n")
    (ws / "d1" / "f1.txt").unlink()
    (ws / "d2" / "sub" / "new.txt").write_bytes(b"new\n")
    os.symlink("f0.txt", ws / "d0" / "link")
    edited = tree_digest(ws)
    res = store.restore(first.commit)
    assert tree_digest(ws) == tree_digest(_materialized(store, first.commit, tmp_path / "first"))
    assert tree_digest(_materialized(store, res.safety.commit, tmp_path / "safety")) == edited
    store.undo()
    assert tree_digest(ws) == edited
    store.close()
    with ShadowStore.open(ws, home=tmp_path / "home") as again:
        assert again.capture().tree == res.safety.tree


def test_a_big_restore_after_a_small_one_keeps_the_index_right_regression_entry_left_behind(
    tmp_path: Path, watch_mode: bool
) -> None:
    """A small restore leaves its index entries for later; a big restore (told to git at once)
    of the same path must drop the older entry, or the next capture that runs git puts the
    small restore's content back into the index: a snapshot that differs from the disk."""
    ws = tmp_path / "ws"
    _project(ws)
    for i in range(70):
        (ws / "many" / f"m{i}.txt").parent.mkdir(exist_ok=True)
        (ws / "many" / f"m{i}.txt").write_text(f"{i}\n")
    store = ShadowStore.open(ws, home=tmp_path / "home")
    base = store.capture()
    (ws / "d0" / "f0.txt").write_text("small\n")
    small = store.capture()
    (ws / "d0" / "f0.txt").write_text("big\n")
    for i in range(70):
        (ws / "many" / f"m{i}.txt").write_text(f"big {i}\n")
    big = store.capture()
    store.restore(base.commit)
    store.restore(small.commit)  # one entry: left for later
    store.restore(big.commit)  # 71 entries: told to git now
    (ws / "d1" / "f0.txt").write_text("an edit\n")
    for n in range(140):  # too many for the in-process scan: git runs, with what waits
        (ws / "e" / f"{n}.txt").parent.mkdir(exist_ok=True)
        (ws / "e" / f"{n}.txt").write_text(f"{n}\n")
    after = store.capture()
    assert tree_digest(_materialized(store, after.commit, tmp_path / "after")) == tree_digest(ws)
    store.close()


def test_the_small_packs_of_restores_are_rolled_together_by_the_next_capture(
    tmp_path: Path, watch_mode: bool
) -> None:
    """Each restore after edits of 40 files in 40 folders that no capture saw writes its safety
    snapshot's new objects (81 of them) as one small pack, not as 81 loose files; the packs do
    not pile up: past ``MAX_PACKS``, a capture rolls them."""
    ws = tmp_path / "ws"
    _project(ws)
    for i in range(40):
        (ws / "wide" / f"w{i}").mkdir(parents=True)
        (ws / "wide" / f"w{i}" / "f.txt").write_text(f"{i}\n")
    store = ShadowStore.open(ws, home=tmp_path / "home")
    first = store.capture()
    packs = store.git_dir / "objects" / "pack"
    for n in range(MAX_PACKS + 3):
        (ws / "d0" / "f0.txt").write_text(f"edit {n}\n")
        for i in range(40):
            (ws / "wide" / f"w{i}" / "f.txt").write_text(f"{i} edit {n}\n")
        store.restore(first.commit)
    assert len(list(packs.glob("*.pack"))) > MAX_PACKS
    (ws / "d1" / "f1.txt").write_text("a capture\n")
    store.capture()
    assert len(list(packs.glob("*.pack"))) <= MAX_PACKS
    store.fsck()
    for n in (0, MAX_PACKS + 2):  # every safety snapshot is whole
        safety = [s for s in store.log() if s.kind == "safety"][n]
        store.materialize(safety.commit, tmp_path / f"s{n}")
        assert (tmp_path / f"s{n}" / "d0" / "f0.txt").read_text().startswith("edit ")
    store.close()


def test_opening_a_store_removes_the_temp_files_a_killed_writer_left_beside_its_objects(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    _project(ws)
    ShadowStore.open(ws, home=tmp_path / "home").capture()
    child = subprocess.Popen(["true"])
    child.wait()  # (its pid is no one's now)
    store = ShadowStore.open(ws, home=tmp_path / "home")
    packs = store.git_dir / "objects" / "pack"
    left = packs / f".pack-{'1' * 40}.pack.tmp-{child.pid}-0a0b0c0d"
    mine = packs / f".pack-{'2' * 40}.pack.tmp-{os.getpid()}-0a0b0c0d"
    # A loose object's temporary file goes beside the object folder (a search worker's store
    # writes there from its own folder, maybe on another filesystem).
    loose = store.git_dir / f".{'3' * 38}.tmp-{child.pid}-0a0b0c0d"
    left.write_bytes(b"half a pack")
    mine.write_bytes(b"a live writer's")
    loose.write_bytes(b"half an object")
    store.close()
    ShadowStore.open(ws, home=tmp_path / "home").close()
    assert not left.exists() and mine.exists() and not loose.exists()
