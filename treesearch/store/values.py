"""Plain values returned by the snapshot store (no git, no I/O).

They live in ``treesearch.types`` (the bottom layer, so the protocols there can name them) and are
re-exported here and from ``treesearch.store``.
"""

from __future__ import annotations

from treesearch.types import (
    CaptureStats,
    CommitId,
    Diff,
    FileChange,
    PatchResult,
    RestoreResult,
    Skipped,
    Snapshot,
    TreeHash,
)

__all__ = [
    "CaptureStats",
    "CommitId",
    "Diff",
    "FileChange",
    "PatchResult",
    "RestoreResult",
    "Skipped",
    "Snapshot",
    "TreeHash",
]
