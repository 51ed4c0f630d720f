#!/usr/bin/env python3
"""Snapshot-store benchmark: our shadow store against its floor and the naive ways.

Usage::

    python experiments/benchmarks/snapshot.py [--sizes 1000,10000,50000] [--reps 5]
        [--checkout PATH ...] [--quick] [--profile] [--tmp DIR]

On generated trees (fixed seed, nested folders of 20-50 files, text files of 100 B - 8 KB and a few
larger ones) and on copies of any checkout given, one run measures the medians of:

- ours: capture (cold, no change, after 2 changed files), restore after 5 changed files (safety
  snapshot included), diff (snapshot..snapshot and snapshot..live);
- the naive ways: ``shutil.copytree`` snapshot, ``rmtree`` + ``copytree`` restore, plain git
  (``add -A`` + ``write-tree`` into a separate ``GIT_DIR``, ``read-tree --reset -u``);
- the floor: a ``scandir`` walk that ``lstat``s every file; for cold captures reading and hashing
  every byte as git does (sha1 of ``blob <size>\\0`` + content), and that plus zlib level 1;
- disk: 20 snapshots of 2 changed files each against the first snapshot;
- on a git workspace: our first capture (seeded from the user's index) against ``git add -A``.

It prints one table (ratios against the floor measured in the same run) and a PASS/FAIL list of
the targets at 10k files. Missed targets never change the exit status. The OS page cache is not
dropped; every timed operation runs once untimed first (operations that build a whole new store
or copy rely on the floor's read of every byte instead), so all numbers are warm-cache numbers.
Nothing of the user's is touched: trees are generated, and checkouts copied, into a temp folder.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import math
import os
import platform
import pstats
import random
import shutil
import stat
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    from treesearch.store import ShadowStore, Snapshot
    from treesearch.store import _git as store_git
except ImportError:  # pragma: no cover - set-up hint only
    sys.exit("cannot import treesearch: run `pip install -e '.[dev]'` in the repository first")

SEED = 20240601
TARGET_SIZE = 10_000
MiB = 1024 * 1024
GENERATED = "generated"
GIT_WS = "git workspace"
GIT_WS_PACKED = "git workspace, packed"

# Operation names (rows of the table).
FLOOR_WALK = "floor: scandir walk + lstat"
FLOOR_HASH = "floor: walk + read + sha1"
FLOOR_ZLIB = "floor: walk + read + sha1 + zlib-1"
OURS_COLD = "ours: capture, cold (new store)"
OURS_COLD_SEEDED = "ours: capture, cold (new store, seeded from user index)"
OURS_NOCHANGE = "ours: capture, no change"
OURS_TWO = "ours: capture, 2 files changed"
OURS_RESTORE = "ours: restore 5 files (3M 1D 1A), safety incl."
OURS_NOCHANGE_NOWATCH = "ours, watcher off: capture, no change"
OURS_RESTORE_NOWATCH = "ours, watcher off: restore 5 files, safety incl."
OURS_DIFF_SNAPS = "ours: diff snapshot..snapshot (5 files)"
OURS_DIFF_LIVE = "ours: diff snapshot..live (5 files)"
COPY_SNAP = "copytree: snapshot"
COPY_RESTORE = "copytree: restore (rmtree + copytree)"
GIT_COLD = "git: add -A + write-tree, cold"
GIT_ADD_COLD = "git: add -A alone, cold"
GIT_NOCHANGE = "git: add -A + write-tree, no change"
GIT_TWO = "git: add -A + write-tree, 2 files changed"
GIT_RESTORE = "git: read-tree --reset -u, 5 files (keeps 1A)"
GIT_RESTORE_SAFE = "git: add -A + write-tree + read-tree -u, 5 files"
OURS_FIRST_GITWS = "ours: first capture (seeded from user index)"

# Which floor each operation is compared with: cold ones with read+hash, the rest with the walk.
COLD_OPS = {OURS_COLD, OURS_COLD_SEEDED, GIT_COLD, GIT_ADD_COLD, OURS_FIRST_GITWS, FLOOR_ZLIB}
# Operations that write a whole new store/copy each time: no per-operation warm-up run (it would
# only re-warm the page cache, which the floor's read of every byte, run first, already did).
NO_WARMUP = {
    OURS_COLD,
    OURS_COLD_SEEDED,
    OURS_FIRST_GITWS,
    GIT_COLD,
    GIT_ADD_COLD,
    COPY_SNAP,
    COPY_RESTORE,
}


# ---------------------------------------------------------------------- results


@dataclass(frozen=True)
class Timing:
    """Seconds of the timed repetitions of one operation (the warm-up run excluded)."""

    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def low(self) -> float:
        return min(self.samples)

    @property
    def high(self) -> float:
        return max(self.samples)


@dataclass
class Row:
    """One line of the table."""

    workspace: str
    files: int
    op: str
    timing: Timing
    note: str = ""


@dataclass
class DiskRow:
    """Store size after the first snapshot and after 20 more of 2 changed files each."""

    workspace: str
    files: int
    workspace_bytes: int
    first: int
    after: int
    snapshots: int

    @property
    def ratio(self) -> float:
        return self.after / self.first if self.first else math.inf


@dataclass
class Results:
    rows: list[Row] = field(default_factory=list)
    disk: list[DiskRow] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    elapsed: dict[str, float] = field(default_factory=dict)

    def find(self, workspace: str, files: int, op: str) -> Row | None:
        for row in self.rows:
            if row.workspace == workspace and row.op == op and row.files == files:
                return row
        return None


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------- timing


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def repeat(reps: int, one: Callable[[], float], *, warmup: bool = True) -> Timing:
    """Run ``one`` (it does its own untimed set-up and returns the timed seconds) ``reps`` times,
    after one untimed warm-up run unless ``warmup`` is false."""
    if warmup:
        one()
    return Timing(tuple(one() for _ in range(reps)))


# ---------------------------------------------------------------------- generated trees

_DIR_WORDS = [
    "core", "utils", "api", "models", "views", "tests", "docs", "scripts", "lib", "src",
    "internal", "handlers", "services", "config", "data", "io", "net", "parser", "compiler",
    "runtime", "cli", "plugins", "storage", "cache", "auth", "db", "migrations", "schemas",
    "widgets", "components", "hooks", "fixtures", "examples", "tools", "build", "vendor",
]  # fmt: skip
_EXTS = (".py", ".py", ".py", ".py", ".md", ".txt", ".json", ".c", ".h", ".toml", ".js", ".rs")


@dataclass(frozen=True)
class GeneratedTree:
    root: Path
    files: int
    dirs: int
    bytes: int


def _text_pool(rng: random.Random, size: int) -> bytes:
    letters = "abcdefghijklmnopqrstuvwxyz_"
    words = ["".join(rng.choices(letters, k=rng.randint(2, 10))) for _ in range(3000)]
    lines: list[str] = []
    total = 0
    while total < size:
        line = "    " * rng.randint(0, 3) + " ".join(rng.choices(words, k=rng.randint(1, 12)))
        lines.append(line)
        total += len(line) + 1
    return ("\n".join(lines) + "\n").encode()


def generate_tree(root: Path, n_files: int, seed: int = SEED) -> GeneratedTree:
    """A source-like tree of exactly ``n_files`` entries (a few of them symlinks).

    Folders hold 20-50 entries each and nest up to 5 deep; files are text of 100 B - 8 KB
    (log-uniform), about 1 in 500 is 32 KB - 1 MB, about 1 in 100 is an executable script. Every
    file starts with a unique line, so no two blobs are equal. Modification times are set one day
    back, as in a checkout that was not just written (git's stat cache then trusts them).
    """
    rng = random.Random(seed)
    pool = _text_pool(rng, 3 * MiB)
    root.mkdir(parents=True)
    plan: list[tuple[str, int]] = [("", min(n_files, rng.randint(5, 12)))]
    remaining = n_files - plan[0][1]
    depth = {"": 0}
    parents = [""]
    while remaining > 0:
        parent = rng.choice(parents)
        name = f"{rng.choice(_DIR_WORDS)}_{len(depth)}"
        d = f"{parent}/{name}" if parent else name
        depth[d] = depth[parent] + 1
        if depth[d] < 5:
            parents.append(d)
        count = min(remaining, rng.randint(20, 50))
        plan.append((d, count))
        remaining -= count
    old = time.time() - 86400
    total = 0
    for d, count in plan:
        folder = root / d if d else root
        folder.mkdir(parents=True, exist_ok=True)
        written: list[str] = []
        for i in range(count):
            if written and rng.random() < 0.001:
                name = f"link_{i}"
                os.symlink(rng.choice(written), folder / name)
                os.utime(folder / name, (old, old), follow_symlinks=False)
                continue
            script = rng.random() < 0.01
            ext = ".sh" if script else rng.choice(_EXTS)
            name = f"{rng.choice(_DIR_WORDS)}_{i}{ext}"
            if rng.random() < 0.002:
                size = int(math.exp(rng.uniform(math.log(32 * 1024), math.log(MiB))))
            else:
                size = int(math.exp(rng.uniform(math.log(100), math.log(8192))))
            head = f"# {d}/{name} {rng.getrandbits(64):016x}\n".encode()
            start = rng.randrange(0, len(pool) - size)
            data = head + pool[start : start + max(0, size - len(head))]
            path = folder / name
            with open(path, "wb") as fh:
                fh.write(data)
            if script:
                os.chmod(path, 0o755)
            os.utime(path, (old, old))
            written.append(name)
            total += len(data)
    return GeneratedTree(root, n_files, len(plan), total)


# ---------------------------------------------------------------------- workspace changes


@dataclass(frozen=True)
class FiveChange:
    modified: tuple[str, ...]
    deleted: str
    added: str


class Mutator:
    """Seeded edits of the files a snapshot holds (so ignored files are never picked)."""

    def __init__(self, candidates: Sequence[str], seed: int) -> None:
        self.candidates = sorted(candidates)
        self.rng = random.Random(seed)
        self.counter = 0

    def modify(self, root: Path, k: int) -> list[str]:
        paths = self.rng.sample(self.candidates, k)
        for p in paths:
            self._append(root / p)
        return paths

    def five(self, root: Path) -> FiveChange:
        """3 files modified, 1 deleted, 1 added."""
        picked = self.rng.sample(self.candidates, 4)
        for p in picked[:3]:
            self._append(root / p)
        os.unlink(root / picked[3])
        self.counter += 1
        folder = picked[0].rpartition("/")[0]
        added = f"{folder}/bench_added_{self.counter}.py" if folder else f"bench_{self.counter}.py"
        (root / added).write_bytes(f"# added {self.counter}\nprint('hello')\n".encode())
        return FiveChange(tuple(picked[:3]), picked[3], added)

    def _append(self, path: Path) -> None:
        self.counter += 1
        with open(path, "ab") as fh:
            fh.write(f"# edit {self.counter}\n".encode())


def _set_umask_modes(root: Path, paths: Sequence[str], umask: int) -> list[str]:
    """Give the regular files ``paths`` the modes a checkout under ``umask`` has; returns them."""
    done = []
    for p in paths:
        full = root / p
        st = full.lstat()
        if stat.S_ISREG(st.st_mode):
            full.chmod((0o777 if st.st_mode & 0o100 else 0o666) & ~umask)
            done.append(p)
    return done


def _is_ignored(path: str, ignored: frozenset[str]) -> bool:
    """``path`` is in ``ignored`` (git's ``ls-files --ignored --directory`` output) or under a
    folder listed there."""
    if path in ignored:
        return True
    parts = path.split("/")
    return any("/".join(parts[:i]) + "/" in ignored for i in range(1, len(parts)))


def check_restored(root: Path, change: FiveChange, what: str, warnings: list[str]) -> None:
    if not (root / change.deleted).exists():
        warnings.append(f"{what}: the deleted file {change.deleted} did not come back")
    if (root / change.added).exists():
        warnings.append(f"{what}: the added file {change.added} is still there")


# ---------------------------------------------------------------------- the floor


def _entries(
    root: str, ignored: frozenset[str] = frozenset()
) -> Iterator[tuple[os.DirEntry[str], os.stat_result]]:
    """Every non-folder entry below ``root`` with its lstat; ``.git`` folders and the paths in
    ``ignored`` (as ``git ls-files --ignored --directory`` lists them) are skipped."""
    stack = [(root, "")]
    while stack:
        folder, rel = stack.pop()
        with os.scandir(folder) as it:
            for entry in it:
                if entry.name == ".git":
                    continue
                st = entry.stat(follow_symlinks=False)
                is_dir = stat.S_ISDIR(st.st_mode)
                if ignored and (rel + entry.name + ("/" if is_dir else "")) in ignored:
                    continue
                if is_dir:
                    stack.append((entry.path, rel + entry.name + "/"))
                else:
                    yield entry, st


def floor_walk(root: Path, ignored: frozenset[str] = frozenset()) -> int:
    return sum(1 for _ in _entries(str(root), ignored))


def floor_read_hash(root: Path, compress: bool, ignored: frozenset[str] = frozenset()) -> int:
    n = 0
    for entry, st in _entries(str(root), ignored):
        if stat.S_ISLNK(st.st_mode):
            data = os.fsencode(os.readlink(entry.path))
        elif stat.S_ISREG(st.st_mode):
            with open(entry.path, "rb") as fh:
                data = fh.read()
        else:
            continue
        h = hashlib.sha1(b"blob %d\0" % len(data))
        h.update(data)
        h.digest()
        if compress:
            zlib.compress(data, 1)
        n += 1
    return n


def tree_usage(root: Path, ignored: frozenset[str] = frozenset()) -> tuple[int, int]:
    """(files, bytes on disk) below ``root``, ``.git`` and ``ignored`` excluded."""
    files = 0
    used = 0
    for _entry, st in _entries(str(root), ignored):
        files += 1
        used += st.st_blocks * 512
    return files, used


# ---------------------------------------------------------------------- plain git


class PlainGit:
    """git with a separate GIT_DIR/GIT_INDEX_FILE on a work tree; only PATH and HOME inherited."""

    def __init__(self, git_dir: Path, work_tree: Path) -> None:
        self.work_tree = work_tree
        self.env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": os.environ.get("HOME", os.devnull),
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_DIR": str(git_dir),
            "GIT_INDEX_FILE": str(git_dir / "bench-index"),
            "GIT_WORK_TREE": str(work_tree),
        }

    def run(self, *args: str) -> str:
        return run_git(list(args), self.env, self.work_tree)

    def init(self) -> None:
        self.run("init", "--quiet")

    def capture(self) -> str:
        self.run("add", "-A")
        return self.run("write-tree")


def isolated_git_env(**extra: str) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": os.environ.get("HOME", os.devnull),
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    env.update(extra)
    return env


def run_git(args: list[str], env: dict[str, str], cwd: Path, ok: Sequence[int] = (0,)) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, check=False)
    if proc.returncode not in ok:
        raise RuntimeError(
            f"git {' '.join(args)} exited {proc.returncode}: {proc.stderr.decode(errors='replace')}"
        )
    return os.fsdecode(proc.stdout).strip()


def make_user_repo(root: Path) -> None:
    """Turn ``root`` into a git repository with one commit (the 'git workspace' case).

    Automatic gc is off: with more than 6700 loose objects, ``commit`` would start a detached
    ``gc`` that packs them while the timings run. The objects stay loose, as just committed.
    """
    env = isolated_git_env()
    run_git(["init", "--quiet"], env, root)
    run_git(["add", "-A"], env, root)
    who = ["-c", "user.name=x", "-c", "user.email=x@x", "-c", "commit.gpgSign=false"]
    run_git([*who, "-c", "gc.auto=0", "commit", "--quiet", "--no-verify", "-m", "init"], env, root)


def pack_user_repo(root: Path) -> None:
    """Pack the repository's objects, as a clone or the user's own gc leaves them."""
    run_git(["gc", "--quiet", "--prune=now"], isolated_git_env(), root)


def user_repo_fingerprint(root: Path) -> tuple[bytes, ...]:
    """Bytes of the user's index, HEAD and refs (to check the store never writes them)."""
    git = root / ".git"
    parts = [(git / "index").read_bytes(), (git / "HEAD").read_bytes()]
    for dirpath, _dirs, names in sorted(os.walk(git / "refs")):
        for name in sorted(names):
            p = Path(dirpath) / name
            parts.append(str(p).encode() + b"=" + p.read_bytes())
    return tuple(parts)


# ---------------------------------------------------------------------- naive snapshots


def _ignore_git(_dir: str, names: list[str]) -> set[str]:
    return {".git"} & set(names)


def naive_snapshot(ws: Path, dest: Path) -> None:
    shutil.copytree(ws, dest, symlinks=True, ignore=_ignore_git)


def naive_restore(snap: Path, ws: Path) -> None:
    """rmtree + copytree, sparing a top-level ``.git`` (a plain rmtree when there is none)."""
    with os.scandir(ws) as it:
        for entry in it:
            if entry.name == ".git":
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
    shutil.copytree(snap, ws, symlinks=True, dirs_exist_ok=True)


# ---------------------------------------------------------------------- one workspace


class Bench:
    """All measurements on one workspace (a generated tree or a copied checkout).

    Every contender runs on the same folder, one after the other (ours, then plain git, then
    copytree), so they all see the same files with the same warm page cache.
    """

    def __init__(self, name: str, ws: Path, base: Path, reps: int, results: Results) -> None:
        self.name = name
        self.ws = ws
        self.base = base
        self.reps = reps
        self.results = results
        self._homes = 0
        self.ignored = self._ignored_by_plain_git()
        """What git ignores here (nothing in generated trees): out of the floor and the edits."""
        self.files, self.workspace_bytes = tree_usage(ws, self.ignored)

    def add(self, op: str, timing: Timing, note: str = "", workspace: str | None = None) -> None:
        self.results.rows.append(Row(workspace or self.name, self.files, op, timing, note))
        log(f"  {op:<52} median {timing.median:9.4f} s  {note}")

    def warn(self, msg: str) -> None:
        self.results.warnings.append(f"{self.name} {self.files:,} files: {msg}")
        log(f"  WARNING: {msg}")

    def new_home(self) -> Path:
        self._homes += 1
        return self.base / f"home-{self._homes}"

    # -- floor

    def floor(self) -> None:
        reps, ws, ign = self.reps, self.ws, self.ignored
        self.add(FLOOR_WALK, repeat(reps, lambda: timed(lambda: floor_walk(ws, ign))))
        self.add(FLOOR_HASH, repeat(reps, lambda: timed(lambda: floor_read_hash(ws, False, ign))))
        self.add(FLOOR_ZLIB, repeat(reps, lambda: timed(lambda: floor_read_hash(ws, True, ign))))

    # -- ours

    def _first_capture(self, trees: set[str], hashed: list[int]) -> float:
        """One capture by a new store (timed: ``capture`` only, not ``open``)."""
        home = self.new_home()
        store = ShadowStore.open(self.ws, home=home)
        t0 = time.perf_counter()
        snap = store.capture()
        seconds = time.perf_counter() - t0
        store.close()
        trees.add(snap.tree)
        hashed.append(snap.stats.files_hashed if snap.stats else -1)
        shutil.rmtree(home)
        return seconds

    def ours(self, seeded: bool) -> tuple[str, Mutator | None]:
        """All our operations; returns the tree the workspace ends in and the mutator."""
        reps, ws = self.reps, self.ws
        cold_trees: set[str] = set()
        hashed: list[int] = []
        op = OURS_COLD_SEEDED if seeded else OURS_COLD
        timing = repeat(reps, lambda: self._first_capture(cold_trees, hashed), warmup=False)
        self.add(op, timing, f"hashed {hashed[-1]}")
        if len(cold_trees) != 1:
            self.warn(f"cold captures of one state gave {len(cold_trees)} trees")

        store = ShadowStore.open(ws, home=self.new_home())
        first = store.capture()
        # Edit only files that every contender holds: plain git does not know which ignored
        # files the user's repository tracks, and a file added under an ignored folder is held
        # by nobody (so no restore removes it).
        ignored = self.ignored
        candidates = [
            e.path
            for e in store.files(first.commit)
            if e.mode in (0o100644, 0o100755)
            and e.size < 256 * 1024
            and not _is_ignored(e.path, ignored)
        ]
        if len(candidates) < 8:
            self.warn("fewer than 8 small files: incremental operations skipped")
            return first.tree, None
        mut = Mutator(candidates, SEED + 1)

        def no_change() -> float:
            t0 = time.perf_counter()
            snap = store.capture()
            seconds = time.perf_counter() - t0
            if snap.tree != first.tree or snap.commit != first.commit:
                self.warn("a no-change capture recorded a new snapshot")
            return seconds

        self.add(OURS_NOCHANGE, repeat(reps, no_change))

        two_hashed: list[int] = []

        def two() -> float:
            changed = mut.modify(ws, 2)
            t0 = time.perf_counter()
            snap = store.capture()
            seconds = time.perf_counter() - t0
            if sorted(snap.changed) != sorted(changed):
                self.warn(f"capture after 2 changes reported {len(snap.changed)} changed paths")
            two_hashed.append(snap.stats.files_hashed if snap.stats else -1)
            return seconds

        self.add(OURS_TWO, repeat(reps, two), f"hashed {max(two_hashed)}")

        base = store.capture()

        def restore() -> float:
            change = mut.five(ws)
            t0 = time.perf_counter()
            result = store.restore(base.commit)
            seconds = time.perf_counter() - t0
            check_restored(ws, change, "ours restore", self.results.warnings)
            if len(result.written) != 4 or len(result.deleted) != 1:
                self.warn(
                    f"restore wrote {len(result.written)} and deleted {len(result.deleted)} files"
                )
            return seconds

        self.add(OURS_RESTORE, repeat(reps, restore))

        mut.five(ws)
        changed = store.capture()
        self.add(
            OURS_DIFF_SNAPS,
            repeat(reps, lambda: timed(lambda: store.diff(base.commit, changed.commit))),
        )
        self.add(OURS_DIFF_LIVE, repeat(reps, lambda: timed(lambda: store.diff(base.commit))))
        d = store.diff(base.commit)
        if len(d.files) != 5:
            self.warn(f"diff saw {len(d.files)} changed files, not 5")
        store.restore(base.commit)
        store.close()

        # The same without the inotify watcher (TREESEARCH_WATCH=0, or a network filesystem):
        # every scan lstats every file.
        plain = ShadowStore.open(ws, home=self.new_home(), watch=False)
        pbase = plain.capture()
        self.add(OURS_NOCHANGE_NOWATCH, repeat(reps, lambda: timed(plain.capture)))

        def restore_unwatched() -> float:
            change = mut.five(ws)
            t0 = time.perf_counter()
            plain.restore(pbase.commit)
            seconds = time.perf_counter() - t0
            check_restored(ws, change, "ours restore (watcher off)", self.results.warnings)
            return seconds

        self.add(OURS_RESTORE_NOWATCH, repeat(reps, restore_unwatched))
        plain.close()

        # Disk: the first snapshot of a new store, then 20 snapshots of 2 changed files each; then
        # the same with the modes of a checkout made under umask 002 (0664 and 0775).
        last = first
        for umask in (0o022, 0o002):
            changed_modes = _set_umask_modes(ws, mut.candidates, umask)
            dstore = ShadowStore.open(ws, home=self.new_home())
            dstore.capture()
            first_bytes = dstore.disk_usage()
            for _ in range(20):
                mut.modify(ws, 2)
                last = dstore.capture()
            after = dstore.disk_usage()
            dstore.close()
            _set_umask_modes(ws, changed_modes, 0o022)
            name = self.name if umask == 0o022 else f"{self.name} (umask 002)"
            self.results.disk.append(
                DiskRow(name, self.files, self.workspace_bytes, first_bytes, after, 21)
            )
            log(f"  disk, umask {umask:03o}: {first_bytes / MiB:.2f} MiB -> {after / MiB:.2f} MiB")
        return last.tree, mut

    def _ignored_by_plain_git(self) -> frozenset[str]:
        git = PlainGit(self.new_home(), self.ws)
        git.init()
        out = git.run(
            "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"
        )
        shutil.rmtree(git.env["GIT_DIR"])
        return frozenset(p for p in out.split("\0") if p)

    def git_workspace(self, label: str) -> str:
        """Our first capture of the (now) git workspace, seeded from the user's index.

        Returns HEAD's tree, which every capture of the unchanged workspace must equal.
        """
        head_tree = run_git(["rev-parse", "HEAD^{tree}"], isolated_git_env(), self.ws)
        before = user_repo_fingerprint(self.ws)
        trees: set[str] = set()
        hashed: list[int] = []
        timing = repeat(self.reps, lambda: self._first_capture(trees, hashed), warmup=False)
        self.add(OURS_FIRST_GITWS, timing, workspace=label)
        if trees != {head_tree}:
            self.warn(f"our first capture {sorted(trees)} differs from HEAD's tree {head_tree}")
        if user_repo_fingerprint(self.ws) != before:
            self.warn("the user's index, HEAD or refs changed during our captures")
        return head_tree

    # -- plain git

    def plain_git(self, mut: Mutator | None, expect_tree: str | None) -> None:
        reps, ws = self.reps, self.ws
        trees: set[str] = set()
        add_only: list[float] = []

        def cold() -> float:
            git = PlainGit(self.new_home(), ws)
            git.init()
            t0 = time.perf_counter()
            git.run("add", "-A")
            t1 = time.perf_counter()
            trees.add(git.run("write-tree"))
            t2 = time.perf_counter()
            add_only.append(t1 - t0)
            shutil.rmtree(git.env["GIT_DIR"])
            return t2 - t0

        self.add(GIT_COLD, repeat(reps, cold, warmup=False))
        self.add(GIT_ADD_COLD, Timing(tuple(add_only)))
        if expect_tree is not None and trees != {expect_tree}:
            self.warn(f"plain git's tree {sorted(trees)} differs from ours {expect_tree}")
        if mut is None:
            return

        git = PlainGit(self.new_home(), ws)
        git.init()
        git.capture()
        self.add(GIT_NOCHANGE, repeat(reps, lambda: timed(git.capture)))

        def two() -> float:
            mut.modify(ws, 2)
            return timed(git.capture)

        self.add(GIT_TWO, repeat(reps, two))

        base = git.capture()

        def restore() -> float:
            change = mut.five(ws)
            seconds = timed(lambda: git.run("read-tree", "--reset", "-u", base))
            (ws / change.added).unlink()  # read-tree leaves the untracked new file
            check_restored(ws, change, "git read-tree", self.results.warnings)
            return seconds

        self.add(GIT_RESTORE, repeat(reps, restore))

        def restore_safe() -> float:
            change = mut.five(ws)

            def op() -> None:
                git.capture()
                git.run("read-tree", "--reset", "-u", base)

            seconds = timed(op)
            check_restored(ws, change, "git add+read-tree", self.results.warnings)
            return seconds

        self.add(GIT_RESTORE_SAFE, repeat(reps, restore_safe))
        shutil.rmtree(git.env["GIT_DIR"])

    # -- copytree

    def naive(self, mut: Mutator | None) -> None:
        reps, ws = self.reps, self.ws
        counter = [0]

        def snapshot() -> float:
            counter[0] += 1
            dest = self.base / f"copy-{counter[0]}"
            seconds = timed(lambda: naive_snapshot(ws, dest))
            shutil.rmtree(dest)
            return seconds

        self.add(COPY_SNAP, repeat(reps, snapshot, warmup=False))
        if mut is None:
            return
        snap = self.base / "copy-base"
        naive_snapshot(ws, snap)

        def restore() -> float:
            change = mut.five(ws)
            seconds = timed(lambda: naive_restore(snap, ws))
            check_restored(ws, change, "copytree restore", self.results.warnings)
            return seconds

        self.add(COPY_RESTORE, repeat(reps, restore, warmup=False))
        shutil.rmtree(snap)


# ---------------------------------------------------------------------- runs


def run_generated(size: int, reps: int, tmp: Path | None, results: Results) -> None:
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"ts-bench-{size}-", dir=tmp) as td:
        base = Path(td)
        log(f"[generated {size} files] generating in {base} ...")
        gen = generate_tree(base / "ws", size)
        log(f"  {gen.files} files in {gen.dirs} folders, {gen.bytes / MiB:.1f} MiB of content")
        bench = Bench(GENERATED, gen.root, base, reps, results)
        bench.floor()
        _tree, mut = bench.ours(seeded=False)
        log(f"[git workspace {size} files] git init + add + commit ...")
        make_user_repo(gen.root)
        head_tree = bench.git_workspace(GIT_WS)
        log(f"[git workspace {size} files] git gc ...")
        pack_user_repo(gen.root)
        bench.git_workspace(GIT_WS_PACKED)
        bench.plain_git(mut, head_tree)
        bench.naive(mut)
    results.elapsed[f"generated {size}"] = time.perf_counter() - t_start


def run_checkout(path: Path, reps: int, tmp: Path | None, results: Results) -> None:
    t_start = time.perf_counter()
    src = path.resolve()
    with tempfile.TemporaryDirectory(prefix="ts-bench-checkout-", dir=tmp) as td:
        base = Path(td)
        ws = base / "ws"
        log(f"[checkout {src}] copying to {ws} ...")
        shutil.copytree(src, ws, symlinks=True)
        is_repo = (ws / ".git").is_dir()
        if is_repo:
            # The copy's index holds the original's inodes and ctimes: refresh it (in the copy
            # only) so that it is as fresh as the user's own, as our seeding expects.
            env = isolated_git_env(GIT_DIR=str(ws / ".git"), GIT_WORK_TREE=str(ws))
            run_git(["update-index", "-q", "--refresh"], env, ws, ok=(0, 1))
        bench = Bench(f"checkout:{src.name}", ws, base, reps, results)
        bench.floor()
        _tree, mut = bench.ours(seeded=is_repo)
        bench.plain_git(mut, None)
        bench.naive(mut)
    results.elapsed[f"checkout {src.name}"] = time.perf_counter() - t_start


# ---------------------------------------------------------------------- report


def _median(results: Results, workspace: str, files: int, op: str) -> float | None:
    row = results.find(workspace, files, op)
    return row.timing.median if row else None


def _floor_of(results: Results, row: Row) -> tuple[str, float] | None:
    if row.op in (FLOOR_WALK, FLOOR_HASH):
        return None
    name, label = (FLOOR_HASH, "hash") if row.op in COLD_OPS else (FLOOR_WALK, "walk")
    ws = GENERATED if row.workspace in (GIT_WS, GIT_WS_PACKED) else row.workspace
    value = _median(results, ws, row.files, name)
    return (label, value) if value else None


def align(header: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> str:
    """Plain-text columns; an all-empty row prints as a blank line."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    out = [fmt(header), fmt(["-" * w for w in widths])]
    out.extend(fmt(r) if any(r) else "" for r in rows)
    return "\n".join(out)


def format_table(results: Results) -> str:
    header = ("workspace", "operation", "files", "median s", "min s", "max s", "x floor", "note")
    groups: list[tuple[str, int]] = []
    for row in results.rows:
        if (row.workspace, row.files) not in groups:
            groups.append((row.workspace, row.files))
    lines: list[tuple[str, ...]] = []
    for key in groups:
        if lines:
            lines.append(("",) * len(header))
        for row in (r for r in results.rows if (r.workspace, r.files) == key):
            floor = _floor_of(results, row)
            ratio = f"{row.timing.median / floor[1]:.2f}x {floor[0]}" if floor else ""
            note = row.note
            if row.op == OURS_FIRST_GITWS:
                git_add = _median(results, GENERATED, row.files, GIT_ADD_COLD)
                if git_add:
                    note = f"git add -A alone takes {git_add / row.timing.median:.2f}x as long"
            lines.append(
                (
                    row.workspace,
                    row.op + ("*" if row.op in NO_WARMUP else ""),
                    f"{row.files:,}",
                    f"{row.timing.median:.4f}",
                    f"{row.timing.low:.4f}",
                    f"{row.timing.high:.4f}",
                    ratio,
                    note,
                )
            )
    return align(header, lines, {2, 3, 4, 5, 6})


def format_disk(results: Results) -> str:
    header = ("workspace", "files", "workspace MiB", "1st snap MiB", "+20 snaps MiB", "ratio")
    lines = [
        (
            d.workspace,
            f"{d.files:,}",
            f"{d.workspace_bytes / MiB:.1f}",
            f"{d.first / MiB:.2f}",
            f"{d.after / MiB:.2f}",
            f"{d.ratio:.3f}",
        )
        for d in results.disk
    ]
    return align(header, lines, {1, 2, 3, 4, 5})


@dataclass(frozen=True)
class Target:
    text: str
    measured: str
    ok: bool | None
    """``None`` when the size the target is judged at was not run."""


def evaluate_targets(results: Results, n: int = TARGET_SIZE) -> list[Target]:
    def med(ws: str, op: str) -> float | None:
        return _median(results, ws, n, op)

    walk = med(GENERATED, FLOOR_WALK)
    nochange = med(GENERATED, OURS_NOCHANGE)
    restore = med(GENERATED, OURS_RESTORE)
    out: list[Target] = []

    def ratio(text: str, num: float | None, den: float | None, limit: float, at_most: bool) -> None:
        if num is None or den is None:
            out.append(Target(text, f"not measured ({n:,} files not run)", None))
            return
        r = num / den
        ok = r <= limit if at_most else r >= limit
        out.append(Target(text, f"{r:.2f}x ({num:.4f} s / {den:.4f} s)", ok))

    ratio("no-change capture <= 1.5x floor (walk)", nochange, walk, 1.5, True)
    ratio("5-file restore <= 3x floor (walk)", restore, walk, 3.0, True)
    ratio(
        "  watcher off: no-change capture <= 1.5x floor",
        med(GENERATED, OURS_NOCHANGE_NOWATCH),
        walk,
        1.5,
        True,
    )
    ratio(
        "  watcher off: 5-file restore <= 3x floor",
        med(GENERATED, OURS_RESTORE_NOWATCH),
        walk,
        3.0,
        True,
    )
    copy_snap = med(GENERATED, COPY_SNAP)
    ratio("no-change capture >= 20x faster than copytree snapshot", copy_snap, nochange, 20, False)
    copy_restore = med(GENERATED, COPY_RESTORE)
    ratio("5-file restore >= 20x faster than rmtree + copytree", copy_restore, restore, 20, False)
    for suffix, limit in (("", 1.2), ("", 1.05), (" (umask 002)", 1.2), (" (umask 002)", 1.05)):
        name = GENERATED + suffix
        disk = next((d for d in results.disk if d.workspace == name and d.files == n), None)
        disk_text = f"disk{suffix}: first + 20 snapshots of 2 changes <= {limit}x the first"
        if disk is None:
            out.append(Target(disk_text, f"not measured ({n:,} files not run)", None))
        else:
            out.append(
                Target(
                    disk_text,
                    f"{disk.ratio:.3f}x ({disk.first / MiB:.2f} -> {disk.after / MiB:.2f} MiB)",
                    disk.ratio <= limit,
                )
            )
    git_add = med(GENERATED, GIT_ADD_COLD)
    first = med(GIT_WS, OURS_FIRST_GITWS)
    ratio("git workspace: first capture >= 3x faster than git add -A", git_add, first, 3, False)
    first = med(GIT_WS_PACKED, OURS_FIRST_GITWS)
    ratio("  the same, user's objects packed (as after a clone)", git_add, first, 3, False)
    return out


def format_targets(targets: list[Target]) -> str:
    w = max(len(t.text) for t in targets)
    lines = []
    for t in targets:
        verdict = "n/a" if t.ok is None else ("PASS" if t.ok else "FAIL")
        lines.append(f"  {verdict:<4}  {t.text:<{w}}  {t.measured}")
    return "\n".join(lines)


def _fs_type(path: Path) -> str:
    best = ("", "?")
    try:
        with open("/proc/mounts") as fh:
            for line in fh:
                parts = line.split()
                mnt = parts[1]
                if str(path).startswith(mnt) and len(mnt) >= len(best[0]):
                    best = (mnt, parts[2])
    except OSError:
        pass
    return best[1]


def store_fingerprint() -> str:
    """Short hash of the store's source files (the store changes; say which one was measured)."""
    folder = Path(store_git.__file__).parent
    h = hashlib.sha256()
    for path in sorted(folder.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"{folder} @ {h.hexdigest()[:12]}"


def print_report(results: Results, reps: int, tmp: Path, total: float, fingerprint: str) -> None:
    git_version = run_git(["--version"], isolated_git_env(), Path.cwd())
    print()
    print("treesearch snapshot-store benchmark")
    print(f"  store code: {fingerprint} (sha256 of its *.py, taken at start)")
    print(
        f"  {platform.python_implementation()} {platform.python_version()}, {git_version}, "
        f"{platform.system()} {platform.release()}, {os.cpu_count()} CPUs, "
        f"temp folder {tmp} ({_fs_type(tmp)})"
    )
    print(
        f"""\
  Medians of {reps} timed repetitions (time.perf_counter). The OS page cache is NOT dropped (it
  cannot be done reliably): every operation runs once untimed first (warm-up), except those
  marked *, which build a whole new store or copy each time; for them the floor's read of every
  byte, run before them, warms the cache. All numbers are warm-cache numbers.
  x floor: ratio to the walk floor (incremental ops) or to the read+sha1 floor (cold ops),
  measured on the same tree in the same run; the floor is single-threaded Python.
  All contenders run one after the other on the same folder. 'git workspace' is that folder
  after `git init; git add -A; git commit` (objects loose, as committed; auto-gc off), 'packed'
  the same after `git gc` (as after a clone). The plain-git and copytree rows were measured on
  it (both skip .git), the rows of ours before it was a repository."""
    )
    print()
    print(format_table(results))
    print()
    print("disk (store objects, du-like): first snapshot vs 20 more snapshots of 2 changed files")
    print(format_disk(results))
    print()
    print(f"targets (generated tree, {TARGET_SIZE:,} files)")
    print(format_targets(evaluate_targets(results)))
    if results.warnings:
        print()
        print("warnings")
        for w in results.warnings:
            print(f"  {w}")
    print()
    spent = ", ".join(f"{k}: {v:.0f} s" for k, v in results.elapsed.items())
    print(f"wall time: {total:.0f} s ({spent})")


# ---------------------------------------------------------------------- profiling


class GitCallLog:
    """Seconds and calls per git subcommand, by wrapping the store's ``GitRunner.run``."""

    def __init__(self) -> None:
        self.calls: dict[str, list[float]] = {}

    @contextmanager
    def installed(self) -> Iterator[None]:
        original = store_git.GitRunner.run

        def wrapped(runner: Any, args: Sequence[str], **kw: Any) -> bytes:
            t0 = time.perf_counter()
            try:
                return original(runner, args, **kw)
            finally:
                sub = next((a for a in args if not a.startswith("-") and "=" not in a), "?")
                self.calls.setdefault(sub, []).append(time.perf_counter() - t0)

        store_git.GitRunner.run = wrapped  # type: ignore[method-assign, assignment]
        try:
            yield
        finally:
            store_git.GitRunner.run = original  # type: ignore[method-assign]

    def report(self) -> str:
        items = sorted(self.calls.items(), key=lambda kv: -sum(kv[1]))
        return "\n".join(f"      git {k:<14} {len(v):3d} calls {sum(v):8.4f} s" for k, v in items)


def profile_ops(size: int, tmp: Path | None) -> None:
    """Our operations once each under cProfile, with the time of each git subcommand.

    Cold, no-change and 2-change captures, a 5-file restore, and the first capture of the same
    tree made a git repository (seeded from the user's index). Git calls made through
    ``subprocess.Popen`` directly (blob reads, seeding's pack streams) are not listed.
    """
    with tempfile.TemporaryDirectory(prefix=f"ts-prof-{size}-", dir=tmp) as td:
        base = Path(td)
        ws = generate_tree(base / "ws", size).root
        print(f"\nprofile: generated tree of {size:,} files, one run of each after a warm-up")
        floor_walk(ws)
        print(f"  floor walk: {timed(lambda: floor_walk(ws)):.4f} s")
        warm = ShadowStore.open(ws, home=base / "warm")
        warm.capture()
        warm.capture()
        warm.close()
        cold = ShadowStore.open(ws, home=base / "cold")
        main = ShadowStore.open(ws, home=base / "main")
        seeded = ShadowStore.open(ws, home=base / "seeded")
        state: dict[str, Snapshot] = {}
        mut: list[Mutator] = []

        def setup_main() -> None:
            first = main.capture()
            paths = [e.path for e in main.files(first.commit) if e.mode == 0o100644]
            mut.append(Mutator(paths, SEED + 2))
            main.capture()
            state["base"] = first

        def restore() -> None:
            main.restore(state["base"].commit)

        def nothing() -> None:
            return None

        ops: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
            ("cold capture", nothing, cold.capture),
            ("no-change capture", setup_main, main.capture),
            ("2-change capture", lambda: mut[0].modify(ws, 2), main.capture),
            ("5-file restore", lambda: mut[0].five(ws), restore),
            ("git workspace first capture", lambda: make_user_repo(ws), seeded.capture),
        ]
        for name, setup, op in ops:
            setup()
            calls = GitCallLog()
            prof = cProfile.Profile()
            with calls.installed():
                t0 = time.perf_counter()
                prof.enable()
                op()
                prof.disable()
                seconds = time.perf_counter() - t0
            print(f"\n  {name}: {seconds:.4f} s (under cProfile)")
            print(calls.report())
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(8)
            body = buf.getvalue()
            start = body.find("   ncalls")
            print("\n".join("    " + ln for ln in body[start:].rstrip().splitlines()))
        for store in (main, cold, seeded):
            store.close()


# ---------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", help="comma-separated file counts (default 1000,10000,50000)")
    p.add_argument("--reps", type=int, help="timed repetitions per operation (default 5)")
    p.add_argument(
        "--checkout",
        nargs="+",
        action="extend",
        default=[],
        metavar="PATH",
        help="also measure a copy of this checkout (the original is never touched)",
    )
    p.add_argument("--quick", action="store_true", help="sizes 1000,10000 and 3 repetitions")
    p.add_argument("--profile", action="store_true", help="also profile our operations at 10k")
    p.add_argument("--tmp", type=Path, help="folder for the temporary trees (default: system temp)")
    args = p.parse_args(argv)
    sizes_text = args.sizes or ("1000,10000" if args.quick else "1000,10000,50000")
    try:
        args.sizes = [int(s.replace("_", "")) for s in sizes_text.split(",") if s.strip()]
    except ValueError:
        p.error(f"--sizes must be comma-separated integers, not {sizes_text!r}")
    if any(s < 20 for s in args.sizes):
        p.error("each size must be at least 20 files")
    args.reps = args.reps or (3 if args.quick else 5)
    if args.reps < 1:
        p.error("--reps must be at least 1")
    for c in args.checkout:
        if not Path(c).is_dir():
            p.error(f"--checkout {c}: not a folder")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if shutil.which("git") is None:
        print("git is not on PATH", file=sys.stderr)
        return 2
    os.umask(0o022)  # generated files are 0644/0755, as in a usual checkout
    tmp = Path(args.tmp or tempfile.gettempdir()).resolve()
    fingerprint = store_fingerprint()
    results = Results()
    t0 = time.perf_counter()
    for size in args.sizes:
        run_generated(size, args.reps, args.tmp, results)
    for c in args.checkout:
        run_checkout(Path(c), args.reps, args.tmp, results)
    print_report(results, args.reps, tmp, time.perf_counter() - t0, fingerprint)
    if args.profile:
        profile_ops(TARGET_SIZE, args.tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
