"""Rewinding a session leaves the tree folder-exact: empty folders made after the target go,
empty folders of the target come back (real files, real git)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import tree_digest

from treesearch.session import TransactionalSession
from treesearch.store import ShadowStore


@pytest.fixture
def store(workspace: Path, home: Path) -> Iterator[ShadowStore]:
    (workspace / "a.py").write_text("x = 1\n")
    s = ShadowStore.open(workspace, home=home)
    yield s
    s.close()


@pytest.fixture
def session(store: ShadowStore, tmp_path: Path) -> TransactionalSession:
    return TransactionalSession.create(store, tmp_path / "s.jsonl", messages=[])


def write(path: str, content: str) -> dict:
    return {"name": "write_file", "arguments": {"path": path, "content": content}}


def mkdirs(*paths: str) -> dict:
    return {"name": "run", "arguments": {"command": "mkdir -p " + " ".join(paths)}}


def test_rewind_removes_empty_folders_made_by_a_later_step(
    session: TransactionalSession, workspace: Path
) -> None:
    session.step([write("a.py", "x = 2\n")])
    at_one = tree_digest(workspace)
    session.step([mkdirs("new/inner")])  # same content tree, new empty folders
    assert (workspace / "new" / "inner").is_dir()
    session.rewind(1)
    assert not (workspace / "new").exists()
    assert tree_digest(workspace) == at_one
    session.undo_rewind()
    assert (workspace / "new" / "inner").is_dir()


def test_rewind_removes_empty_folders_made_outside_steps(
    session: TransactionalSession, workspace: Path
) -> None:
    session.step([write("a.py", "x = 2\n")])
    at_one = tree_digest(workspace)
    session.step([write("a.py", "x = 3\n")])
    (workspace / "new" / "inner").mkdir(parents=True)  # never stepped
    session.rewind(1)
    assert not (workspace / "new").exists()
    assert tree_digest(workspace) == at_one


def test_rewind_to_the_start_removes_empty_folders(
    session: TransactionalSession, workspace: Path
) -> None:
    at_zero = tree_digest(workspace)
    session.step([mkdirs("new/inner")])
    session.rewind(0)
    assert tree_digest(workspace) == at_zero


def test_rewind_brings_back_empty_folders_of_the_target(
    session: TransactionalSession, workspace: Path
) -> None:
    session.step([mkdirs("keep/inner"), write("a.py", "x = 2\n")])
    at_one = tree_digest(workspace)
    session.step([{"name": "run", "arguments": {"command": "rm -r keep"}}])
    assert not (workspace / "keep").exists()
    session.rewind(1)
    assert (workspace / "keep" / "inner").is_dir()
    assert tree_digest(workspace) == at_one


def test_rollback_removes_empty_folders_made_by_the_failed_step(
    session: TransactionalSession, workspace: Path
) -> None:
    session.step([write("a.py", "x = 2\n")])
    at_one = tree_digest(workspace)
    step = session.step(
        [mkdirs("new/inner"), {"name": "run", "arguments": {"command": "exit 3"}}],
        rollback_on_error=True,
    )
    assert not step.ok
    assert tree_digest(workspace) == at_one


def test_store_restore_prunes_the_parents_of_empty_folders_made_after_the_target(
    store: ShadowStore, workspace: Path
) -> None:
    (workspace / ".gitignore").write_text("*.log\n")
    snap = store.capture(label="start")
    at_start = tree_digest(workspace)
    (workspace / "new" / "inner").mkdir(parents=True)
    (workspace / "logs" / "inner").mkdir(parents=True)
    (workspace / "logs" / "run.log").write_text("kept\n")  # ignored: never deleted
    result = store.restore(snap.commit)
    assert set(result.pruned) == {"new", "new/inner", "logs/inner"}
    assert tree_digest(workspace) == {
        **at_start,
        "logs": tree_digest(workspace)["logs"],
        "logs/run.log": tree_digest(workspace)["logs/run.log"],
    }
    assert (workspace / "logs" / "run.log").read_text() == "kept\n"


def test_a_loaded_session_puts_back_its_folders_and_undoes_a_rewind_exactly(
    session: TransactionalSession, store: ShadowStore, workspace: Path, tmp_path: Path
) -> None:
    session.step([write("a.py", "x = 2\n")])
    at_one = tree_digest(workspace)
    session.step([mkdirs("new/inner")])
    at_two = tree_digest(workspace)
    session.rewind(1)
    session.close()
    (workspace / "stray" / "inner").mkdir(parents=True)  # same tree, other folders
    again = TransactionalSession.load(tmp_path / "s.jsonl", store)
    assert again.restored_on_load is not None
    assert tree_digest(workspace) == at_one
    again.undo_rewind()  # from the file's rewind record: the exact safety snapshot
    assert tree_digest(workspace) == at_two
    again.close()
