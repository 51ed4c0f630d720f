"""Every public operation of the store raises only its own ``StoreError`` subclass.

Regression (#13): ``log``, ``resolve``, ``pin``, ``unpin`` and ``recover`` let git's own failure
(a private ``GitFailed``) through to a traceback. The store is damaged for real here: its
``packed-refs`` file holds a line git cannot read, so every git command that reads refs fails.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from treesearch.errors import (
    CaptureError,
    DiffError,
    GcError,
    RecoveryError,
    RefError,
    StoreError,
)
from treesearch.store import ShadowStore
from treesearch.store._restore import journal_pending


def _damaged_store(tmp_path: Path) -> ShadowStore:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("one\n")
    store = ShadowStore.open(ws, home=tmp_path / "home")
    store.capture(label="first")
    store.pin("first", "kept")
    (store.git_dir / "packed-refs").write_text("this is not a packed ref\n")
    # A new object, as another process would be: no cache of the snapshots yet.
    return ShadowStore.open(ws, home=tmp_path / "home")


OPERATIONS: dict[str, tuple[type[StoreError], Callable[[ShadowStore], object]]] = {
    "log": (RefError, lambda s: s.log()),
    "resolve": (RefError, lambda s: s.resolve("first")),
    "pin": (RefError, lambda s: s.pin("first", "again")),
    "unpin": (RefError, lambda s: s.unpin("kept")),
    "files": (RefError, lambda s: s.files("first")),
    "capture": (CaptureError, lambda s: s.capture(label="second")),
    "diffs": (DiffError, lambda s: s.diffs([("first", "first")])),
    "gc": (GcError, lambda s: s.gc(keep_last=1)),
}


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_an_operation_on_a_damaged_store_raises_its_own_store_error(
    tmp_path: Path, name: str
) -> None:
    kind, call = OPERATIONS[name]
    store = _damaged_store(tmp_path)
    with pytest.raises(kind) as info:
        call(store)
    assert "packed-refs" in str(info.value)  # git's reason, on one line
    assert "\n" not in str(info.value)


def test_recover_on_a_damaged_store_raises_recovery_error(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("one\n")
    store = ShadowStore.open(ws, home=tmp_path / "home")
    first = store.capture()
    (store.git_dir / "packed-refs").write_text("this is not a packed ref\n")
    store = ShadowStore.open(ws, home=tmp_path / "home")  # a new process: snapshots unread
    (store.path / "journal.json").write_text(
        json.dumps({"token": "0a0b0c0d", "target": first.commit, "safety": first.commit})
    )
    with pytest.raises(RecoveryError, match="packed-refs"):
        store.recover()
    assert journal_pending(store.path / "journal.json")  # kept for the next try


def test_every_store_writer_goes_through_atomic_write() -> None:
    """Regression (#13): the scan-time file and the seeded index were written by hand (temp file
    and rename, no clean-up of a leftover). Only ``_fs.py`` may write or rename a file by path;
    ``inventory.py`` renames a whole store folder into the trash (one rename, nothing to tear)."""
    import ast

    import treesearch.store as store_pkg

    # workers.py copies files the store does not capture into a search worker's own scratch
    # folder: never user data, and a worker folder is recreated, never trusted, after a crash.
    allowed = {
        ("_fs.py", "replace"),
        ("_fs.py", "rename"),
        ("inventory.py", "rename"),
        ("workers.py", "copy2"),
    }
    writers = {"replace", "rename", "write_text", "write_bytes", "copy", "copy2", "copyfile"}
    found = []
    for path in sorted(Path(store_pkg.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            owner = getattr(getattr(func, "value", None), "id", "")
            if name in ("replace", "rename") and owner != "os":
                continue  # str.replace, dataclasses.replace
            mode = node.args[1] if name == "open" and len(node.args) > 1 else None
            writes_by_open = isinstance(mode, ast.Constant) and set(str(mode.value)) & set("wax")
            if (name in writers or writes_by_open) and (path.name, name) not in allowed:
                found.append(f"{path.name}:{node.lineno} {name}")
    assert found == []


def test_an_operation_on_a_store_whose_folder_is_gone_raises_a_store_error(
    tmp_path: Path,
) -> None:
    """The lock and the workspace hold are opened in the store folder: a store deleted under a
    live object (``treesearch clean`` in another shell) is a StoreError, not a raw OSError."""
    import shutil

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("one\n")
    store = ShadowStore.open(ws, home=tmp_path / "home")
    shutil.rmtree(store.path)
    with pytest.raises(RefError, match="not a git repository"):
        store.log()
    with pytest.raises(StoreError, match="cannot hold the workspace"):
        store.hold("a test")


def test_the_journal_file_is_filled_only_when_empty_emptied_in_place_never_through_a_link(
    tmp_path: Path,
) -> None:
    """``fill_empty`` / ``make_empty`` (the restore journal's file, kept between restores): a
    write goes only into an empty (or missing) file, emptying keeps the inode, and neither
    follows a symlink to empty or fill what it points to."""
    from treesearch.store._fs import fill_empty, is_empty, make_empty

    path = tmp_path / "journal.json"
    assert is_empty(path)
    make_empty(path)  # missing: nothing to do
    assert fill_empty(path, b'{"a": 1}') and path.read_bytes() == b'{"a": 1}'
    ino = path.stat().st_ino
    assert not fill_empty(path, b"other") and path.read_bytes() == b'{"a": 1}'
    assert not is_empty(path)
    make_empty(path)
    assert is_empty(path) and path.stat().st_ino == ino
    assert fill_empty(path, b"next") and path.read_bytes() == b"next"
    assert path.stat().st_ino == ino

    victim = tmp_path / "user-file.txt"
    victim.write_text("keep me\n")
    link = tmp_path / "link.json"
    link.symlink_to(victim)
    with pytest.raises(OSError):
        make_empty(link)
    with pytest.raises(OSError):
        fill_empty(link, b"x")
    assert victim.read_text() == "keep me\n"
