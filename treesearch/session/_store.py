"""What a session needs from the snapshot store, and its calls into it (errors become
``SessionError``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from treesearch.errors import SessionError, StoreError
from treesearch.session._values import DiffSummary
from treesearch.types import CommitId, TreeHash

__all__ = ["SessionStore", "capture", "release_hold", "summary"]


class _SnapshotLike(Protocol):
    @property
    def tree(self) -> TreeHash: ...
    @property
    def commit(self) -> CommitId: ...


class _DiffLike(Protocol):
    @property
    def files(self) -> Sequence[Any]: ...
    def stat(self) -> str: ...
    def name_status(self) -> str: ...


class SessionStore(Protocol):
    """What a session needs from a snapshot store (``treesearch.store.ShadowStore`` has it)."""

    @property
    def workspace(self) -> Path:
        """The workspace folder whose states the store records."""
        ...

    def capture(self, label: str | None = None, meta: dict[str, Any] | None = None) -> Any:
        """Record the workspace; returns a snapshot with ``tree`` and ``commit``."""
        ...

    def restore(self, ref: str) -> Any:
        """Put a recorded state on disk, after a safety snapshot; returns ``RestoreResult``."""
        ...

    def diff(self, a: str, b: str | None = None, *, max_patch_bytes: int = ...) -> Any:
        """Differences between two states; returns ``Diff`` (``files``, ``stat()``, ...)."""
        ...


def release_hold(hold: Any) -> None:
    """Release a workspace hold (``None``: there is none); a finalizer, so a module function."""
    if hold is not None:
        hold.release()


def capture(store: SessionStore, meta: dict[str, Any], what: str) -> _SnapshotLike:
    """Capture the workspace; a store failure becomes ``SessionError`` naming ``what``."""
    try:
        snap: _SnapshotLike = store.capture(meta=meta)
    except StoreError as exc:
        raise SessionError(f"{what}: capturing the workspace failed: {exc}") from exc
    return snap


def summary(store: SessionStore, a: TreeHash, b: TreeHash) -> DiffSummary:
    """How tree ``a`` became tree ``b`` (counts and listings, no patch text)."""
    if a == b:
        return DiffSummary()
    try:
        diff: _DiffLike = store.diff(a, b, max_patch_bytes=0)  # counts only: no patch text
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
