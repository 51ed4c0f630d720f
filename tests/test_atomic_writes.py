"""One atomic-write helper for every writer outside the store (issue 13): ``treesearch/_atomic.py``.

The store has its own (``store/_fs.py``, checked in ``test_store_errors.py``); everything else
that replaces a file by rename goes through ``_atomic.write_text``, so a crash never leaves a half
file and a failed write never leaves its temporary file behind.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

import treesearch
from treesearch._atomic import write_text

# The renames that are not a file's atomic write, each with its reason:
ALLOWED = {
    "_atomic.py": "the helper itself",
    "_confined.py": "the sandbox's folder-descriptor writer (renameat inside one held folder)",
    "eval/batch.py": "publishes a whole instance folder by one rename",
    "testing.py": "the in-memory store materialises a workspace (symlinks, modes), as restore does",
    "scoring/_warm_speed.py": "runs in the tests' interpreter, standard library only (its cache)",
}


def test_no_hand_made_atomic_write_outside_the_store_and_the_helper() -> None:
    """Regression (#13): lifecycle.py, session/_log.py, agents/llm/replay.py,
    agents/mutation/localize.py and runs/cleanup.py each wrote a temp file and renamed it by hand
    (with fixed temp names two writers could share)."""
    package = Path(treesearch.__file__).parent
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel.startswith("store/") or rel in ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            owner = getattr(node.func.value, "id", "")
            if owner == "os" and node.func.attr in ("replace", "rename"):
                found.append(f"{rel}:{node.lineno} os.{node.func.attr}")
            if owner == "tempfile" and node.func.attr in ("mkstemp", "NamedTemporaryFile"):
                found.append(f"{rel}:{node.lineno} tempfile.{node.func.attr}")
    assert found == []


def test_write_text_replaces_the_file_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "record.json"
    target.write_text("old\n")
    write_text(target, "new\n", fsync=True)
    assert target.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record.json"]


def test_write_text_that_fails_keeps_the_old_file_and_removes_its_temporary_file(
    tmp_path: Path,
) -> None:
    target = tmp_path / "record.json"
    target.write_text("old\n")
    with pytest.raises(UnicodeEncodeError):
        write_text(target, "bad \udcff surrogate")  # fails inside the write, after the open
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record.json"]


def test_two_writers_of_one_file_never_share_a_temporary_file(tmp_path: Path) -> None:
    """Each write has a temp name of its own: a second writer can't truncate the first's file."""
    target = tmp_path / "f.txt"
    seen: set[str] = set()
    real_replace = os.replace

    def spy(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        seen.add(os.fspath(src))
        real_replace(src, dst)

    os.replace = spy  # type: ignore[assignment]
    try:
        for i in range(5):
            write_text(target, f"{i}\n")
    finally:
        os.replace = real_replace  # type: ignore[assignment]
    assert len(seen) == 5
