"""Shared fixtures: real temporary workspaces, a store home outside them, and a git helper that
needs no user git configuration."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from treesearch.store import _git

GIT_ENV_KEYS_TO_DROP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY")


def pytest_configure(config: pytest.Config) -> None:
    """A suite started with SIGINT ignored (a job a shell without job control started in the
    background: ``(cmd &)``, ``nohup cmd &`` in a script) passes that on to every process its
    tests start, and the tests of Ctrl-C then see a search that cannot be interrupted. Handle
    SIGINT as a fresh interpreter does: a handled signal is reset to the default in the
    programs the tests run."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # The tests' configs run `python -m pytest`: make that the interpreter of this suite, as an
    # activated virtual environment does, so that `/path/to/venv/bin/python -m pytest` run
    # without activating it tests the same thing (else the first `python` on PATH, which may
    # lack coverage or treesearch's own dependencies, runs every test run of the tests).
    found = shutil.which("python")
    if found is None or not os.path.samefile(found, sys.executable):
        os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]])


def clean_git_env(**extra: str) -> dict[str, str]:
    """Environment for running the user's git in tests: no global/system config, fixed identity."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="Test",
        GIT_AUTHOR_EMAIL="test@example.com",
        GIT_COMMITTER_NAME="Test",
        GIT_COMMITTER_EMAIL="test@example.com",
        GIT_OPTIONAL_LOCKS="0",  # `git status` in a test must not rewrite the index it checks
    )
    env.update(extra)
    return env


def run_git(cwd: Path, *args: str, input: bytes | None = None) -> str:
    """Run the user's git in ``cwd`` (as a user would), failing the test on error."""
    proc = subprocess.run(
        ["git", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        env=clean_git_env(),
        input=input,
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr.decode()}")
    return proc.stdout.decode("utf-8", "replace")


def tree_digest(root: Path, *, include_mtime: bool = False, skip_git: bool = False) -> dict:
    """Everything observable under ``root``: type, permission bits, bytes or link target per path.

    ``.git`` folders are included unless ``skip_git``; with ``include_mtime`` file mtimes count too
    (used to prove nothing under a ``.git`` was even rewritten).
    """
    out: dict = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if skip_git:
            dirnames[:] = [d for d in dirnames if d != ".git"]
            filenames = [f for f in filenames if f != ".git"]
        rel_dir = os.path.relpath(dirpath, root)
        for name in sorted(dirnames):
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            key = os.path.normpath(os.path.join(rel_dir, name))
            if stat.S_ISLNK(st.st_mode):
                out[key] = ("link", os.readlink(p))
            else:
                out[key] = ("dir", stat.S_IMODE(st.st_mode))
        for name in sorted(filenames):
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            key = os.path.normpath(os.path.join(rel_dir, name))
            if stat.S_ISLNK(st.st_mode):
                out[key] = ("link", os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as fh:
                    digest = hashlib.sha256(fh.read()).hexdigest()
                entry: tuple = ("file", stat.S_IMODE(st.st_mode), digest)
                if include_mtime:
                    entry += (st.st_mtime_ns,)
                out[key] = entry
            else:
                out[key] = ("special", stat.S_IFMT(st.st_mode))
    return out


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A store home outside the workspace."""
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def write() -> Callable[..., Path]:
    """Write ``content`` (str or bytes) to ``root/rel``, creating folders."""

    def _write(root: Path, rel: str, content: str | bytes = "", mode: int | None = None) -> Path:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content.encode() if isinstance(content, str) else content)
        if mode is not None:
            p.chmod(mode)
        return p

    return _write


# ---------------------------------------------------------------------------- watcher on and off

SLOW_TESTS_IN_BOTH_WATCH_MODES = frozenset(
    {"test_sigkill_at_random_points_leaves_store_clean_and_workspace_whole"}
)
"""Slow tests that also run with the watcher off (others run with it on only)."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests that use ``watch_mode`` run with the store's watcher on and off (slow ones: on only,
    except those named in ``SLOW_TESTS_IN_BOTH_WATCH_MODES``)."""
    if "watch_mode" not in metafunc.fixturenames:
        return
    modes = ["watch", "no-watch"]
    if (
        metafunc.definition.get_closest_marker("slow") is not None
        and metafunc.function.__name__ not in SLOW_TESTS_IN_BOTH_WATCH_MODES
    ):
        modes = ["watch"]
    metafunc.parametrize("watch_mode", modes, indirect=True)


@pytest.fixture
def watch_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """The store's watcher on (True) or off, for every store the test opens or its children do.

    The library reads no environment variable: stores opened in this process get the mode as the
    default of ``ShadowStore.open(watch=...)``; child processes get it as ``TREESEARCH_WATCH``,
    which the command line reads (and the tests' own ``python -c`` children pass on)."""
    from treesearch.store import ShadowStore

    on = request.param == "watch"
    monkeypatch.setenv("TREESEARCH_WATCH", "1" if on else "0")
    opener = ShadowStore.open.__func__  # type: ignore[attr-defined]

    def open_in_mode(cls: type[ShadowStore], *args: object, **kw: object) -> ShadowStore:
        kw.setdefault("watch", on)
        return opener(cls, *args, **kw)  # type: ignore[no-any-return]

    monkeypatch.setattr(ShadowStore, "open", classmethod(open_in_mode))
    return on


@pytest.fixture
def git_path_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every git process the store starts from now on (its runner, its ``cat-file``s), logged
    by a wrapper ``git`` one line per process."""
    log = tmp_path / "git-calls.log"
    wrapper = tmp_path / "bin" / "git"
    wrapper.parent.mkdir()
    real = _git.git_executable()
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setattr(_git, "_GIT_EXE", str(wrapper))
    log.write_text("")
    return log
