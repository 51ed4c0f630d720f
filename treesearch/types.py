"""Plain values shared between layers (stdlib only)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NewType

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
