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
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

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
        self.killed = 0
        """git processes of ``run`` that a signal ended (or that were left when an exception,
        such as ``KeyboardInterrupt``, stopped the wait): such a process may leave its lock
        files behind (the store's lock then reclaims them, ``_lock.py``)."""

    def with_env(self, **overrides: str) -> dict[str, str]:
        env = dict(self.env)
        env.update(overrides)
        return env

    def run(self, args: Sequence[str], **kw: Any) -> bytes:
        """git's standard output; ``GitFailed`` (with its standard error) on another exit code.
        ``kw``: those of ``call``."""
        return self.call(args, **kw).stdout

    def call(
        self,
        args: Sequence[str],
        *,
        input: bytes | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        ok_codes: Iterable[int] = (0,),
    ) -> subprocess.CompletedProcess[bytes]:
        """``run`` that also gives git's standard error (what ``-v`` options report)."""
        cmd = [git_executable(), *args]
        try:
            proc = subprocess.run(
                cmd,
                input=input,
                capture_output=True,
                env=dict(env) if env is not None else self.env,
                cwd=str(cwd or self.work_tree),
                pass_fds=self.pass_fds,
                check=False,
            )
        except BaseException:
            self.killed += 1
            raise
        if proc.returncode < 0:
            self.killed += 1
        if proc.returncode not in tuple(ok_codes):
            raise GitFailed(args, proc.returncode, proc.stderr)
        return proc

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


class BinarySink(Protocol):
    def write(self, data: bytes, /) -> object: ...


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
