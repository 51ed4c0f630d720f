"""Plain values returned by the snapshot store (no git, no I/O)."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

from treesearch.types import CommitId, TreeHash


@dataclass(frozen=True)
class Skipped:
    """A path the capture left out, and why."""

    path: str
    """Workspace-relative path (``/``-separated; undecodable bytes kept as surrogate escapes)."""
    reason: str
    """``oversize`` (larger than ``max_file_bytes``), ``special`` (FIFO, socket, device)."""
    detail: str = ""
    """Human-readable detail, e.g. the size or the file type."""


@dataclass(frozen=True)
class CaptureStats:
    """What a capture cost."""

    files_seen: int
    """Files and symlinks found by the walk (after ignore rules)."""
    files_hashed: int
    """Files whose content git had to read and hash (the rest were trusted by the stat cache)."""
    seconds: float
    """Wall-clock duration of the capture."""


@dataclass(frozen=True)
class Snapshot:
    """One recorded workspace state: a pure content tree plus metadata riding on a commit."""

    tree: TreeHash
    """Git tree hash of the workspace content (files, exec bits, symlinks)."""
    commit: CommitId
    """Store commit that records the tree and the metadata; kept reachable under a ref."""
    parent: CommitId | None
    """The store's previous snapshot when this one was taken (metadata, not a git parent link)."""
    label: str | None
    """Optional user label; the newest snapshot with a label is found by that label."""
    created_at: float
    """Creation time, seconds since the epoch (UTC)."""
    kind: str = "capture"
    """``capture`` (asked for), ``safety`` (taken before a restore) or ``recovery``."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Caller-supplied JSON-serialisable metadata."""
    changed: tuple[str, ...] = ()
    """Paths that differ from the previous snapshot (added, modified, deleted or mode-changed)."""
    skipped: tuple[Skipped, ...] = ()
    """Paths left out of the snapshot, with the reason."""
    stats: CaptureStats | None = None
    """Cost of the capture (``None`` for snapshots read back from the log)."""
    modes: dict[str, int] = field(default_factory=dict)
    """Permission bits of files whose mode is not 0644/0755 (git trees keep only the exec bit)."""
    empty_dirs: tuple[str, ...] = ()
    """Folders that were empty at capture (git trees cannot hold them)."""

    @property
    def created_iso(self) -> str:
        """Creation time as an ISO-8601 UTC string."""
        return _dt.datetime.fromtimestamp(self.created_at, _dt.timezone.utc).isoformat()


@dataclass(frozen=True)
class RestoreResult:
    """What a restore did."""

    target: Snapshot
    """The snapshot now on disk."""
    safety: Snapshot
    """The snapshot of the workspace taken just before the restore (``undo`` goes back to it)."""
    written: tuple[str, ...]
    """Files and symlinks created or rewritten."""
    deleted: tuple[str, ...]
    """Files and symlinks removed."""
    pruned: tuple[str, ...]
    """Folders removed because the restore left them empty (or they did not exist in the target)."""
    created_dirs: tuple[str, ...] = ()
    """Empty folders of the target that were re-created."""
    chmodded: tuple[str, ...] = ()
    """Files whose permission bits alone were changed."""
    seconds: float = 0.0
    """Wall-clock duration, safety snapshot included."""
    warnings: tuple[str, ...] = ()
    """Problems that did not stop the restore (it completed), e.g. an index that could not be
    updated on a full disk."""


@dataclass(frozen=True)
class FileChange:
    """One path's change between two states."""

    path: str
    status: str
    """``A`` added, ``M`` modified (content or exec bit), ``D`` deleted, ``T`` type change."""
    old_mode: int | None
    """Git mode before (0o100644, 0o100755, 0o120000) or ``None`` if added."""
    new_mode: int | None
    """Git mode after or ``None`` if deleted."""
    added_lines: int = 0
    deleted_lines: int = 0
    binary: bool = False
    """True when git considers either side binary (no line counts, no textual hunk)."""

    @property
    def mode_changed(self) -> bool:
        return (
            self.old_mode is not None
            and self.new_mode is not None
            and self.old_mode != self.new_mode
        )


@dataclass(frozen=True)
class Diff:
    """Differences between two states ``a`` and ``b`` (``b`` may be the live workspace)."""

    a: TreeHash
    b: TreeHash
    files: tuple[FileChange, ...]
    patch: str
    """Unified patch (``git apply``-able, ``a/`` ``b/`` prefixes), cut at the size cap."""
    truncated: bool = False
    """True when ``patch`` was cut at the size cap."""

    @property
    def added(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files if f.status == "A")

    @property
    def modified(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files if f.status == "M")

    @property
    def deleted(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files if f.status == "D")

    @property
    def type_changed(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files if f.status == "T")

    @property
    def mode_changed(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files if f.mode_changed and f.status == "M")

    @property
    def empty(self) -> bool:
        return not self.files

    def stat(self) -> str:
        """A ``git diff --stat``-like summary."""
        lines = []
        for f in self.files:
            counts = "Bin" if f.binary else f"+{f.added_lines} -{f.deleted_lines}"
            lines.append(f" {f.status} {f.path} | {counts}")
        ins = sum(f.added_lines for f in self.files)
        dels = sum(f.deleted_lines for f in self.files)
        lines.append(f" {len(self.files)} files changed, {ins} insertions(+), {dels} deletions(-)")
        return "\n".join(lines)

    def name_status(self) -> str:
        return "\n".join(f"{f.status}\t{f.path}" for f in self.files)
