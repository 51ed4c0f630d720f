"""Plain values and protocols shared between layers (stdlib only).

The bottom of the layer stack: every other module may import this one, and it imports nothing of
treesearch at run time. It holds

- the identities of states (``TreeHash``, ``CommitId``) and the values the snapshot store returns
  (``Snapshot``, ``RestoreResult``, ``Diff``, ...; re-exported by ``treesearch.store``);
- ``ProcessResult``, the outcome of a sandboxed process;
- the three seams of the search, as typed protocols: ``SnapshotStore`` (what the controller, the
  session and the scorer call on a store; ``treesearch.store.ShadowStore`` is the real one and
  ``treesearch.testing.MemoryStore`` the in-memory double), ``StateScorer`` (what the controller
  calls on a scorer; ``treesearch.scoring.Scorer``) and ``RunSink`` (where the controller records a
  run; ``treesearch.runs.RunDir``).

The scoring value types in the ``StateScorer`` and ``RunSink`` signatures are imported for type
checkers only, so importing this module stays free of everything but the standard library.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NewType, Protocol, runtime_checkable

if TYPE_CHECKING:  # type checkers only: no import of a higher layer at run time
    from treesearch.scoring.results import ScoreResult, TestRun
    from treesearch.scoring.spec import TestSpec

TreeHash = NewType("TreeHash", str)
"""Hex object id of a git tree: the identity of a workspace state."""

CommitId = NewType("CommitId", str)
"""Hex object id of the store commit that records a snapshot (tree + metadata)."""


@dataclass(frozen=True)
class ProcessResult:
    """Outcome of one sandboxed process run (see ``treesearch.sandbox.run``)."""

    exit_code: int | None
    """Exit status; negative for a signal (as ``subprocess``); ``None`` if it could not start."""
    timed_out: bool
    """True when the timeout fired and the process group was ended."""
    seconds: float
    """Wall-clock duration."""
    stdout: str
    """Captured standard output, cut at both ends to the budget (decoded as UTF-8, errors replaced)."""
    stderr: str
    """Captured standard error, cut like ``stdout``."""
    stdout_dropped: int = 0
    """Number of bytes of standard output dropped from the middle."""
    stderr_dropped: int = 0
    """Number of bytes of standard error dropped from the middle."""

    @property
    def ok(self) -> bool:
        """True when the process exited with status 0 before its timeout."""
        return self.exit_code == 0 and not self.timed_out


# --- values of the snapshot store (re-exported by treesearch.store) ------------------------------


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
    clock_dated: bool = True
    """False for a snapshot a search dated by its fixed dates (``ShadowStore.fixed_dates``): its
    date orders snapshots but says nothing of its age, so age-based retention leaves it alone."""

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
class PatchResult:
    """What applying a patch did."""

    added: tuple[str, ...] = ()
    """Files created (a renamed file under its new name)."""
    modified: tuple[str, ...] = ()
    """Files whose content or exec bit changed in place."""
    deleted: tuple[str, ...] = ()
    """Files removed (a renamed file under its old name)."""
    hunks: int = 0
    """Hunks applied."""
    offsets: dict[str, list[int]] = field(default_factory=dict)
    """Per file, the line offset of each hunk that did not apply at its stated line."""

    def summary(self) -> str:
        """One line per file, ``A``/``M``/``D`` first, then the offsets used if any."""
        lines = [f"A {p}" for p in self.added]
        lines += [f"M {p}" for p in self.modified]
        lines += [f"D {p}" for p in self.deleted]
        lines += [f"  {p}: hunks applied at offsets {o}" for p, o in self.offsets.items()]
        lines.append(f"{self.hunks} hunk(s) applied")
        return "\n".join(lines)


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
        # git's wording: singular for one, a zero count left out
        summary = [f"{len(self.files)} file{'s' * (len(self.files) != 1)} changed"]
        if ins:
            summary.append(f"{ins} insertion{'s' * (ins != 1)}(+)")
        if dels:
            summary.append(f"{dels} deletion{'s' * (dels != 1)}(-)")
        lines.append(" " + ", ".join(summary))
        return "\n".join(lines)

    def name_status(self) -> str:
        return "\n".join(f"{f.status}\t{f.path}" for f in self.files)


# --- protocols ------------------------------------------------------------------------------------


@runtime_checkable
class SnapshotStore(Protocol):
    """A snapshot store: records workspace states as tree hashes and puts them back.

    This is everything the search controller, the transactional session and ``score_workspace``
    call on a store. ``treesearch.store.ShadowStore`` implements it with a shadow git repository;
    ``treesearch.testing.MemoryStore`` in memory (no git), for fast tests.

    A ``ref`` is a tree hash, a commit id, a unique prefix of either, or a label. A store may
    also offer ``hold(purpose)`` (keep other processes from restoring the workspace; the session
    takes one when the store has it) and ``close()`` (drop open handles before a fork).
    """

    @property
    def workspace(self) -> Path:
        """The workspace folder whose states the store records."""
        ...

    @property
    def path(self) -> Path:
        """The store's own folder (outside the workspace); agent caches are kept beside it."""
        ...

    def capture(
        self,
        label: str | None = None,
        meta: dict[str, Any] | None = None,
        *,
        if_changed: bool = False,
    ) -> Snapshot:
        """Record the workspace as it is now; no change since the last capture gives the same
        tree hash. ``if_changed``: with nothing changed, the last snapshot is given back
        whatever its label and meta (which then describe only a new snapshot)."""
        ...

    def restore(self, ref: str) -> RestoreResult:
        """Put a recorded state on disk, after a safety snapshot of the current one."""
        ...

    def resolve(self, ref: str) -> Snapshot:
        """The snapshot ``ref`` names (the newest one when several recorded the same tree)."""
        ...

    def diff(self, a: str, b: str | None = None, *, max_patch_bytes: int = ...) -> Diff:
        """Differences from ``a`` to ``b`` (``None``: the live workspace); ``max_patch_bytes=0``
        counts lines only."""
        ...

    def diffs(self, pairs: Sequence[tuple[str, str]]) -> list[Diff]:
        """``diff(a, b)`` for each pair, in order (one batch: cheaper than one call each)."""
        ...

    def materialize(self, ref: str, dest: str | os.PathLike[str]) -> Snapshot:
        """Write snapshot ``ref`` into the empty or missing folder ``dest`` (the workspace is not
        touched)."""
        ...

    def apply_patch(self, patch: str, *, strip: int = 1) -> PatchResult:
        """Apply a unified diff to the workspace, all or nothing (nothing recorded)."""
        ...


