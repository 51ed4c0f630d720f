"""Objects read from packs in the process (``_packread.py``) are exactly what git reads."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest
from conftest import clean_git_env

from treesearch.store import ShadowStore
from treesearch.store._git import GitFailed, GitRunner
from treesearch.store._packread import PackSet
from treesearch.store._trees import ObjectReader


def _run(env: dict[str, str], *args: str, input: bytes | None = None) -> bytes:
    return subprocess.run(
        ["git", *args], env=env, input=input, capture_output=True, check=True
    ).stdout


def _cat(env: dict[str, str], oids: list[str]) -> dict[str, tuple[bytes, bytes]]:
    """Every object as ``git cat-file --batch`` gives it: id -> (type, content)."""
    out = _run(env, "cat-file", "--batch", input="".join(o + "\n" for o in oids).encode())
    got: dict[str, tuple[bytes, bytes]] = {}
    i = 0
    for oid in oids:
        nl = out.index(b"\n", i)
        _oid, kind, size = out[i:nl].split()
        got[oid] = (kind, out[nl + 1 : nl + 1 + int(size)])
        i = nl + 1 + int(size) + 1
    return got


@pytest.mark.parametrize("deltas", ["ofs-delta", "ref-delta"])
def test_every_object_of_a_deltified_pack_reads_as_git_reads_it(
    tmp_path: Path, deltas: str
) -> None:
    """Similar blobs and trees packed with deltas (against earlier entries by offset, or by
    id): every commit, tree and blob is read here byte for byte as ``cat-file`` gives it."""
    rng = random.Random(7)
    git_dir = tmp_path / "repo.git"
    env = clean_git_env(GIT_DIR=str(git_dir), GIT_INDEX_FILE=str(tmp_path / "index"))
    _run(env, "init", "-q", "--bare", str(git_dir))
    lines = [f"line {i} {rng.random()}\n".encode() for i in range(400)]
    commits = []
    for round_ in range(12):
        for k in range(3):
            lines[rng.randrange(len(lines))] = f"edit {round_} {k}\n".encode()
        files = {f"d{j}/f{i}.txt": b"".join(lines[i * 7 : i * 7 + 200]) for j in range(2)
                 for i in range(20)}  # fmt: skip
        files["big.bin"] = bytes(rng.randrange(256) for _ in range(70_000 + round_))
        info = b""
        for path, data in files.items():
            oid = _run(env, "hash-object", "-w", "--stdin", input=data).decode().strip()
            info += f"100644 {oid}\t{path}\0".encode()
        _run(env, "read-tree", "--empty")
        _run(env, "update-index", "-z", "--index-info", input=info)
        tree = _run(env, "write-tree").decode().strip()
        commits.append(_run(env, "commit-tree", tree, "-m", f"r{round_}").decode().strip())
    listed = _run(env, "rev-list", "--objects", *commits).decode().split("\n")
    oids = sorted({line.split()[0] for line in listed if line})
    pack_args = ["pack-objects", "-q", "--window=20", "--depth=30"]
    if deltas == "ofs-delta":
        pack_args.append("--delta-base-offset")
    _run(
        env, *pack_args, str(git_dir / "objects" / "pack" / "pack"), input="\n".join(oids).encode()
    )
    _run(env, "prune-packed")
    verify = _run(env, "verify-pack", "-v", *map(str, (git_dir / "objects" / "pack").glob("*.idx")))
    assert b"chain length" in verify  # there are deltas to apply
    want = _cat(env, oids)
    packs = PackSet(lambda: git_dir / "objects")
    try:
        for oid in oids:
            assert packs.read(oid, 1 << 30) == want[oid], oid
        assert packs.read("0" * 40, 1 << 30) is None
        assert packs.read(oids[0], 3) is None  # over the limit: left to git
    finally:
        packs.close()


def test_a_damaged_pack_entry_is_left_to_git_which_reports_it(tmp_path: Path) -> None:
    git_dir = tmp_path / "repo.git"
    env = clean_git_env(GIT_DIR=str(git_dir))
    _run(env, "init", "-q", "--bare", str(git_dir))
    oid = _run(env, "hash-object", "-w", "--stdin", input=b"some content\n" * 50).decode().strip()
    _run(env, "pack-objects", "-q", str(git_dir / "objects" / "pack" / "pack"), input=oid.encode())
    _run(env, "prune-packed")
    pack = next((git_dir / "objects" / "pack").glob("*.pack"))
    data = bytearray(pack.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside the entry's deflated data
    pack.chmod(0o644)
    pack.write_bytes(bytes(data))
    packs = PackSet(lambda: git_dir / "objects")
    assert packs.read(oid, 1 << 20) is None
    packs.close()
    reader = ObjectReader(GitRunner(git_dir, tmp_path, tmp_path / "i"), lambda: git_dir / "objects")
    try:
        with pytest.raises(GitFailed):
            reader.read(oid)
    finally:
        reader.close()


def test_a_restore_reads_packed_files_without_cat_file(tmp_path: Path, git_path_log: Path) -> None:
    """The target's files are in the store's packs (a big first capture packs them): a restore
    reads them in the process, so no ``cat-file`` is started."""
    ws = tmp_path / "ws"
    for i in range(300):
        (ws / f"d{i % 10}").mkdir(parents=True, exist_ok=True)
        (ws / f"d{i % 10}" / f"f{i}.txt").write_text(f"file {i}\n")
    store = ShadowStore.open(ws, home=tmp_path / "home")
    first = store.capture()
    assert list((store.git_dir / "objects" / "pack").glob("*.pack"))  # a bulk check-in
    for i in range(0, 300, 60):
        (ws / f"d{i % 10}" / f"f{i}.txt").write_text("changed\n")
    store.capture()
    before = store._scanner.trees.objects.started
    git_path_log.write_text("")
    store.restore(first.commit)
    assert all((ws / f"d{i % 10}" / f"f{i}.txt").read_text() == f"file {i}\n" for i in range(300))
    assert store._scanner.trees.objects.started == before
    assert "cat-file" not in git_path_log.read_text()
    store.close()
