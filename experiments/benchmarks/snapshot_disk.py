#!/usr/bin/env python3
"""Disk and time per snapshot at umask 022 and 002: two versions of the store side by side.

Usage::

    python experiments/benchmarks/snapshot_disk.py [--files 10000] [--checkout PATH ...]
        [--old-rev REV | --old PATH] [--umasks 022,002] [--reps 5]

For each workspace (a generated tree, or a copy of each checkout given, ``.git`` left out) and
each umask, the files get the modes a checkout made under that umask would have (0664 under 002),
then each version of the store (``old``: the treesearch source at ``--old-rev`` of this
repository, exported with ``git archive``, or at ``--old``; ``new``: this checkout) takes the first
snapshot and 20 more, each after 2 files changed. Each version runs in its own process on its own
copy. Reported: the objects' disk use after the first and after all 21 (ratio; target <= 1.05 at
any umask), the median capture after 2 changes and the median no-change capture.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
MiB = 1 << 20


def _apply_umask(root: Path, umask: int) -> int:
    """Give every file the mode a checkout under ``umask`` gives it; returns the file count."""
    n = 0
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        os.chmod(dirpath, 0o777 & ~umask)
        for name in files:
            p = os.path.join(dirpath, name)
            if os.path.islink(p):
                continue
            execu = os.stat(p).st_mode & 0o100
            os.chmod(p, (0o777 if execu else 0o666) & ~umask)
            n += 1
    return n


def worker(ws: Path, home: Path, reps: int) -> dict[str, float]:
    from treesearch.store import ShadowStore

    files = sorted(
        str(p.relative_to(ws)) for p in ws.rglob("*") if p.is_file() and not p.is_symlink()
    )
    rng = random.Random(7)
    store = ShadowStore.open(ws, home=home)
    store.capture()
    first = store.disk_usage()
    seconds = []
    for i in range(20):
        for p in rng.sample(files, 2):
            with open(ws / p, "ab") as fh:
                fh.write(f"# edit {i}\n".encode())
        t0 = time.perf_counter()
        store.capture()
        seconds.append(time.perf_counter() - t0)
    after = store.disk_usage()
    nochange = []
    for _ in range(reps):
        t0 = time.perf_counter()
        store.capture()
        nochange.append(time.perf_counter() - t0)
    last = store.log(limit=1)[0]
    message = store._git.run(["cat-file", "commit", last.commit])
    store.close()
    return {
        "first": first,
        "after": after,
        "capture_2": statistics.median(seconds),
        "nochange": statistics.median(nochange),
        "message_bytes": len(message),
    }


def run_version(code: Path, ws: Path, base: Path, reps: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(code)}
    home = base / "home"
    out = subprocess.run(
        [sys.executable, __file__, "--worker", str(ws), str(home), str(reps)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        sys.exit(f"the worker ({code}) failed:\n{out.stderr[-3000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=10_000, help="generated tree size (0: none)")
    ap.add_argument("--checkout", action="append", default=[], help="a folder to copy and use")
    ap.add_argument("--old-rev", default="HEAD~5", help="git revision of the old store")
    ap.add_argument("--old", help="a treesearch source root to use as the old store instead")
    ap.add_argument("--umasks", default="022,002")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        ws, home, reps = args.worker
        print(json.dumps(worker(Path(ws), Path(home), int(reps))))
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="ts-disk-"))
    try:
        if args.old:
            old = Path(args.old).resolve()
        else:
            old = tmp / "old-code"
            old.mkdir()
            archive = subprocess.run(
                ["git", "-C", str(REPO), "archive", args.old_rev, "treesearch"],
                capture_output=True,
                check=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        sources: list[tuple[str, Path]] = []
        if args.files:
            sys.path.insert(0, str(HERE))
            from snapshot import generate_tree  # the snapshot benchmark's generated tree

            gen = tmp / "generated"
            generate_tree(gen, args.files)
            sources.append((f"generated {args.files}", gen))
        for c in args.checkout:
            sources.append((Path(c).name, Path(c).resolve()))
        rows = []
        for name, src in sources:
            for umask_text in args.umasks.split(","):
                umask = int(umask_text, 8)
                for version, code in (("old", old), ("new", REPO)):
                    base = tmp / f"{version}-{umask_text}"
                    ws = base / "ws"
                    shutil.copytree(src, ws, symlinks=True, ignore=shutil.ignore_patterns(".git"))
                    n = _apply_umask(ws, umask)
                    r = run_version(code, ws, base, args.reps)
                    shutil.rmtree(base)
                    rows.append((name, n, umask_text, version, r))
                    ratio = r["after"] / r["first"]
                    print(
                        f"{name:<20} {n:>6} files  umask {umask_text}  {version:<3}  "
                        f"first {r['first'] / MiB:8.2f} MiB  +20 {r['after'] / MiB:8.2f} MiB  "
                        f"ratio {ratio:.3f}  capture(2 changed) {r['capture_2'] * 1000:7.1f} ms  "
                        f"no-change {r['nochange'] * 1000:6.1f} ms  "
                        f"message {r['message_bytes']:,} B",
                        flush=True,
                    )
        print("\ntarget: first + 20 snapshots of 2 changes <= 1.05x the first, at any umask")
        for name, n, umask_text, version, r in rows:
            ratio = r["after"] / r["first"]
            verdict = "PASS" if ratio <= 1.05 else "FAIL"
            print(f"  {name} ({n} files) umask {umask_text} {version}: {ratio:.3f}x {verdict}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
