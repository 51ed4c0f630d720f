#!/usr/bin/env python3
"""The snapshot store on copies of real project folders, against plain git and an lstat walk.

Usage::

    python experiments/benchmarks/real_checkouts.py FOLDER [FOLDER ...] [--reps N] [--json FILE]
        [--treesearch-path PATH ...] [--copies K] [--folders 1000,4000,16000] [--tmp DIR]
    python experiments/benchmarks/real_checkouts.py --fetch DIR     # pip download + unpack 3 sdists

For each folder (copied first into a scratch folder: the original is never touched) one run
measures, each as a ratio to an ``os.scandir`` + ``lstat`` walk of the same tree timed in the same
process, alternating with it:

- treesearch: no-change capture and restore of 5 files (3 modified, 1 deleted, 1 added; the
  safety snapshot included), with the watcher on and off (``watch=False`` + ``TREESEARCH_WATCH=0``);
- plain git, the reference: ``add -A`` + ``write-tree`` with nothing changed, and
  ``read-tree --reset -u`` of the same 5 files, in a scratch ``GIT_DIR`` with a clean environment,
  in a copy of its own measured beside each version's store, repetition by repetition (``PlainGit``):
  each version is judged against the git timed in the same minutes (a reference timed once at
  the start of a folder did not share the machine's state: its speed moves 2x within minutes here);
- disk: the store folder after 20 snapshots of 2 changed files against after the first, at umask
  022 and at umask 002 (every file chmod'ed 0664/0775, as a checkout made under umask 002), and
  git's floor: a copy of that folder after ``git repack -a -d -f --window=250 --depth=250`` and
  ``pack-refs`` (``git_floor``), the least git's format needs for the same snapshots;

and, on generated trees of one small file per folder, the no-change capture with the watcher as
the number of folders grows (it should not grow: nothing changed). One such capture takes about
0.1 ms, below what a single timing resolves on a busy machine: each repetition times
``FOLDER_BATCH`` of them in a row and reports one's share (its ``cpu`` figure too).

Each treesearch version (``--treesearch-path``, repeatable; its package is copied at the start;
default: whatever ``import treesearch`` finds) is measured in its own subprocess with
``PYTHONPATH`` set to it, and the versions are interleaved measurement by measurement, so old
and new share the machine's state and one table.
Missed targets print FAIL; the exit status is 1 only when a measurement could not be made.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import shutil
import stat
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SEED = 20240601
SDISTS = ("requests==2.32.3", "mypy==1.9.0", "babel==2.14.0")
"""Source distributions of psf/requests, python/mypy and python-babel/babel (no network but PyPI)."""
GROUPS = ("watch", "nowatch", "disk022", "disk002")
FOLDER_BATCH = 100
"""Watched no-change captures timed together per repetition on the generated folder trees."""
MiB = 1024 * 1024

# ---------------------------------------------------------------------- shared helpers


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def walk(root: str, ignored: frozenset[str] = frozenset()) -> int:
    """lstat every entry below ``root`` (``.git`` and git-ignored paths skipped): the floor."""
    n = 0
    stack = [(root, "")]
    while stack:
        folder, rel = stack.pop()
        with os.scandir(folder) as it:
            for entry in it:
                if entry.name == ".git":
                    continue
                st = entry.stat(follow_symlinks=False)
                is_dir = stat.S_ISDIR(st.st_mode)
                if ignored and rel + entry.name + ("/" if is_dir else "") in ignored:
                    continue
                if is_dir:
                    stack.append((entry.path, rel + entry.name + "/"))
                n += 1
    return n


def cpu_seconds() -> float:
    """CPU seconds of this process and its waited-for children (git), user + system."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn: Callable[[], object], cpu: list[float] | None = None) -> float:
    """Wall seconds of ``fn()``; its CPU seconds are appended to ``cpu``."""
    c0, t0 = cpu_seconds(), time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    if cpu is not None:
        cpu.append(cpu_seconds() - c0)
    return wall


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


