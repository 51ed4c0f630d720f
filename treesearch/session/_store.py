"""What a session needs from the snapshot store, and its calls into it (errors become
``SessionError``)."""

from __future__ import annotations

from typing import Any

from treesearch.errors import SessionError, StoreError
from treesearch.session._values import DiffSummary
from treesearch.types import Diff, Snapshot, SnapshotStore, TreeHash

__all__ = ["SessionStore", "capture", "release_hold", "summary"]


SessionStore = SnapshotStore
"""What a session needs from a snapshot store: ``treesearch.types.SnapshotStore`` (kept name)."""


def release_hold(hold: Any) -> None:
    """Release a workspace hold (``None``: there is none); a finalizer, so a module function."""
    if hold is not None:
        hold.release()


def capture(store: SessionStore, meta: dict[str, Any], what: str) -> Snapshot:
    """Capture the workspace; a store failure becomes ``SessionError`` naming ``what``.

    A workspace unchanged since the store's last snapshot gives that snapshot back
    (``capture(if_changed=True)``): ``meta`` describes only a new snapshot. So the
    capture that starts a session right after a restore, and the one before each step, record
    nothing, and pay no commit and no packing of the store."""
    try:
        snap = store.capture(meta=meta, if_changed=True)
    except StoreError as exc:
        raise SessionError(f"{what}: capturing the workspace failed: {exc}") from exc
    return snap


def summary(store: SessionStore, a: TreeHash, b: TreeHash) -> DiffSummary:
    """How tree ``a`` became tree ``b`` (counts and listings, no patch text)."""
    if a == b:
        return DiffSummary()
    try:
        diff: Diff = store.diff(a, b, max_patch_bytes=0)  # counts only: no patch text
    except StoreError as exc:
        raise SessionError(f"diffing {a[:12]}..{b[:12]} failed: {exc}") from exc
    files = diff.files
    return DiffSummary(
        files=len(files),
        insertions=sum(f.added_lines for f in files),
        deletions=sum(f.deleted_lines for f in files),
        stat=diff.stat(),
        name_status=diff.name_status(),
    )
