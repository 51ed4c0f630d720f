"""Bookkeeping of the mutation agent's steps: the per-node log of programs already produced
(see ``agent``), and the ``replace_in_file`` context of an edit."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

from treesearch.agents.mutation._computing import computing
from treesearch.agents.mutation._edit import Edit

__all__ = ["_TriedLog", "_context"]


def _context(source: bytes, edit: Edit) -> tuple[str, str]:
    """``(old, new)`` for ``replace_in_file``: whole lines around the edit, widened until ``old``
    occurs once in the file. ``("", "")`` when no unique context exists."""
    starts = [0]
    for i, byte in enumerate(source):
        if byte == 0x0A:
            starts.append(i + 1)

    def line_index(offset: int) -> int:
        lo, hi = 0, len(starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo

    first = line_index(edit.start)
    last = line_index(max(edit.start, edit.end - 1))

    def end_of(index: int) -> int:
        return starts[index + 1] if index + 1 < len(starts) else len(source)

    grow_up = True
    while True:
        rs, re_ = starts[first], end_of(last)
        old = source[rs:re_]
        if old and _occurs_once(source, old):
            new = source[rs : edit.start] + edit.text.encode("utf-8") + source[edit.end : re_]
            return old.decode("utf-8"), new.decode("utf-8")
        if first == 0 and end_of(last) >= len(source):
            return "", ""
        if (grow_up and first > 0) or end_of(last) >= len(source):
            first -= 1
        else:
            last += 1
        grow_up = not grow_up


def _occurs_once(haystack: bytes, needle: bytes) -> bool:
    first = haystack.find(needle)
    return first != -1 and haystack.find(needle, first + 1) == -1


class _TriedLog:
    """Programs already produced from one node (see the module docstring)."""

    def __init__(
        self, folder: Path | None, node: str, memory: dict[str, list[dict[str, str]]]
    ) -> None:
        self.file = folder / f"{node}.jsonl" if folder is not None else None
        self.node = node
        self.memory = memory

    def _entries(self) -> list[dict[str, str]]:
        if self.file is None:
            return list(self.memory.get(self.node, ()))
        try:
            raw = self.file.read_text(encoding="utf-8")
        except OSError:
            return []
        out = []
        for line in raw.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line cut short by a crash
            if isinstance(entry, dict) and isinstance(entry.get("key"), str):
                out.append({"tag": str(entry.get("tag", "")), "key": entry["key"]})
        return out

    def avoid(self, tag: str) -> set[str]:
        """Keys to avoid: those logged before ``tag``'s own entry, or all when it has none."""
        entries = self._entries()
        for i, entry in enumerate(entries):
            if entry["tag"] == tag:
                return {e["key"] for e in entries[:i]}
        return {e["key"] for e in entries}

    @contextlib.contextmanager
    def claiming(self, deadline: float) -> Iterator[None]:
        """Hold the node's lock (other processes choosing for this node wait, at most until
        ``deadline``, a ``time.monotonic()`` value): read, choose and ``record`` inside it."""
        folder = self.file.parent if self.file is not None else None
        with computing(self.node if folder is not None else None, folder, deadline):
            yield

    def record(self, tag: str, key: str) -> None:
        entry = {"tag": tag, "key": key}
        if entry in self._entries():
            return
        if self.file is None:
            self.memory.setdefault(self.node, []).append(entry)
            return
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            # One short O_APPEND write per entry: concurrent writers do not interleave lines.
            fd = os.open(self.file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, (json.dumps(entry) + "\n").encode("utf-8"))
            finally:
                os.close(fd)
        except OSError:
            self.memory.setdefault(self.node, []).append(entry)
