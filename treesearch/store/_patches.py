"""Patch texts of many pairs of snapshots from one git process (a report page wants two per node:
from its parent and from the root; one ``diff-tree -p`` per pair costs a process each).

``git diff-tree --stdin -p`` reads ``<tree> <tree>`` lines and echoes each line before that
pair's patch; no line of a patch can equal such a line (every patch line starts with a marker:
``diff``, ``index``, ``---``, ``+``, ``-``, space, ``@@``, ``\\``, ``Binary``, mode lines), so the
output splits there. It is read line by line and each patch is cut at ``max_patch_bytes`` while
reading: memory stays bounded by the pairs times the cap, whatever the trees hold.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING

from treesearch.errors import DiffError
from treesearch.store._errors import errors
from treesearch.store._git import GitFailed

if TYPE_CHECKING:
    from treesearch.store.shadow import ShadowStore

__all__ = ["patches"]

_ARGS = [
    "diff-tree",
    "--stdin",
    "-p",
    "-r",
    "--no-renames",
    "--no-ext-diff",
    "--no-textconv",
    "--no-color",
    "--full-index",
]


def patches(
    store: ShadowStore, pairs: Sequence[tuple[str, str]], *, max_patch_bytes: int = 1_000_000
) -> list[tuple[str, bool]]:
    """``(patch, truncated)`` from ``a`` to ``b`` for each pair of snapshot refs (tree hashes,
    commits, names), like ``store.diff(a, b).patch``, from one git process."""
    with store.lock(), errors(DiffError, "diff failed"):
        tree_of = store._catalogue.tree_of
        trees = [(tree_of(a), tree_of(b)) for a, b in pairs]
        todo = list(dict.fromkeys((str(a), str(b)) for a, b in trees if a != b))
        found = _run(store, todo, max_patch_bytes) if todo else {}
    return [found.get(t, ("", False)) if t[0] != t[1] else ("", False) for t in trees]


def _run(
    store: ShadowStore, todo: list[tuple[str, str]], cap: int
) -> dict[tuple[str, str], tuple[str, bool]]:
    heads = {f"{a} {b}\n".encode(): (a, b) for a, b in todo}
    chunks: dict[tuple[str, str], list[bytes]] = {pair: [] for pair in todo}
    sizes = dict.fromkeys(todo, 0)
    cut: set[tuple[str, str]] = set()
    with tempfile.TemporaryFile() as feed:  # a file, not a pipe: no deadlock on long input
        feed.write(b"".join(heads))
        feed.seek(0)
        proc = store._git.popen(_ARGS, stdin=feed.fileno())
        with proc:  # closes the pipes and waits for git
            assert proc.stdout is not None and proc.stderr is not None
            current: tuple[str, str] | None = None
            try:
                for line in proc.stdout:
                    pair = heads.get(line)
                    if pair is not None:
                        current = pair
                        continue
                    if current is None or current in cut:
                        continue
                    if sizes[current] + len(line) > cap:
                        cut.add(current)
                        continue
                    chunks[current].append(line)
                    sizes[current] += len(line)
                err = proc.stderr.read()
            except BaseException:
                proc.kill()
                raise
        code = proc.returncode
    if code != 0:
        raise GitFailed(_ARGS, code, err)
    return {
        pair: (b"".join(chunks[pair]).decode("utf-8", "surrogateescape"), pair in cut)
        for pair in todo
    }
