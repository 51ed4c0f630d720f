"""Soak: a search and a user share one workspace; every capture equals the workspace, nothing lost.

Two real processes open the same store. One runs search-like cycles through the public store API
(restore an earlier snapshot of its own, edit as an agent would, capture); the other makes random
edits (content, same-size edits that put the old mtime back, ``cp -p``-like copies, renames, hard
links inside the workspace and writes through them, deletions, symlinks, chmod) and captures.
Each round runs under the store's own lock (``ShadowStore.lock``), the per-operation lock that
serialises the two, so a capture can be compared with a full-content walk of the workspace taken
in the same round. After every round:

- the capture holds exactly what is on disk (path, mode, permission bits, content);
- a restore's safety snapshot holds exactly what was on disk before the restore, and the
  workspace then equals the target.

At the end every snapshot either process recorded still holds what it held when recorded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from treesearch.store import ShadowStore

pytestmark = pytest.mark.slow

SEARCH_CYCLES = 200
EDIT_ROUNDS = 200

CHILD = r'''
import hashlib, json, os, random, shutil, stat, sys, time
from pathlib import Path
from treesearch.store import ShadowStore

role, seed, ws, home, rounds, out = sys.argv[1:7]
ws, rounds, rng = Path(ws), int(rounds), random.Random(f"{role}-{seed}")


def blob(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def on_disk():
    """path -> (git mode, blob id, permission bits), by reading every byte."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(ws):
        names = filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        for name in names:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, ws)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = (0o120000, blob(os.fsencode(os.readlink(p))), 0o777)
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as fh:
                    data = fh.read()
                mode = 0o100755 if st.st_mode & 0o100 else 0o100644
                out[rel] = (mode, blob(data), stat.S_IMODE(st.st_mode))
    return out


def held(store, ref):
    return {e.path: (e.mode, e.oid, e.perm) for e in store.files(ref)}


def check(what, got, want):
    if got != want:
        diff = sorted(p for p in got.keys() | want.keys() if got.get(p) != want.get(p))
        raise AssertionError(f"{role} round {r}: {what} differs at {diff[:5]}")


def files():
    return sorted(
        p for p in ws.rglob("*") if p.is_file() and not p.is_symlink()
    )


def dirs():
    return [ws] + sorted(p for p in ws.rglob("*") if p.is_dir() and not p.is_symlink())


def same_size_text(n, size):
    text = (f"{role} {n} " * (size // 4 + 2)).encode()[:size]
    return text or b"x"


def edit(n):
    op = rng.choice(
        ["write", "write", "same_size_old_mtime", "copy_p", "rename", "rename_dir", "link",
         "delete", "rmtree", "mkdir", "symlink", "chmod"]
    )
    fs, ds = files(), dirs()
    d = rng.choice(ds)
    if op == "write" or not fs:
        target = rng.choice(fs) if fs and rng.random() < 0.6 else d / f"e{n}.txt"
        target.write_bytes(f"{role} wrote {n}\n".encode() * rng.randint(1, 4))
    elif op == "same_size_old_mtime":
        f = rng.choice(fs)
        st = f.stat()
        f.write_bytes(same_size_text(n, st.st_size))
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    elif op == "copy_p":
        src, dst = rng.choice(fs), rng.choice(fs)
        if src != dst and not os.path.samefile(src, dst):
            shutil.copy2(src, dst)  # as cp -p: content in place, then the source's times
    elif op == "rename":
        rng.choice(fs).rename(d / f"r{n}.txt")
    elif op == "rename_dir" and d != ws:
        to = rng.choice(ds)
        if to != d and d not in to.parents:
            d.rename(to / f"rd{n}")
    elif op == "link":
        os.link(rng.choice(fs), d / f"h{n}.txt")  # a write through either name changes both
    elif op == "delete":
        rng.choice(fs).unlink()
    elif op == "rmtree" and d != ws:
        shutil.rmtree(d)
    elif op == "mkdir":
        (d / f"d{n}").mkdir()
        (d / f"d{n}" / "inner.txt").write_text(f"inner {n}\n")
    elif op == "symlink":
        os.symlink(f"target-{n}", d / f"s{n}")
    elif op == "chmod":
        rng.choice(fs).chmod(rng.choice([0o644, 0o755, 0o600]))
    return op


store = ShadowStore.open(ws, home=home)
recorded = []
for r in range(rounds):
    with store.lock():
        if role == "search" and recorded:
            before = on_disk()
            commit, want = rng.choice(recorded)
            res = store.restore(commit)
            check("the safety snapshot", held(store, res.safety.commit), before)
            check("the workspace after the restore", on_disk(), want)
        for i in range(rng.randint(1, 3) if role == "edit" else 1):
            if role == "edit":
                if edit(r * 10 + i) == "link":
                    # A capture must meet a new link before it goes: a link made, written
                    # through and removed between two scans is seen by a restore's safety scan
                    # only (README, "what inotify does not report").
                    break
            else:  # an agent's edit
                fs = files()
                f = rng.choice(fs) if fs and rng.random() < 0.7 else ws / f"agent{r}.py"
                f.write_text(f"# search cycle {r}\n" * rng.randint(1, 3))
        snap = store.capture(label=f"{role} {r}")
        now = on_disk()
        check("the capture", held(store, snap.commit), now)
        recorded.append((snap.commit, now))
    time.sleep(rng.uniform(0, 0.004))  # let the other process take the lock
Path(out).write_text(json.dumps([[c, {p: list(v) for p, v in m.items()}] for c, m in recorded]))
'''


def test_a_search_and_a_user_editing_one_workspace_never_lose_an_edit(tmp_path: Path) -> None:
    ws, home = tmp_path / "ws", tmp_path / "home"
    for d in range(3):
        for f in range(5):
            p = ws / f"pkg{d}" / f"m{f}.py"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(f"value = {d * 10 + f}\n")
    ShadowStore.open(ws, home=home).capture(label="start")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "TREESEARCH_WATCH": "1"}
    children = {
        role: subprocess.Popen(
            [
                sys.executable,
                "-c",
                CHILD,
                role,
                "7",
                str(ws),
                str(home),
                str(n),
                str(tmp_path / f"{role}.json"),
            ],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for role, n in (("search", SEARCH_CYCLES), ("edit", EDIT_ROUNDS))
    }
    errors = {role: child.communicate(timeout=600)[1] for role, child in children.items()}
    for role, child in children.items():
        assert child.returncode == 0, f"the {role} process failed:\n{errors[role][-3000:]}"
    # Nothing lost: every snapshot either process recorded still holds what it held.
    store = ShadowStore.open(ws, home=home)
    for role in children:
        recorded = json.loads((tmp_path / f"{role}.json").read_text())
        assert len(recorded) == (SEARCH_CYCLES if role == "search" else EDIT_ROUNDS)
        for commit, want in recorded:
            held = {e.path: [e.mode, e.oid, e.perm] for e in store.files(commit)}
            assert held == want, f"{role} snapshot {commit[:12]} changed"
    store.fsck()