class Mutator:
    """Seeded edits of ``candidates``: the same seed gives the same files in every process."""

    def __init__(self, candidates: Sequence[str], seed: int) -> None:
        self.candidates = sorted(candidates)
        self.rng = random.Random(seed)
        self.n = 0

    def modify(self, root: Path, k: int) -> None:
        for p in self.rng.sample(self.candidates, k):
            self._append(root / p)

    def five(self, root: Path) -> str:
        """3 files modified, 1 deleted, 1 added; returns the added path."""
        picked = self.rng.sample(self.candidates, 4)
        for p in picked[:3]:
            self._append(root / p)
        os.unlink(root / picked[3])
        self.n += 1
        added = f"{picked[0].rpartition('/')[0] or '.'}/bench_added_{self.n}.py"
        (root / added).write_text(f"# added {self.n}\n")
        return added

    def _append(self, path: Path) -> None:
        self.n += 1
        with open(path, "a") as fh:
            fh.write(f"# edit {self.n}\n")


def git_env(**extra: str) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": os.environ.get("HOME", os.devnull),
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    env.update(extra)
    return env


def git(args: Sequence[str], env: dict[str, str], cwd: Path) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.decode(errors='replace').strip()}")
    return os.fsdecode(proc.stdout).strip()


def du(folder: Path) -> int:
    """Bytes on disk of every file below ``folder``."""
    total = 0
    for dirpath, _dirs, names in os.walk(folder):
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


def copy_tree(src: Path, dest: Path, umask002: bool = False) -> None:
    shutil.copytree(src, dest, symlinks=True)
    if not umask002:
        return
    for dirpath, dirs, names in os.walk(dest):
        for d in dirs:
            os.chmod(os.path.join(dirpath, d), 0o775)
        for name in names:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode):
                os.chmod(p, 0o775 if st.st_mode & 0o100 else 0o664)


# ---------------------------------------------------------------------- worker (one version)


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One measurement group with the treesearch on ``sys.path``; returns medians in seconds."""
    import treesearch
    from treesearch.store import ShadowStore

    group, base = spec["group"], Path(spec["scratch"])
    ignored = frozenset(spec.get("ignored", ()))
    out: dict[str, Any] = {"treesearch": str(Path(treesearch.__file__).parent)}
    os.umask(0o002 if group == "disk002" else 0o022)
    if group == "folders":
        ws = Path(spec["src"])  # a generated tree no one edits: no copy needed
    else:
        ws = base / "ws"
        copy_tree(Path(spec["src"]), ws, umask002=group == "disk002")
    watch = group != "nowatch"
    os.environ["TREESEARCH_WATCH"] = "1" if watch else "0"
    store = ShadowStore.open(ws, home=base / "home", watch=watch)
    try:
        first = store.capture()
        out["watching"] = watching(store)
        if group in ("disk022", "disk002"):
            out.update(_disk(store, ws, spec, ignored))
        else:
            out.update(_speed(store, first, ws, spec, ignored))
    finally:
        store.close()
    return out


@dataclass
class Side:
    """One side of a measurement group (the store, or git beside it): each timed operation
    follows a walk of the side's own tree, timed in the same process."""

    tree: Path
    ignored: frozenset[str]
    walks: list[float] = field(default_factory=list)
    times: dict[str, list[float]] = field(default_factory=dict)
    cpu: dict[str, list[float]] = field(default_factory=dict)

    def after_walk(self, key: str, op: Callable[[list[float]], float], per: int = 1) -> None:
        """Time a walk, then ``op`` (which times what it does into the list it is given);
        ``per``: ``op`` did the operation that many times (one's share is kept)."""
        self.walks.append(timed(lambda: walk(str(self.tree), self.ignored), self.cpu_of("walk")))
        cpu: list[float] = []
        self.times.setdefault(key, []).append(op(cpu) / per)
        self.cpu_of(key).extend(c / per for c in cpu)

    def cpu_of(self, key: str) -> list[float]:
        return self.cpu.setdefault(key, [])

    def figures(self) -> dict[str, float]:
        out = {"walk": median(self.walks)}
        out.update({k: median(v) for k, v in self.times.items() if v})
        out.update({f"{k}_cpu": median(v) for k, v in self.cpu.items() if v})
        return out


