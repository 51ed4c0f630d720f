"""The exception hierarchy. Every error treesearch raises is a ``TreesearchError``.

One class per operation (in the spirit of jj's ``SnapshotError``/``CheckoutError``): callers catch
exactly the failure they can handle. Exceptions of what runs underneath (git, the HTTP client,
pydantic) are mapped to these once, at the module boundary, with ``raise ... from exc``.
Messages say what failed, on which file or field, and what to do about it.
"""

from __future__ import annotations


class TreesearchError(Exception):
    """Base class of every error raised by treesearch."""


class ConfigError(TreesearchError):
    """A configuration file or override is invalid (the message names file, key path and allowed values)."""


# --- snapshot store -------------------------------------------------------------------------------


class StoreError(TreesearchError):
    """A failure of the shadow snapshot store."""


class StoreLocationError(StoreError):
    """The store or workspace location is refused (store inside workspace, workspace is ``/``, ...)."""


class StoreLockedError(StoreError):
    """Another process held the store's lock for longer than the lock timeout."""


class WorkspaceBusy(StoreError):
    """Another process holds the workspace (a search, a session, a restore): refused at once.

    The message is one line naming the holder: pid, command, since when."""


class RefError(StoreError):
    """A snapshot reference (tree, commit, prefix or label) is unknown or ambiguous."""


class CaptureError(StoreError):
    """Capturing the workspace failed; no snapshot was recorded."""


class RestoreError(StoreError):
    """Restoring a snapshot failed; the workspace was rolled back or can be restored with ``undo``."""


class DiffError(StoreError):
    """Computing a diff between two states failed."""


class MaterializeError(StoreError):
    """Writing a snapshot into another directory failed."""


class GcError(StoreError):
    """Garbage collection / retention of the store failed."""


class RecoveryError(StoreError):
    """An interrupted restore could be neither completed nor rolled back."""


# --- sandbox, session, agents -----------------------------------------------------------------------


class SandboxError(TreesearchError):
    """A sandboxed process or file tool failed."""


class PathEscapeError(SandboxError):
    """A path given to a file tool leads outside the workspace (``..``, absolute, or via a symlink)."""


class ToolError(SandboxError):
    """A file tool was used wrongly (e.g. ``replace_in_file`` text matched 0 or several times)."""


class SessionError(TreesearchError):
    """A transactional session operation failed (bad step index, unreadable session file, ...)."""


class AgentError(TreesearchError):
    """An agent could not be built or run (unknown kind, bad agent config, ...)."""


class ScoringError(TreesearchError):
    """A test run could not be set up or its results could not be stored."""


class SearchError(TreesearchError):
    """The search controller failed."""


class RunError(TreesearchError):
    """A run directory is missing, incomplete or inconsistent."""
