"""Seeding a new store from the user's own repository (read-only): the blobs git already has for
the workspace's tracked files are copied instead of hashed again, and the user's git folder is
found for the scans that take its ignore rules and tracked paths (``_scan.py``, ``workers.py``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path

from treesearch.store._fs import atomic_write
from treesearch.store._git import GitFailed, GitRunner, git_executable, isolated_env

_NO_GIT_CONFIG = ["-c", "safe.directory=*", "-c", "core.fsmonitor=false"]


def seed_from_user_repo(workspace: Path, store: Path, git: GitRunner) -> None:
    """First capture of a git workspace: start from the user's index and objects (read-only).

    The user's index file is copied (with its mtime, so git's racy-entry checks stay right)
    and the blobs it names are copied into the store with one pack stream; files whose stat
    data still match are then never read again. The store never points at the user's object
    folder, which the user's own gc may prune.
    """
    gitdir = user_git_dir(workspace)
    if gitdir is None or not (gitdir / "index").is_file():
        return
    env = isolated_env(GIT_DIR=str(gitdir), GIT_WORK_TREE=str(workspace))
    try:
        out = git.run([*_NO_GIT_CONFIG, "ls-files", "-s", "-z"], env=env)
    except GitFailed:
        return
    oids = set()
    for rec in out.split(b"\0"):
        if not rec:
            continue
        info, _, _ = rec.partition(b"\t")
        mode, oid, stage = info.split(b" ")
        if stage == b"0" and mode in (b"100644", b"100755", b"120000"):
            oids.add(oid)
    if not oids:
        return

    def readable(tmp_index: str) -> None:
        # The copy must be one our git reads (no split index or sparse index links).
        git.run(["ls-files", "-z"], env=git.with_env(GIT_INDEX_FILE=tmp_index))

    with contextlib.suppress(OSError, GitFailed):
        if not _copy_objects(workspace, store, git, env, oids):
            return
        with open(gitdir / "index", "rb") as fh:
            data = fh.read()
            mtime = os.fstat(fh.fileno()).st_mtime_ns
        # The copy keeps the user's index mtime: git's racy-entry checks stay right.
        atomic_write(store / "index", data, mtime_ns=mtime, check=readable)


def _copy_objects(
    workspace: Path, store: Path, git: GitRunner, env: dict[str, str], oids: Iterable[bytes]
) -> bool:
    """Copy the user's objects ``oids`` into the store with one pack stream."""
    pack = subprocess.Popen(
        [
            git_executable(),
            *_NO_GIT_CONFIG,
            "-c",
            "pack.compression=1",
            "pack-objects",
            "--stdout",
            "--window=0",
            "-q",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=str(workspace),
    )
    unpack = subprocess.Popen(
        [git_executable(), "index-pack", "--stdin"],
        stdin=pack.stdout,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=git.env,
        cwd=str(store),
        pass_fds=git.pass_fds,
    )
    assert pack.stdin is not None and pack.stdout is not None
    pack.stdout.close()
    pack.stdin.write(b"".join(o + b"\n" for o in sorted(oids)))
    pack.stdin.close()
    packed, unpacked = pack.wait(), unpack.wait()
    return packed == 0 and unpacked == 0


# ---------------------------------------------------------------------- helpers


def user_git_dir(root: Path) -> Path | None:
    """The git folder of the user's repository at ``root`` (a ``.git`` folder or file)."""
    dot = root / ".git"
    if dot.is_dir():
        return dot
    if dot.is_file():
        try:
            line = dot.read_text().strip()
        except OSError:
            return None
        if line.startswith("gitdir:"):
            p = Path(line[7:].strip())
            p = p if p.is_absolute() else (root / p)
            return p if p.is_dir() else None
    return None