def _speed(
    store: Any, first: Any, ws: Path, spec: dict[str, Any], ignored: frozenset[str]
) -> dict[str, Any]:
    """No-change capture (``watch``, ``nowatch``, ``folders``) and restore of 5 files (``watch``,
    ``nowatch``: with git beside, repetition by repetition)."""
    reps = spec["reps"]
    ours = Side(ws, ignored)
    ref = None
    if spec["group"] != "folders":
        ref = PlainGit(Path(spec["src"]), Path(spec["scratch"]), spec["candidates"], ignored)
    walk(str(ws), ignored)
    store.capture()  # warm-up
    # A repetition times ``batch`` captures in a row (each one's share is reported): a watched
    # no-change capture takes ~0.1 ms, within the noise of one timing.
    batch = int(spec.get("batch", 1))

    def captures(cpu: list[float]) -> float:
        return timed(lambda: [store.capture() for _ in range(batch)], cpu)

    for _ in range(reps):
        ours.after_walk("capture", captures, per=batch)
        if ref is not None:
            ref.side.after_walk("capture", lambda cpu: timed(ref.capture, cpu))
    out: dict[str, Any] = {"batch": batch}
    if ref is not None:
        mut = Mutator(spec["candidates"], SEED)

        def restore(cpu: list[float]) -> float:
            mut.five(ws)
            return timed(lambda: store.restore(first.commit), cpu)

        restore([])  # warm-ups
        ref.restore([])
        for _ in range(reps):
            ours.after_walk("restore", restore)
            ref.side.after_walk("restore", ref.restore)
        if store.capture().tree != first.tree:
            raise RuntimeError("the workspace is not back at the first snapshot")
        if ref.capture() != ref.base:
            raise RuntimeError("git read-tree did not bring its copy back")
        out["git"] = ref.side.figures()
    out.update(ours.figures())
    return out


def _disk(store: Any, ws: Path, spec: dict[str, Any], ignored: frozenset[str]) -> dict[str, Any]:
    """The store folder after 20 snapshots of 2 changed files against after the first."""
    home = Path(spec["scratch"]) / "home"
    mut = Mutator(spec["candidates"], SEED + 1)
    one = du(home)
    seconds = []
    for _ in range(20):
        mut.modify(ws, 2)
        seconds.append(timed(store.capture))
    walks = [timed(lambda: walk(str(ws), ignored)) for _ in range(spec["reps"])]
    return {"disk_first": one, "disk_after": du(home), "capture2": median(seconds),
            "walk": median(walks), "disk_floor": git_floor(home, Path(spec["scratch"]))}  # fmt: skip


FLOOR_REPACK = ("-c", "repack.updateServerInfo=false", "repack", "-a", "-d", "-f", "-q",
                "--window=250", "--depth=250")  # fmt: skip
"""How ``git_floor`` packs: every object into one pack, deltas searched as widely as git can."""


def git_floor(home: Path, scratch: Path) -> int:
    """Bytes on disk of a copy of the store folder ``home`` after git packed it as tightly as it
    can (``FLOOR_REPACK``, then ``pack-refs --all --prune``): the least that git's own format
    needs for the same snapshots (every object is reachable from a ref, metadata blobs too). A
    disk ratio above ``disk_floor / disk_first`` cannot be met by packing."""
    copy = scratch / "floor-home"
    shutil.copytree(home, copy, symlinks=True)
    try:
        for objects in sorted(copy.rglob("objects")):
            git_dir = objects.parent
            if not (objects.is_dir() and (git_dir / "HEAD").is_file()):
                continue
            env = git_env(GIT_DIR=str(git_dir))
            git(list(FLOOR_REPACK), env, git_dir)
            git(["pack-refs", "--all", "--prune"], env, git_dir)
        return du(copy)
    finally:
        shutil.rmtree(copy)


