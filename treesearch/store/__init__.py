"""The shadow snapshot store: the only part of treesearch that runs git.

``ShadowStore.open(workspace)`` gives a store kept outside the workspace; ``capture``, ``restore``,
``diff``, ``materialize``, ``log``, ``gc`` and ``recover`` are its operations; ``hold`` keeps other
processes from restoring the workspace during a longer sequence (a search, a session). The user's own
``.git`` is never written.
"""

from treesearch.store._apply import PatchError
from treesearch.store._catalogue import label_problem
from treesearch.store._hold import HolderRecord, WorkspaceHold
from treesearch.store._locate import find_workspace
from treesearch.store._patches import patches
from treesearch.store.shadow import (
    GcResult,
    Held,
    ShadowStore,
    TreeEntry,
    default_home,
    store_dir_for,
)
from treesearch.store.values import (
    CaptureStats,
    Diff,
    FileChange,
    PatchResult,
    RestoreResult,
    Skipped,
    Snapshot,
)

__all__ = [
    "CaptureStats",
    "Diff",
    "FileChange",
    "GcResult",
    "Held",
    "HolderRecord",
    "PatchError",
    "PatchResult",
    "RestoreResult",
    "ShadowStore",
    "Skipped",
    "Snapshot",
    "TreeEntry",
    "WorkspaceHold",
    "default_home",
    "find_workspace",
    "label_problem",
    "patches",
    "store_dir_for",
]
