"""Snapshot commits written without a git process (``store/_objects.py``) are the very objects
``git commit-tree`` writes: same bytes, same ids, readable by git."""

from __future__ import annotations

from pathlib import Path

import pytest

from treesearch.store import ShadowStore
from treesearch.store._git import date_env
from treesearch.store._objects import commit_content, write_object

pytestmark = pytest.mark.usefixtures("watch_mode")


@pytest.mark.parametrize(
    "message",
    [
        'treesearch capture\n\n{"kind": "capture"}\n',
        "treesearch capture: \u00e9t\u00e9 \u2713 label\n\n{}\n",
        "no trailing newline",
    ],
)
def test_a_commit_written_in_python_has_the_id_and_bytes_git_commit_tree_gives(
    workspace: Path, home: Path, message: str
) -> None:
    (workspace / "a.txt").write_text("a\n")
    store = ShadowStore.open(workspace, home=home)
    tree = store.capture().tree
    for date in (946684800, 1764590000):
        env = store._git.with_env(**date_env(date))
        by_git = store._git.run(
            ["commit-tree", "--no-gpg-sign", tree, "-F", "-"], input=message.encode(), env=env
        )
        ours = write_object(
            store.git_dir / "objects",
            "commit",
            commit_content(tree, message.encode(), date),
            tmp_dir=home,
        )
        assert ours == by_git.decode().strip()
        raw = store._git.run(["cat-file", "commit", ours])
        assert raw == commit_content(tree, message.encode(), date)
    store.fsck()


def test_snapshots_recorded_without_commit_tree_read_back_in_a_new_process(
    workspace: Path, home: Path
) -> None:
    (workspace / "a.txt").write_text("a\n")
    (workspace / "b.sh").write_text("#!/bin/sh\n")
    (workspace / "b.sh").chmod(0o700)  # a mode git's tree cannot say: a metadata blob
    store = ShadowStore.open(workspace, home=home, fixed_dates=True)
    first = store.capture(label="first", meta={"k": [1, 2]})
    (workspace / "a.txt").write_text("changed\n")
    second = store.capture()
    store.fsck()
    again = ShadowStore.open(workspace, home=home)
    got = again.resolve("first")
    assert (got.commit, got.tree, got.meta, got.modes) == (
        first.commit,
        first.tree,
        {"k": [1, 2]},
        {"b.sh": 0o700},
    )
    assert again.resolve(second.commit).changed == ("a.txt",)
    log = store._git.run(["log", "--format=%an <%ae> %ad", "--date=raw", second.commit])
    assert log.decode().startswith("treesearch <treesearch@localhost> 946684800")