def watching(store: Any) -> bool | str:
    """Whether the store's inotify watcher is on (private attributes: ``?`` when not found)."""
    for owner in (store, getattr(store, "_scanner", None)):
        for name in ("_watch", "watch"):
            if owner is not None and hasattr(owner, name):
                return getattr(owner, name) is not None
    return "?"


class PlainGit:
    """The reference, in a copy of the folder of its own (``scratch/git-ws``): ``add -A`` +
    ``write-tree`` with nothing changed, and ``read-tree --reset -u`` of the same 5 files as the
    store's restore (same seed), in a scratch ``GIT_DIR`` with a clean environment. Timed by
    ``worker`` alternately with the store, each with a walk of its own tree before it."""

    def __init__(
        self, src: Path, scratch: Path, candidates: Sequence[str], ignored: frozenset[str]
    ) -> None:
        self.ws = scratch / "git-ws"
        copy_tree(src, self.ws)
        self.env = git_env(GIT_DIR=str(scratch / "git"), GIT_WORK_TREE=str(self.ws))
        self.env["GIT_INDEX_FILE"] = str(scratch / "git" / "index")
        git(["init", "--quiet"], self.env, self.ws)
        self.base = self.capture()
        self.mut = Mutator(candidates, SEED)
        self.side = Side(self.ws, ignored)
        """Its timings, each after a walk of its copy."""

    def capture(self) -> str:
        git(["add", "-A"], self.env, self.ws)
        return git(["write-tree"], self.env, self.ws)

    def restore(self, cpu: list[float]) -> float:
        """Seconds of a ``read-tree -u`` of 5 changed files (the edits untimed)."""
        added = self.mut.five(self.ws)
        seconds = timed(
            lambda: git(["read-tree", "--reset", "-u", self.base], self.env, self.ws), cpu
        )
        (self.ws / added).unlink()  # read-tree leaves the untracked new file; ours removes it
        return seconds


# ---------------------------------------------------------------------- parent


def ignored_and_candidates(ws: Path, scratch: Path) -> tuple[list[str], list[str]]:
    """What git ignores here, and the small regular files not ignored (what the edits pick)."""
    env = git_env(GIT_DIR=str(scratch), GIT_WORK_TREE=str(ws))
    git(["init", "--quiet"], env, ws)
    listing = ["ls-files", "-z", "--others", "--exclude-standard"]
    ignored = [p for p in git([*listing, "--ignored", "--directory"], env, ws).split("\0") if p]
    tracked = [p for p in git(listing, env, ws).split("\0") if p]
    shutil.rmtree(scratch)
    candidates = []
    for p in tracked:
        st = os.lstat(ws / p)
        if stat.S_ISREG(st.st_mode) and st.st_size < 256 * 1024 and st.st_nlink == 1:
            candidates.append(p)
    return ignored, candidates


