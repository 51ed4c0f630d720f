"""Read-only source repositories: materialise a commit, build small repositories, apply patches.

An evaluation reads its instances' repositories (local clones or mirrors) without ever writing to
them: a commit is written into a fresh folder through a temporary index kept outside the
repository, and nothing else is touched (no lock, no fetch, no ref update). Patches (SWE-bench's
``test_patch``) are applied to such folders with ``git apply`` run outside any repository. The
builder of the built-in instance set creates its small repositories here too, so that ``store/``
stays the only code that runs git.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from treesearch.errors import StoreError
from treesearch.store._apply import PatchError, apply
from treesearch.store._git import GitFailed, GitRunner, isolated_env
from treesearch.types import PatchResult

__all__ = [
    "PatchError",
    "SourceError",
    "apply_patch",
    "commit_folder",
    "diff_commits",
    "git_dir_of",
    "materialize_commit",
    "resolve_commit",
]

# Reading a repository owned by another user is fine: nothing is ever written to it.
_SAFE = ["-c", "safe.directory=*"]
_FIXED_DATE = "1700000000 +0000"


class SourceError(StoreError):
    """A source repository or one of its commits cannot be read."""


def git_dir_of(repo: Path) -> Path | None:
    """The git folder of ``repo`` (a clone with ``.git`` or a bare mirror), or ``None``."""
    dot = repo / ".git"
    if dot.is_dir():
        return dot
    if (repo / "HEAD").is_file() and (repo / "objects").is_dir():
        return repo
    return None


def _runner(git_dir: Path, work_tree: Path, index: Path) -> GitRunner:
    return GitRunner(git_dir, work_tree, index)


def resolve_commit(repo: Path, commit: str) -> str | None:
    """The full id of ``commit`` in ``repo``, or ``None`` when the repository lacks it."""
    git_dir = git_dir_of(repo)
    if git_dir is None:
        raise SourceError(f"{repo} is not a git repository (no .git folder, not a bare mirror)")
    if not commit or commit.startswith("-"):
        return None
    runner = _runner(git_dir, repo, git_dir / "index")
    out = runner.run(
        [*_SAFE, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{commit}^{{commit}}"],
        cwd=git_dir,
        ok_codes=(0, 1, 128),
    )
    text = out.decode().strip()
    return text or None


def materialize_commit(repo: Path, commit: str, dest: Path) -> str:
    """Write the tree of ``commit`` of ``repo`` into ``dest`` (missing or empty); return its id.

    The repository is only read: the index used is a temporary file outside it.
    """
    full = resolve_commit(repo, commit)
    if full is None:
        raise SourceError(f"commit {commit} is not in {repo}")
    git_dir = git_dir_of(repo)
    assert git_dir is not None
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise SourceError(f"{dest} is not an empty folder")
    dest.mkdir(parents=True, exist_ok=True)
    fd, index_name = tempfile.mkstemp(prefix="treesearch-index-")
    os.close(fd)
    os.unlink(index_name)  # git wants to create it; an empty file is not a valid index
    index = Path(index_name)
    runner = _runner(git_dir, dest, index)
    try:
        runner.run([*_SAFE, "read-tree", full], cwd=dest)
        runner.run([*_SAFE, "checkout-index", "-a", "-f"], cwd=dest)
    except GitFailed as exc:
        raise SourceError(f"cannot write {commit} of {repo} into {dest}: {exc.stderr}") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            index.unlink()
    return full


def apply_patch(folder: Path, patch: str, *, strip: int = 1) -> PatchResult:
    """Apply a unified diff (``a/``/``b/`` paths, as ``git diff`` writes) to ``folder``, with
    ``git apply`` run outside any repository (``GIT_CEILING_DIRECTORIES`` stops the search above
    ``folder``).

    All or nothing: a patch that does not apply leaves the folder as it was (``PatchError``).
    """
    env = isolated_env(GIT_CEILING_DIRECTORIES=str(folder.resolve().parent))
    runner = GitRunner(folder, folder, folder)  # paths unused: env below has no GIT_DIR
    return apply(runner, folder, patch, strip=strip, env=env)


def commit_folder(
    repo: Path, folder: Path, *, message: str, parent: str | None = None, branch: str = "main"
) -> str:
    """Commit the files of ``folder`` into the bare repository ``repo`` (created if missing).

    Author, committer and date are fixed, so the same content and parent give the same commit id.
    """
    if git_dir_of(repo) is None:
        repo.mkdir(parents=True, exist_ok=True)
        GitRunner(repo, repo, repo / "index").run(
            ["init", "--bare", "-q", "-b", branch, str(repo)], env=isolated_env(), cwd=repo
        )
    fd, index_name = tempfile.mkstemp(prefix="treesearch-index-")
    os.close(fd)
    os.unlink(index_name)
    index = Path(index_name)
    runner = _runner(repo, folder, index)
    env = runner.with_env(GIT_AUTHOR_DATE=_FIXED_DATE, GIT_COMMITTER_DATE=_FIXED_DATE)
    try:
        runner.run(["add", "-A", "--", "."], cwd=folder)
        tree = runner.run(["write-tree"], cwd=folder).decode().strip()
        args = ["commit-tree", tree, "-m", message]
        if parent:
            args += ["-p", parent]
        commit = runner.run(args, env=env, cwd=folder).decode().strip()
        runner.run(["update-ref", f"refs/heads/{branch}", commit], cwd=folder)
    except GitFailed as exc:
        raise SourceError(f"cannot commit {folder} into {repo}: {exc.stderr}") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            index.unlink()
    return commit


def diff_commits(repo: Path, a: str, b: str) -> str:
    """``git diff a b`` of ``repo``: a unified diff with ``a/``/``b/`` paths, no renames."""
    git_dir = git_dir_of(repo)
    if git_dir is None:
        raise SourceError(f"{repo} is not a git repository")
    runner = _runner(git_dir, repo, git_dir / "index")
    try:
        out = runner.run(
            [*_SAFE, "diff", "--no-color", "--no-renames", "--binary", "--no-ext-diff", a, b],
            cwd=git_dir,
        )
    except GitFailed as exc:
        raise SourceError(f"cannot diff {a}..{b} in {repo}: {exc.stderr}") from exc
    return out.decode("utf-8", "surrogateescape")
