"""The patch applier and the sandbox's file tools write only inside the workspace, whatever
changes under them, and leave the process umask alone (real files; a concurrent process is
played deterministically by an audit hook that acts at the exact moment a file operation is
about to happen)."""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from treesearch import sandbox
from treesearch.agents.patch import apply_patch
from treesearch.errors import PathEscapeError

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


def test_apply_patch_never_writes_outside_when_a_folder_becomes_a_symlink_after_the_check(
    workspace: Path, tmp_path: Path, on_event: Callable[..., None]
) -> None:
    # Regression: apply_patch checked the folders for symlinks, then wrote by path, so a folder
    # swapped for a symlink between the check and the write sent the file outside the workspace.
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
    patch = "--- a/sub/a.txt\n+++ b/sub/a.txt\n@@ -1 +1 @@\n-one\n+two\n"
    with contextlib.suppress(OSError, PathEscapeError):  # refusing is fine; writing outside is not
        apply_patch(workspace, patch)
    assert swapped, "the patch never opened a temporary file: the test did not run its race"
    assert list(outside.iterdir()) == []
    assert (workspace / "sub.moved" / "a.txt").read_text() in ("one\n", "two\n")


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


def test_apply_patch_never_deletes_outside_when_a_folder_becomes_a_symlink_after_the_check(
    workspace: Path, tmp_path: Path, on_event: Callable[..., None]
) -> None:
    # Regression: a deleted file was unlinked by path after the check (same race as the write).
    (workspace / "sub").mkdir()
    (workspace / "sub" / "a.txt").write_text("one\n")
    (workspace / "sub" / "keep.txt").write_text("keep\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.txt").write_text("not yours\n")
    swapped: list[str] = []

    def swap_before_the_unlink(event: str, args: tuple[Any, ...]) -> None:
        if event == "os.remove" and _path_arg(args).endswith("a.txt") and not swapped:
            swapped.append(_path_arg(args))
            _swap_for_symlink(workspace / "sub", outside)

    on_event(swap_before_the_unlink)
    patch = "--- a/sub/a.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-one\n"
    with contextlib.suppress(OSError, PathEscapeError):  # refusing is fine; deleting outside is not
        apply_patch(workspace, patch)
    assert swapped, "the patch never removed a file: the test did not run its race"
    assert (outside / "a.txt").read_text() == "not yours\n"


def test_apply_patch_creates_a_folder_and_file_with_the_umask_and_never_changes_the_umask(
    workspace: Path,
) -> None:
    # Regression: a new file's mode was computed with os.umask(0); os.umask(old), which sets the
    # process-wide umask to 0 for a moment: a file another thread created then was world-writable.
    status = Path("/proc/self/status")
    if not status.exists() or "Umask:" not in status.read_text():
        pytest.skip("the kernel does not show the umask in /proc/self/status")

    def umask_now() -> int:
        line = next(x for x in status.read_text().splitlines() if x.startswith("Umask:"))
        return int(line.split()[1], 8)

    seen: set[int] = set()

    def watch(frame: FrameType, event: str, arg: Any) -> None:
        if event in ("c_call", "c_return"):  # around every C call apply_patch makes
            seen.add(umask_now())

    old = os.umask(0o027)
    try:
        sys.setprofile(watch)
        try:
            apply_patch(workspace, "--- /dev/null\n+++ b/new/dir/f.txt\n@@ -0,0 +1 @@\n+x\n")
        finally:
            sys.setprofile(None)
        assert seen == {0o027}
        assert (workspace / "new" / "dir" / "f.txt").stat().st_mode & 0o777 == 0o640
        assert (workspace / "new" / "dir").stat().st_mode & 0o777 == 0o750
    finally:
        os.umask(old)


def test_apply_patch_keeps_a_private_file_private_and_prunes_the_folder_a_rename_empties(
    workspace: Path,
) -> None:
    (workspace / "secret.txt").write_text("a\n")
    (workspace / "secret.txt").chmod(0o600)
    (workspace / "old").mkdir()
    (workspace / "old" / "m.txt").write_text("x\n")
    patch = (
        "--- a/secret.txt\n+++ b/secret.txt\n@@ -1 +1 @@\n-a\n+b\n"
        "diff --git a/old/m.txt b/new/m.txt\nsimilarity index 100%\n"
        "rename from old/m.txt\nrename to new/m.txt\n"
    )
    result = apply_patch(workspace, patch)
    assert (workspace / "secret.txt").read_text() == "b\n"
    assert (workspace / "secret.txt").stat().st_mode & 0o777 == 0o600
    assert (workspace / "new" / "m.txt").read_text() == "x\n"
    assert not (workspace / "old").exists() and workspace.is_dir()
    assert result.deleted == ("old/m.txt",) and "new/m.txt" in result.added