def run_worker(spec: dict[str, Any], path: str | None, errors: list[str]) -> dict[str, Any]:
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = path
    spec_file = Path(spec["scratch"] + ".json")  # not argv: one argument may hold only 128 KiB
    spec_file.write_text(json.dumps(spec))
    cmd = [sys.executable, __file__, "--worker", str(spec_file)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        errors.append(f"{spec['group']} {spec['name']} with {path or 'default'}: {tail}")
        log(f"  ERROR {errors[-1]}")
        return {"error": tail}
    return dict(json.loads(proc.stdout))


def version_label(path: str | None) -> str:
    if path is None:
        return "default"
    try:
        head = git(["rev-parse", "--short", "HEAD"], git_env(), Path(path))
        dirty = git(["status", "--porcelain", "--", "treesearch"], git_env(), Path(path))
        return f"{Path(path).name}@{head}{'+dirty' if dirty else ''}"
    except (RuntimeError, OSError):
        return Path(path).name


def freeze(path: str | None, dest: Path) -> str | None:
    """A copy of ``path``'s treesearch package in ``dest`` (``None``: the default import)."""
    if path is None:
        return None
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(Path(path) / "treesearch", dest / "treesearch", symlinks=True, ignore=ignore)
    return str(dest)


def make_folders_tree(root: Path, n: int) -> None:
    """``n`` folders, 50 to a parent folder, one small file each."""
    for i in range(n):
        d = root / f"p{i // 50:04d}" / f"d{i:05d}"
        d.mkdir(parents=True)
        (d / "f.txt").write_text(f"file {i}\n")


def measure(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    sources: list[str | None] = list(args.treesearch_path) or [None]
    labels = [version_label(p) for p in sources]
    # Each version is copied now, with its label: a checkout that moves on during the run (a
    # merge into main) must not change the code measured under that label halfway.
    paths = [freeze(p, scratch / "versions" / str(i)) for i, p in enumerate(sources)]
    res: dict[str, Any] = {"versions": labels, "reps": args.reps, "folders": {}, "errors": []}
    res["sources"] = dict(zip(labels, [p or "default import" for p in sources], strict=True))
    errors: list[str] = res["errors"]
    for folder in args.folders:
        src_in = Path(folder).resolve()
        name = src_in.name
        base = scratch / name
        src = base / "src"
        for k in range(args.copies):
            shutil.copytree(src_in, src / f"copy{k}" if args.copies > 1 else src, symlinks=True)
        ignored, candidates = ignored_and_candidates(src, base / "probe-git")
        n_files = sum(len(f) for _, _, f in os.walk(src))
        n_dirs = sum(len(d) for _, d, _ in os.walk(src))
        log(f"[{name}] {n_files} files, {n_dirs} folders")
        row: dict[str, Any] = {"files": n_files, "dirs": n_dirs}
        for group in args.groups:
            for label, path in zip(labels, paths, strict=True):
                log(f"[{name}] {group}: {label} ...")
                spec = {"group": group, "reps": args.reps, "src": str(src), "name": name,
                        "scratch": str(base / f"{group}-{label}"), "ignored": ignored,
                        "candidates": candidates}  # fmt: skip
                row.setdefault(label, {})[group] = run_worker(spec, path, errors)
                shutil.rmtree(spec["scratch"], ignore_errors=True)
        res["folders"][name] = row
        shutil.rmtree(base)
    res["scaling"] = {}
    for n in args.folder_counts:
        root = scratch / f"folders-{n}"
        make_folders_tree(root, n)
        for label, path in zip(labels, paths, strict=True):
            log(f"[{n} folders] watcher no-change capture: {label} ...")
            spec = {"group": "folders", "reps": args.reps, "src": str(root), "batch": FOLDER_BATCH,
                    "name": f"{n} folders", "scratch": str(scratch / f"fh-{n}-{label}")}  # fmt: skip
            res["scaling"].setdefault(label, {})[str(n)] = run_worker(spec, path, errors)
            shutil.rmtree(spec["scratch"], ignore_errors=True)
        shutil.rmtree(root)
    return res


# ---------------------------------------------------------------------- report


def ratio(d: dict[str, Any], key: str) -> float | None:
    if key not in d or not d.get("walk"):
        return None
    return float(d[key]) / float(d["walk"])


def cell(d: dict[str, Any], key: str) -> str:
    r = ratio(d, key)
    if "error" in d or not r:
        return "error" if "error" in d else "-"
    text = f"{r:.2f}x ({d[key] * 1000:.1f} ms)"
    if d.get(f"{key}_cpu") is not None and d.get("walk_cpu"):
        text += f" cpu {d[f'{key}_cpu'] / d['walk_cpu']:.2f}x"
    return text


def disk_cell(d: dict[str, Any]) -> str:
    if "error" in d:
        return "error"
    r = d["disk_after"] / d["disk_first"]
    text = f"{r:.3f} ({d['disk_first'] / MiB:.2f}->{d['disk_after'] / MiB:.2f} MiB)"
    if d.get("disk_floor"):
        text += f"; git's floor {d['disk_floor'] / d['disk_first']:.3f}"
    return text


def verdict(ok: bool | None) -> str:
    return "n/a " if ok is None else "PASS" if ok else "FAIL"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    head = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()
    return "\n".join([head, "  ".join("-" * w for w in widths), *lines])


def report(res: dict[str, Any]) -> str:
    labels: list[str] = res["versions"]
    out = [f"medians of {res['reps']} timed repetitions after a warm-up; x = ratio to the lstat "
           "walk of the same tree, timed alternately in the same process"]  # fmt: skip
    targets: list[tuple[str, str, str]] = []
    for name, row in res["folders"].items():
        out += ["", f"{name}: {row['files']:,} files, {row['dirs']:,} folders"]
        for lb in labels:
            w = row[lb]["watch"]
            where = res.get("sources", {}).get(lb, "?")
            out.append(
                f"  {lb} = {where} (copied at start); watcher active: {w.get('watching', '?')}"
            )
        rows = []
        spec = [
            ("no-change capture, watcher off", "nowatch", "capture", "add -A + write-tree"),
            ("no-change capture, watcher on", "watch", "capture", ""),
            ("restore 5 files, watcher off", "nowatch", "restore", "read-tree --reset -u"),
            ("restore 5 files, watcher on", "watch", "restore", "read-tree --reset -u"),
        ]
        for text, group, key, git_op in spec:
            rows.append([text, *(cell(row[lb][group], key) for lb in labels)])
            if git_op:  # the reference, timed beside each version's measurement
                rows.append([f"  git {git_op}, beside it",
                             *(cell(row[lb][group].get("git", {}), key) for lb in labels)])  # fmt: skip
        for umask in ("022", "002"):
            if f"disk{umask}" not in row[labels[0]]:
                continue  # not measured (--groups)
            rows.append([f"disk, 20 snapshots / 1, umask {umask}",
                         *(disk_cell(row[lb][f"disk{umask}"]) for lb in labels)])  # fmt: skip
            rows.append([f"capture of 2 changed files, umask {umask}",
                         *(cell(row[lb][f"disk{umask}"], "capture2") for lb in labels)])  # fmt: skip
        out.append(table(["operation", *labels], rows))
        for lb in labels:
            targets += folder_targets(name, lb, row[lb])
    if res["scaling"]:
        counts = list(next(iter(res["scaling"].values())))
        out += ["", "no-change capture with the watcher, one file per folder (ms; x walk)"]
        rows = [[f"{int(n):,} folders", *(cell(res["scaling"][lb][n], "capture") for lb in labels)]
                for n in counts]  # fmt: skip
        out.append(table(["tree", *labels], rows))
        for lb in labels:
            s = res["scaling"][lb]
            lo, hi = s[counts[0]], s[counts[-1]]
            ok = None if "error" in lo or "error" in hi else hi["capture"] <= 2 * lo["capture"]
            grow = f"{hi['capture'] / lo['capture']:.1f}x" if ok is not None else "error"
            text = f"watcher no-change capture grows <= 2x, folders {counts[0]} -> {counts[-1]}"
            targets.append((verdict(ok), f"{lb}: {text}", grow))
    out += ["", "targets (issue 13)"]
    out += [f"  {v}  {t}: {m}" for v, t, m in targets]
    if res["errors"]:
        out += ["", "ERRORS (measurements not made)", *(f"  {e}" for e in res["errors"])]
    return "\n".join(out)


def folder_targets(name: str, lb: str, v: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """The targets of one version on one folder, each against the git timed beside it."""

    def check(text: str, value: float | None, limit: float | None) -> tuple[str, str, str]:
        ok = None if value is None or limit is None else value <= limit
        shown = "error" if value is None or limit is None else f"{value:.2f} (limit {limit:.2f})"
        return verdict(ok), f"{name} {lb}: {text}", shown

    off, on = v["nowatch"], v["watch"]
    cap = ratio(off, "capture")
    yield check("no-change capture, watcher off <= 1.2x walk", cap, 1.2)
    git_cap = ratio(off.get("git", {}), "capture")
    yield check("no-change capture, watcher off <= git's (x walk)", cap, git_cap)
    for text, d in (("off", off), ("on", on)):
        yield check(f"restore, watcher {text} <= git read-tree -u (x walk)",
                    ratio(d, "restore"), ratio(d.get("git", {}), "restore"))  # fmt: skip
    for umask in ("022", "002"):
        d = v.get(f"disk{umask}")
        if d is None:
            continue
        r = None if "error" in d else d["disk_after"] / d["disk_first"]
        verdict_, text, shown = check(f"disk of 21 snapshots / 1 at umask {umask} <= 1.05", r, 1.05)
        floor = (
            None if "error" in d or not d.get("disk_floor") else d["disk_floor"] / d["disk_first"]
        )
        if verdict_ == "FAIL" and floor is not None and floor > 1.05:
            shown += (
                f"; git's own tightest packing of the same snapshots: {floor:.3f} (out of reach)"
            )
        yield verdict_, text, shown


# ---------------------------------------------------------------------- main


def fetch(folder: Path) -> list[str]:
    """pip download the sdists of SDISTS into ``folder`` and unpack them there."""
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
           *SDISTS, "-d", str(folder / "sdists")]  # fmt: skip
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    out = []
    for archive in sorted((folder / "sdists").glob("*.tar.gz")):
        with tarfile.open(archive) as tar:
            top = tar.getnames()[0].split("/")[0]
            if not (folder / top).exists():
                tar.extractall(folder, filter="data")
        out.append(str(folder / top))
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("folders", nargs="*", help="project folders (copied; never touched)")
    p.add_argument("--reps", type=int, default=5, help="timed repetitions (default 5)")
    p.add_argument("--json", type=Path, help="also write every figure to this file")
    p.add_argument("--treesearch-path", action="append", default=[], metavar="PATH",
                   help="a treesearch checkout to measure (repeat to compare versions)")  # fmt: skip
    p.add_argument("--copies", type=int, default=1, help="K copies of each folder side by side")
    p.add_argument("--folders", dest="folder_counts", default="1000,4000,16000",
                   help="folder counts of the watcher scaling trees ('' for none)")  # fmt: skip
    p.add_argument("--fetch", type=Path, metavar="DIR", help=f"download+unpack {' '.join(SDISTS)}")
    p.add_argument("--tmp", type=Path, help="scratch parent folder (default: system temp)")
    p.add_argument("--groups", default=",".join(GROUPS),
                   help=f"measurement groups, of {','.join(GROUPS)} (default: all)")  # fmt: skip
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.folder_counts = [int(x) for x in args.folder_counts.split(",") if x.strip()]
    args.groups = [g for g in args.groups.split(",") if g.strip()]
    if not set(args.groups) <= set(GROUPS) or not {"watch", "nowatch"} <= set(args.groups):
        p.error(f"--groups: watch and nowatch, and any of {', '.join(GROUPS)}")
    for path in args.treesearch_path:
        if not (Path(path) / "treesearch" / "__init__.py").is_file():
            p.error(f"--treesearch-path {path}: no treesearch/__init__.py there")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(Path(args.worker).read_text()))))
        return 0
    if args.fetch:
        args.folders += fetch(args.fetch)
    if not args.folders:
        print("give project folders, or --fetch DIR to download three", file=sys.stderr)
        return 2
    for f in args.folders:
        if not Path(f).is_dir():
            print(f"{f}: not a folder", file=sys.stderr)
            return 2
    scratch = Path(tempfile.mkdtemp(prefix="ts-real-", dir=args.tmp))
    try:
        t0 = time.perf_counter()
        res = measure(args, scratch)
        res["seconds"] = time.perf_counter() - t0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    print(report(res))
    print(f"\nwall time {res['seconds']:.0f} s; load average {os.getloadavg()[0]:.1f}")
    return 1 if res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
