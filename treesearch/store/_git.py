"""Running git for the store: a fully built environment, never the caller's.

GitPython's ``Git.execute`` starts from ``os.environ`` and can only add variables, so inherited
``GIT_DIR``/``GIT_INDEX_FILE``/``GIT_CONFIG_*`` and friends would reach the shadow repository. The
store therefore runs git through ``subprocess`` with an environment built from nothing; GitPython's
exception type is still what callers of ``GitRunner`` never see (``GitFailed`` is private and mapped
to one error class per operation in ``shadow.py``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import zlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from treesearch.errors import StoreError

_GIT_EXE: str | None = None


def git_executable() -> str:
    global _GIT_EXE
    if _GIT_EXE is None:
        found = shutil.which("git")
        if found is None:
            raise StoreError("git was not found on PATH; install git (>= 2.37) to use the store")
        _GIT_EXE = found
    return _GIT_EXE


class GitFailed(Exception):
    """A git command exited non-zero (private; mapped to a StoreError subclass by the caller)."""

    def __init__(self, args: Sequence[str], code: int, stderr: bytes) -> None:
        self.cmd = list(args)
        self.code = code
        self.stderr = stderr.decode("utf-8", "replace").strip()
        super().__init__(f"git {' '.join(self.cmd[:3])} exited {code}: {self.stderr[-2000:]}")


def isolated_env(**extra: str) -> dict[str, str]:
    """An environment for git with no trace of the caller's git setup.

    No global or system config, no system attributes, no prompts, C locale; ``extra`` adds the
    ``GIT_DIR``/``GIT_WORK_TREE``/``GIT_INDEX_FILE`` of the repository being driven.
    """
    exe_dir = os.path.dirname(git_executable())
    env = {
        "PATH": os.pathsep.join([exe_dir, os.defpath]),
        "HOME": os.devnull,
        "XDG_CONFIG_HOME": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_AUTHOR_NAME": "treesearch",
        "GIT_AUTHOR_EMAIL": "treesearch@localhost",
        "GIT_COMMITTER_NAME": "treesearch",
        "GIT_COMMITTER_EMAIL": "treesearch@localhost",
        "LC_ALL": "C",
        "LANG": "C",
        "TZ": "UTC",
    }
    env.update(extra)
    return env


class GitRunner:
    """Runs git against one repository/work tree/index with an isolated environment."""

    def __init__(self, git_dir: Path, work_tree: Path, index_file: Path) -> None:
        self.git_dir = git_dir
        self.work_tree = work_tree
        self.index_file = index_file
        self.env = isolated_env(
            GIT_DIR=str(git_dir), GIT_WORK_TREE=str(work_tree), GIT_INDEX_FILE=str(index_file)
        )
        self.pass_fds: tuple[int, ...] = ()

    def with_env(self, **overrides: str) -> dict[str, str]:
        env = dict(self.env)
        env.update(overrides)
        return env

    def run(
        self,
        args: Sequence[str],
        *,
        input: bytes | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        ok_codes: Iterable[int] = (0,),
    ) -> bytes:
        cmd = [git_executable(), *args]
        proc = subprocess.run(
            cmd,
            input=input,
            capture_output=True,
            env=dict(env) if env is not None else self.env,
            cwd=str(cwd or self.work_tree),
            pass_fds=self.pass_fds,
            check=False,
        )
        if proc.returncode not in tuple(ok_codes):
            raise GitFailed(args, proc.returncode, proc.stderr)
        return proc.stdout

    def popen(
        self, args: Sequence[str], *, env: Mapping[str, str] | None = None, stdin: int | None = None
    ) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [git_executable(), *args],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else self.env,
            cwd=str(self.work_tree),
            pass_fds=self.pass_fds,
        )


def blob_oid(data: bytes) -> str:
    """git's id of a blob holding ``data`` (SHA-1 of ``blob <size>\\0`` + data)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class BlobReader:
    """Reads blobs: loose objects directly (zlib, id checked), others through one long-lived
    ``git cat-file --batch``, started only when first needed."""

    _LOOSE_MAX = 8 << 20

    def __init__(self, git: GitRunner) -> None:
        self._git = git
        self._proc: subprocess.Popen[bytes] | None = None

    def read_to(self, oid: str, sink: BinarySink) -> int:
        """Stream blob ``oid`` into ``sink`` (has ``write``); return its size."""
        data = self._loose(oid)
        if data is not None:
            sink.write(data)
            return len(data)
        if self._proc is None:
            self._proc = self._git.popen(["cat-file", "--batch"], stdin=subprocess.PIPE)
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(oid.encode() + b"\n")
        self._proc.stdin.flush()
        header = self._proc.stdout.readline()
        parts = header.split()
        if len(parts) != 3 or parts[1] != b"blob":
            raise GitFailed(["cat-file", "--batch", oid], 1, header)
        size = int(parts[2])
        left = size
        out = self._proc.stdout
        while left:
            chunk = out.read(min(left, 1 << 20))
            if not chunk:
                raise GitFailed(["cat-file", "--batch", oid], 1, b"short read")
            sink.write(chunk)
            left -= len(chunk)
        out.read(1)  # the LF after the content
        return size

    def _loose(self, oid: str) -> bytes | None:
        """The blob from its loose object file, or ``None`` (packed, large, or not a clean
        blob: git then reads it, and reports any damage)."""
        path = os.path.join(self._git.git_dir, "objects", oid[:2], oid[2:])
        try:
            with open(path, "rb") as fh:
                raw = fh.read(self._LOOSE_MAX + 1)
        except OSError:
            return None
        if len(raw) > self._LOOSE_MAX:
            return None
        try:
            full = zlib.decompress(raw)
        except zlib.error:
            return None
        head, sep, data = full.partition(b"\0")
        if not sep or head != b"blob %d" % len(data):
            return None
        if blob_oid(data) != oid:
            return None
        return data

    def read(self, oid: str) -> bytes:
        buf = _Buffer()
        self.read_to(oid, buf)
        return b"".join(buf.parts)

    def close(self) -> None:
        if self._proc is None:
            return
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        for stream in (self._proc.stdout, self._proc.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> BlobReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BinarySink(Protocol):
    def write(self, data: bytes, /) -> object: ...


class _Buffer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.parts.append(data)
        return len(data)


FIXED_DATE_EPOCH = 946684800
"""2000-01-01T00:00:00Z: the first date of a fixed-date snapshot in an empty store."""


def fixed_commit_date(previous: float | None) -> float:
    """The date of a snapshot taken with fixed dates: a millisecond after the previous snapshot
    (never before ``FIXED_DATE_EPOCH``), so the same operations on the same store state give the
    same commit ids, snapshots stay ordered by date, and in a store with dated snapshots the
    dates stay close to the clock's (a thousand snapshots move them by one second)."""
    if previous is None:
        return float(FIXED_DATE_EPOCH)
    return max(round(previous + 0.001, 3), float(FIXED_DATE_EPOCH))


def date_env(date: int) -> dict[str, str]:
    """Author and committer date of a commit, as git's environment variables."""
    stamp = f"@{date} +0000"
    return {"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