@runtime_checkable
class StateScorer(Protocol):
    """What the search controller calls on a scorer (``treesearch.scoring.Scorer`` is one)."""

    test_runs: int
    """Test commands actually run so far (cache hits excluded)."""
    cache_hits: int
    """Results served from the cache so far."""

    @property
    def search_spec(self) -> TestSpec | None:
        """The tests that steer the search (their timeout bounds a run); ``None``: not known."""
        ...

    def score(
        self,
        workspace: str | os.PathLike[str],
        tree: str | None = None,
        *,
        parent: ScoreResult | TestRun | None = None,
        time_limit: float | None = None,
        max_runs: int | None = None,
    ) -> ScoreResult:
        """Score the workspace (whose tree hash is ``tree``, when known: enables a cache);
        ``parent`` is the parent state's result, ``time_limit`` cuts the run short,
        ``max_runs`` caps the test runs this call may make (a test-run budget; at least 1)."""
        ...

    def complete(
        self,
        workspace: str | os.PathLike[str],
        tree: str | None,
        result: ScoreResult,
        *,
        time_limit: float | None = None,
    ) -> ScoreResult:
        """The whole run of a state whose ``score`` was partial (``ScoreResult.partial``): the
        search completes it before it builds on the state."""
        ...


@runtime_checkable
class RunSink(Protocol):
    """Where the search controller records a run (``treesearch.runs.RunDir`` is the real one).

    The controller writes no file itself: events, timings, transcripts and test logs all go
    through the sink, which owns the run directory's layout.
    """

    def append(self, event: Mapping[str, Any]) -> None:
        """Record one event (the log is append-only and the source of truth for resume)."""
        ...

    def append_timing(self, record: Mapping[str, Any]) -> None:
        """Record where one expansion's time went (kept out of the events and the graph)."""
        ...

    def session_file(self, name: str) -> Path | None:
        """Where the session of expansion ``name`` persists itself (``None``: nowhere); a file
        left there by an expansion that was cut short is set aside first."""
        ...

    def write_transcript(self, name: str, data: Mapping[str, Any]) -> str | None:
        """Store the agent's result of expansion ``name``; returns the path recorded on the
        edge (relative to the run), or ``None`` when transcripts are not kept."""
        ...

    def write_test_log(self, tree: str, result: ScoreResult) -> None:
        """Store the test output of scored state ``tree``."""
        ...
