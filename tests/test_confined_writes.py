"""The sandbox's file tools write only inside the workspace, whatever changes under them (real
files; a concurrent process is played deterministically by an audit hook that acts at the exact
moment a file operation is about to happen). The store's patch applier (``git apply``) keeps the
umask and a patched file's permission bits."""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from treesearch import sandbox
from treesearch.errors import PathEscapeError
from treesearch.store import ShadowStore

# Audit hooks cannot be removed: one hook for the module, acting only while a test arms it.
_armed: list[Callable[[str, tuple[Any, ...]], None]] = []


def _audit(
    event: str,
    args: tuple[Any, ...],
    _armed: list[Callable[[str, tuple[Any, ...]], None]] = _armed,
) -> None:
    # ``_armed`` bound here: at interpreter shutdown the module's globals may already be None.
    for action in list(_armed):
        action(event, args)


sys.addaudithook(_audit)


@pytest.fixture
def on_event() -> Iterator[Callable[[Callable[[str, tuple[Any, ...]], None]], None]]:
    def arm(action: Callable[[str, tuple[Any, ...]], None]) -> None:
        _armed.append(action)

    yield arm
    _armed.clear()


def _swap_for_symlink(folder: Path, outside: Path) -> None:
    """What a hostile process does: move ``folder`` aside, put a symlink out in its place."""
    folder.rename(folder.with_name(folder.name + ".moved"))
    folder.symlink_to(outside, target_is_directory=True)


def _path_arg(args: tuple[Any, ...]) -> str:
    return os.fsdecode(args[0]) if args and isinstance(args[0], (str, bytes, os.PathLike)) else ""


@pytest.mark.parametrize("tool", ["write_file", "replace_in_file"])
def test_sandbox_write_never_goes_outside_when_a_folder_becomes_a_symlink_after_the_check(
    workspace: Path, tmp_path: Path, on_event: Callable[..., None], tool: str
) -> None:
    # Regression: write_file and replace_in_file checked the path for symlinks, then made the
    # folders and wrote by path: a folder swapped for a symlink meanwhile sent the file outside.
    (workspace / "sub").mkdir()
    (workspace / "sub" / "a.txt").write_text("one\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    swapped: list[str] = []

    def swap_before_the_temp_file_opens(event: str, args: tuple[Any, ...]) -> None:
        name = os.path.basename(_path_arg(args))
        if event == "open" and re.fullmatch(r"\.a\.txt\..*\.tmp", name) and not swapped:
            swapped.append(name)
            _swap_for_symlink(workspace / "sub", outside)

    on_event(swap_before_the_temp_file_opens)
    with contextlib.suppress(PathEscapeError):  # refusing is fine; writing outside is not
        if tool == "write_file":
            sandbox.write_file(workspace, "sub/a.txt", "two\n")
        else:
            sandbox.replace_in_file(workspace, "sub/a.txt", "one", "two")
    assert swapped, "the tool never opened a temporary file: the test did not run its race"
    assert list(outside.iterdir()) == []
    assert (workspace / "sub.moved" / "a.txt").read_text() == "two\n"


@pytest.fixture
def store(workspace: Path, home: Path) -> Iterator[ShadowStore]:
    s = ShadowStore.open(workspace, home=home)
    yield s
    s.close()


def test_apply_patch_creates_a_folder_and_file_with_the_umask(
    store: ShadowStore, workspace: Path
) -> None:
    old = os.umask(0o027)
    try:
        store.apply_patch("--- /dev/null\n+++ b/new/dir/f.txt\n@@ -0,0 +1 @@\n+x\n")
        assert (workspace / "new" / "dir" / "f.txt").stat().st_mode & 0o777 == 0o640
        assert (workspace / "new" / "dir").stat().st_mode & 0o777 == 0o750
    finally:
        assert os.umask(old) == 0o027


def test_apply_patch_keeps_a_private_file_private_and_prunes_the_folder_a_rename_empties(
    store: ShadowStore, workspace: Path
) -> None:
    (workspace / "secret.txt").write_text("a\n")
    (workspace / "secret.txt").chmod(0o600)
    (workspace / "tool.sh").write_text("echo\n")
    (workspace / "old").mkdir()
    (workspace / "old" / "m.txt").write_text("x\n")
    patch = (
        "diff --git a/secret.txt b/secret.txt\n--- a/secret.txt\n+++ b/secret.txt\n"
        "@@ -1 +1 @@\n-a\n+b\n"
        "diff --git a/tool.sh b/tool.sh\nold mode 100644\nnew mode 100755\n"
        "diff --git a/old/m.txt b/new/m.txt\nsimilarity index 100%\n"
        "rename from old/m.txt\nrename to new/m.txt\n"
    )
    result = store.apply_patch(patch)
    assert (workspace / "secret.txt").read_text() == "b\n"
    assert (workspace / "secret.txt").stat().st_mode & 0o777 == 0o600  # git alone gives 0o644
    assert (workspace / "tool.sh").stat().st_mode & 0o111  # a mode the patch changes, changes
    assert (workspace / "new" / "m.txt").read_text() == "x\n"
    assert not (workspace / "old").exists() and workspace.is_dir()
    assert result.deleted == ("old/m.txt",) and result.added == ("new/m.txt",)
    assert result.modified == ("secret.txt", "tool.sh") and result.hunks == 1
