"""Held-out grading: the final answer is graded in a fresh copy, never in the searched workspace.

The best tree is materialised into a temporary folder, the held-out test files (kept outside the
workspace, so no agent could read them during the search) are laid over it, and the grade spec
runs there. ``scoring.grade_files`` names them: a mapping from a path inside the grading copy to
a file or folder outside the workspace, e.g. ``{heldout: ../heldout}``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from treesearch.errors import ConfigError
from treesearch.scoring.results import ScoreResult
from treesearch.scoring.scorer import Scorer, SnapshotSource, _remove_tree

__all__ = ["check_grade_files", "grade_in_copy"]


def check_grade_files(
    value: Any, source: str, base_dir: Path, workspace: Path | None
) -> dict[str, Path]:
    """``scoring.grade_files`` as {destination: absolute source path}, checked.

    Raises ``ConfigError`` for a bad shape, a missing source, a destination that leaves the copy,
    or a source inside the workspace (where the search could read it)."""
    at = f"{source}: scoring.grade_files"
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"{at}: must map a path in the grading copy to a file or folder outside the "
            "workspace, e.g. {heldout: ../heldout}"
        )
    out: dict[str, Path] = {}
    for dest, src in value.items():
        d = PurePosixPath(str(dest))
        if not str(dest) or d.is_absolute() or ".." in d.parts:
            raise ConfigError(f"{at}.{dest}: must be a relative path inside the grading copy")
        if not isinstance(src, str) or not src:
            raise ConfigError(f"{at}.{dest}: must be the path of a file or folder")
        p = Path(src).expanduser()
        p = (p if p.is_absolute() else base_dir / p).resolve()
        if not p.exists():
            raise ConfigError(f"{at}.{dest}: {p} does not exist")
        if workspace is not None:
            ws = workspace.resolve()
            if p == ws or ws in p.parents:
                raise ConfigError(
                    f"{at}.{dest}: {p} is inside the workspace, where the search can read it; "
                    "keep held-out tests outside the workspace"
                )
        out[str(d)] = p
    return out


def grade_in_copy(
    scorer: Scorer,
    store: SnapshotSource,
    tree: str,
    files: Mapping[str, Path],
    *,
    name: str = "workspace",
) -> ScoreResult:
    """Grade snapshot ``tree`` in a fresh copy with ``files`` laid over it; the copy is removed.

    Without ``files`` the copy holds exactly the tree, so the cache can key the result by it."""
    tmp = Path(tempfile.mkdtemp(prefix="treesearch-grade-"))
    try:
        dest = tmp / name
        store.materialize(tree, dest)
        for rel, src in files.items():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, target, symlinks=True, dirs_exist_ok=True)
            else:
                shutil.copy2(src, target)
        return scorer.grade(dest, tree=None if files else tree)
    finally:
        _remove_tree(tmp)
