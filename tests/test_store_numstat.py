"""Line counts of a change without git (``store/_numstat.py``) against ``git diff-tree
--numstat`` on random edits: many repeated lines (xdiff's discarding of lines with many equals),
last lines without a newline, empty files, binary files, added and deleted files."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

from treesearch.store import _git
from treesearch.store._git import GitRunner, isolated_env
from treesearch.store._numstat import _myers_cost, numstat, records
from treesearch.store._objects import write_object
from treesearch.store._trees import EMPTY_TREE, store_trees

POOL = [b"\n", b"}\n", b"    return x\n", b"pass\n", b"x = 1\n", b"# note\n", b"end"]


def _random_text(rng: random.Random) -> bytes:
    lines = []
    for _ in range(rng.choice([0, 1, 3, 10, 40, 120])):
        if rng.random() < 0.6:
            lines.append(rng.choice(POOL[:-1]))
        else:
            lines.append(f"line {rng.randint(0, 60)}\n".encode())
    data = b"".join(lines)
    if data and rng.random() < 0.2:
        data = data[:-1]  # no newline at the end
    return data


def _edited(rng: random.Random, data: bytes) -> bytes:
    lines = data.split(b"\n")
    for _ in range(rng.randint(1, 8)):
        i = rng.randint(0, len(lines))
        action = rng.random()
        if action < 0.35 and i < len(lines):
            del lines[i]
        elif action < 0.7:
            lines.insert(i, rng.choice([b"", b"}", b"pass", f"new {rng.randint(0, 9)}".encode()]))
        elif i < len(lines):
            lines[i] = rng.choice([b"", b"}", b"changed"])
    return b"\n".join(lines)


def _git_numstat(
    tmp_path: Path, pairs: dict[str, tuple[bytes | None, bytes | None]]
) -> dict[str, tuple[int, int, bool]]:
    """``git diff-tree --numstat`` of every pair (path -> (old, new); ``None``: no such side)."""
    git_dir = tmp_path / "repo.git"
    if not git_dir.exists():
        subprocess.run(
            [_git.git_executable(), "init", "-q", "--bare", str(git_dir)],
            check=True,
            env=isolated_env(),
        )
    git = GitRunner(git_dir, tmp_path, tmp_path / "index")
    trees = store_trees(git)
    try:
        sides: list[dict[str, tuple[int, str]]] = [{}, {}]
        for p, pair in pairs.items():
            for i, data in enumerate(pair):
                if data is not None:  # (b"": an empty file, which exists)
                    blob = write_object(trees.objects_dir(), "blob", data, tmp_dir=tmp_path)
                    sides[i][p] = (0o100644, blob)
        ta, tb = trees.update(EMPTY_TREE, sides[0]), trees.update(EMPTY_TREE, sides[1])
        out = git.run(["diff-tree", "-r", "-z", "--no-renames", "--numstat", ta, tb])
    finally:
        trees.objects.close()
    want = {}
    for f in out.split(b"\0"):
        if f:
            added, deleted, path = f.decode().split("\t")
            want[path] = (0, 0, True) if added == "-" else (int(added), int(deleted), False)
    return want


def test_numstat_counts_what_git_where_xdiff_discards_lines_with_many_equals(
    tmp_path: Path,
) -> None:
    """Unique lines among many blank lines, a region replaced by other unique lines and blanks:
    xdiff discards blank lines in such runs, so git's counts are not those of a minimal diff
    for some of them (checked: the test would pass a minimal diff otherwise)."""
    rng = random.Random(5)
    pairs: dict[str, tuple[bytes | None, bytes | None]] = {}
    for i in range(400):
        share = rng.random()
        a = [
            b"\n" if rng.random() < share else f"u{rng.randint(0, 10**6)}\n".encode()
            for _ in range(rng.randint(5, 60))
        ]
        b = list(a)
        s = rng.randint(0, len(a) - 1)
        b[s : s + rng.randint(1, 10)] = [
            b"\n" if rng.random() < 0.3 else f"v{rng.randint(0, 10**6)}\n".encode()
            for _ in range(rng.randint(0, 12))
        ]
        pairs[f"f{i:03d}"] = (b"".join(a), b"".join(b))
    want = _git_numstat(tmp_path, pairs)
    not_minimal = 0
    for path, (old, new) in pairs.items():
        assert old is not None and new is not None
        if old == new:
            continue
        assert numstat(old, new) == want[path], (path, old, new)
        ra, rb = records(old), records(new)
        cost = _myers_cost(ra, rb)
        assert cost is not None
        common = (len(ra) + len(rb) - cost) // 2
        not_minimal += (len(rb) - common, len(ra) - common) != want[path][:2]
    assert not_minimal >= 5


def test_numstat_counts_what_git_diff_tree_counts_on_random_edits(tmp_path: Path) -> None:
    rng = random.Random(2026)
    pairs: dict[str, tuple[bytes | None, bytes | None]] = {}
    for i in range(400):
        kind = rng.random()
        a = _random_text(rng)
        b = _edited(rng, a) if kind < 0.8 else _random_text(rng)
        if kind > 0.97:
            b = b[:10] + b"\0" + b[10:]  # binary
        path = f"f{i:03d}"
        if kind < 0.05:
            pairs[path] = (None, b)
        elif kind < 0.1:
            pairs[path] = (a, None)
        else:
            pairs[path] = (a, b)
    want = _git_numstat(tmp_path, pairs)
    counted = skipped = 0
    for path, (old, new) in pairs.items():
        got = numstat(old, new)
        if got is None:
            skipped += 1
            continue
        if old == new:
            assert got == (0, 0, False) and path not in want
            continue
        assert got == want[path], (path, old, new)
        counted += 1
    assert counted >= 300 and skipped <= 20
