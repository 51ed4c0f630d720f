"""Snapshot labels that are not one line of UTF-8 text: the store's own error, one line, and the
store left as it was; the CLI says so on one line with its usage status (real git, real files)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from treesearch.errors import CaptureError, StoreError
from treesearch.store import ShadowStore

NOT_UTF8 = b"\xff\xfe".decode("utf-8", "surrogateescape")


@pytest.fixture
def store(workspace: Path, home: Path) -> Iterator[ShadowStore]:
    (workspace / "a.py").write_text("x = 1\n")
    s = ShadowStore.open(workspace, home=home)
    yield s
    s.close()


@pytest.mark.parametrize(
    ("label", "says"),
    [
        (NOT_UTF8, "not valid UTF-8"),
        ("ok" + NOT_UTF8, "not valid UTF-8"),
        ("two\n\nlines", "control character (U+000A)"),
        ("a\x00b", "control character (U+0000)"),
        ("a\x01b", "control character (U+0001)"),
        (7, "must be text"),
    ],
)
def test_capture_refuses_a_label_that_is_not_one_line_of_utf8(
    store: ShadowStore, workspace: Path, home: Path, label: object, says: str
) -> None:
    first = store.capture(label="first")
    (workspace / "a.py").write_text("x = 2\n")
    with pytest.raises(CaptureError) as info:
        store.capture(label=label)  # type: ignore[arg-type]
    message = str(info.value)
    assert "label" in message and says in message and "\n" not in message
    assert [s.commit for s in store.log()] == [first.commit]
    store.close()
    with ShadowStore.open(workspace, home=home) as again:  # nothing lost on reading it back
        assert [(s.commit, s.label) for s in again.log()] == [(first.commit, "first")]


def test_every_public_method_maps_non_utf8_text_to_a_store_error(store: ShadowStore) -> None:
    calls = [
        lambda: store.capture(label=NOT_UTF8),
        lambda: store.resolve(NOT_UTF8),
        lambda: store.restore(NOT_UTF8),
        lambda: store.diff(NOT_UTF8),
        lambda: store.diff("ok", NOT_UTF8),
        lambda: store.changes("ok", NOT_UTF8),
        lambda: store.files(NOT_UTF8),
        lambda: store.pin(NOT_UTF8, "p"),
        lambda: store.gc(drop=[NOT_UTF8]),
    ]
    store.capture(label="ok")
    for call in calls:
        with pytest.raises(StoreError) as info:
            call()
        assert "\n" not in str(info.value)
    # Free text that is stored escaped or made ref-safe is accepted and round-trips.
    (store.workspace / "a.py").write_text("x = 2\n")
    snap = store.capture(label="ünïcödé", meta={"note": NOT_UTF8, NOT_UTF8: "key"})
    assert store.resolve("ünïcödé").meta == {"note": NOT_UTF8, NOT_UTF8: "key"} == snap.meta
    store.pin("ok", NOT_UTF8)
    store.unpin(NOT_UTF8)


def run_snap(ws: Path, home: Path, *args: str | bytes) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.pop("TREESEARCH_HOME", None)
    argv: list[str | bytes] = [sys.executable, "-m", "treesearch", "snap", *args]
    argv += ["--workspace", str(ws), "--home", str(home)]
    return subprocess.run(argv, capture_output=True, env=env, check=False)


@pytest.mark.parametrize("label", [b"\xff\xfe", b"two\nlines"])
def test_cli_capture_with_a_bad_label_is_a_one_line_usage_error(
    workspace: Path, home: Path, label: bytes
) -> None:
    (workspace / "a.py").write_text("x = 1\n")
    out = run_snap(workspace, home, "capture", "--label", label)
    assert out.returncode == 2
    err = out.stderr.decode("utf-8", "replace")
    assert err.startswith("treesearch: error: --label:") and "Traceback" not in err
    assert err.count("\n") == 1 and "label" in err
    assert run_snap(workspace, home, "capture", "--label", os.fsencode("fine")).returncode == 0
    missing = run_snap(workspace, home, "restore", label)  # a ref: not found, one line
    assert missing.returncode == 1 and missing.stderr.count(b"\n") == 1
    assert b"Traceback" not in missing.stderr
