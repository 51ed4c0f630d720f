"""Snapshot commits: a snapshot recorded by one store reads back in another process with its
commit id, tree, label, meta and modes, and the store's fixed identity and date."""

from __future__ import annotations

from pathlib import Path

import pytest

from treesearch.store import ShadowStore

pytestmark = pytest.mark.usefixtures("watch_mode")


def test_snapshots_read_back_in_a_new_process_with_their_ids_labels_meta_and_modes(
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
