"""Diffs between trees: file-level changes (with line counts) and patch text, with a small cache of
recent file-level diffs (trees never change, so an entry never goes stale)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from treesearch.store._git import GitFailed, GitRunner
from treesearch.store.values import Diff, FileChange, Snapshot
from treesearch.types import TreeHash

Run = Callable[..., bytes]
_CACHED = 64
_RAW_FIELDS = 2 * 4096
"""Raw records of a pair of trees are kept for at most this many fields (2 per changed path)."""


class Diffs:
    """Diffs of one store's trees."""

    def __init__(self, git: GitRunner, run: Run) -> None:
        self.git = git
        self.run = run
        self.cache: dict[tuple[str, str], Diff] = {}
        """File-level diffs (no patch text) of recent tree pairs."""
        self.raw: dict[tuple[str, str], list[bytes]] = {}
        """The raw records (``:modes oids status`` and path, as ``diff-tree -r -z --raw``
        prints them) of recent tree pairs: a restore between them plans from these."""

    def between(self, ta: TreeHash, tb: TreeHash, max_patch_bytes: int) -> Diff:
        """Changes from ``ta`` to ``tb``; patch text up to ``max_patch_bytes`` (0: none)."""
        known = self.cache.get((ta, tb)) if max_patch_bytes <= 0 else None
        if known is not None:
            return known
        if ta == tb:
            return Diff(ta, tb, (), "", False)
        out = self.run(["diff-tree", "-r", "-z", "--no-renames", "--raw", "--numstat", ta, tb])
        fields = out.split(b"\0")
        self.remember_raw(ta, tb, fields)
        diff = parse_diff(ta, tb, fields, max_patch_bytes)
        if max_patch_bytes > 0:
            patch, truncated = self._patch(ta, tb, max_patch_bytes)
            diff = replace(diff, patch=patch, truncated=truncated)
        return diff

    def many(self, trees: Sequence[tuple[TreeHash, TreeHash]]) -> list[Diff]:
        """File-level changes (no patch text) of several pairs, with one git process."""
        pairs = sorted({(a, b) for a, b in trees if a != b} - self.cache.keys())
        parsed: dict[tuple[str, str], list[bytes]] = {}
        if pairs:
            out = self.run(
                ["diff-tree", "-r", "-z", "--no-renames", "--raw", "--numstat", "--stdin"],
                input="".join(f"{a} {b}\n" for a, b in pairs).encode(),
            )
            parsed = _split_stdin_diffs(out, pairs)
        for ta, tb in pairs:
            fields = parsed.get((ta, tb), [])
            self.remember_raw(ta, tb, fields)
            self.remember(parse_diff(ta, tb, fields, 0))
        return [
            self.cache[(ta, tb)] if ta != tb else Diff(ta, tb, (), "", False) for ta, tb in trees
        ]

    def changed_since(
        self,
        last: Snapshot,
        tree: TreeHash,
        modes: Mapping[str, int],
        empty_dirs: Sequence[str],
        indexed: Mapping[str, object],
        *,
        counts: bool,
        note_oid: Callable[[str, str], None],
        raw: tuple[TreeHash, list[bytes]] | None = None,
    ) -> list[str]:
        """Paths changed since ``last`` (content, permission bits, empty folders). With
        ``counts`` (a small change), the file-level diff with line counts is kept too: a session
        asks for exactly that right after a capture. ``note_oid`` learns each new blob id.
        ``raw``: the scan's own diff records from a tree to ``tree`` (``_scan_edit.py``), used
        (no git process; the line counts are then left to the diff asked for later) when that
        tree is ``last``'s."""
        paths: set[str] = set()
        if last.tree != tree:
            if raw is not None and raw[0] == last.tree:
                fields = raw[1]
            else:
                extra = ["--raw", "--numstat"] if counts else []
                out = self.run(["diff-tree", "-r", "-z", "--no-renames", *extra, last.tree, tree])
                fields = out.split(b"\0")
                if counts:
                    self.remember(parse_diff(last.tree, tree, fields, 0))
            self.remember_raw(last.tree, tree, fields)
            for i in range(len(fields) - 1):
                head = fields[i]
                if head.startswith(b":"):
                    path = os.fsdecode(fields[i + 1])
                    paths.add(path)
                    note_oid(path, head.split(b" ")[3].decode())
        if modes != last.modes:  # (compared in C: the loops below run only on a change)
            paths.update(p for p in set(modes) ^ set(last.modes) if p in indexed)
            paths.update(p for p in modes if p in last.modes and modes[p] != last.modes[p])
        if tuple(empty_dirs) != last.empty_dirs:
            paths.update(set(empty_dirs) ^ set(last.empty_dirs))
        return sorted(paths)

    def statuses(self, ta: TreeHash, tb: TreeHash) -> dict[str, str]:
        """The status letter (``A``, ``M``, ``D``, ``T``) of each path that differs from ``ta``
        to ``tb``, without line counts: from the cached diff or the raw records kept (a capture
        keeps its own), else one ``diff-tree`` that reads no file content."""
        if ta == tb:
            return {}
        known = self.cache.get((ta, tb))
        if known is not None:
            return {f.path: f.status for f in known.files}
        raw = self.known_raw(ta, tb)
        if raw is None:
            fields = self.run(["diff-tree", "-r", "-z", "--no-renames", ta, tb]).split(b"\0")
            self.remember_raw(ta, tb, fields)
            raw = _raw_records(fields)
        return {
            os.fsdecode(path): head.rsplit(b" ", 1)[1].decode()
            for head, path in zip(raw[::2], raw[1::2], strict=True)
        }

    def remember_raw(self, ta: str, tb: str, fields: Sequence[bytes]) -> None:
        """Keep the raw records of ``ta`` -> ``tb`` from ``diff-tree -r -z --no-renames`` output
        split at NUL (with or without ``--raw --numstat``: the numstat lines are left out)."""
        raw = _raw_records(fields)
        if len(raw) > _RAW_FIELDS:
            return  # a big change: kept in no cache (a restore runs diff-tree for it)
        self.raw[(ta, tb)] = raw
        while len(self.raw) > _CACHED:
            del self.raw[next(iter(self.raw))]

    def known_raw(self, ta: str, tb: str) -> list[bytes] | None:
        """The raw records of ``ta`` -> ``tb`` (head, path, head, path, ...) if this store
        diffed the pair lately, either way round (trees never change); else ``None``."""
        raw = self.raw.get((ta, tb))
        if raw is not None:
            return raw
        back = self.raw.get((tb, ta))
        if back is None:
            return None
        out: list[bytes] = []
        for head, path in zip(back[::2], back[1::2], strict=True):
            old_mode, new_mode, old_oid, new_oid, status = head[1:].split(b" ")
            turned = {b"A": b"D", b"D": b"A"}.get(status, status)
            out += (b":" + b" ".join((new_mode, old_mode, new_oid, old_oid, turned)), path)
        return out

    def remember(self, d: Diff) -> None:
        """Keep a file-level diff of two trees."""
        self.cache[(d.a, d.b)] = d
        while len(self.cache) > _CACHED:
            del self.cache[next(iter(self.cache))]

    def _patch(self, ta: str, tb: str, cap: int) -> tuple[str, bool]:
        proc = self.git.popen(
            [
                "diff-tree",
                "-p",
                "-r",
                "--no-renames",
                "--no-ext-diff",
                "--no-textconv",
                "--no-color",
                "--full-index",
                ta,
                tb,
            ]
        )
        assert proc.stdout is not None
        data = proc.stdout.read(cap + 1)
        truncated = len(data) > cap
        if truncated:
            proc.kill()
            data = data[:cap]
            cut = data.rfind(b"\n")
            data = data[: cut + 1] if cut >= 0 else data
        else:
            data += proc.stdout.read()
        proc.stdout.close()
        assert proc.stderr is not None
        err = proc.stderr.read()
        proc.stderr.close()
        code = proc.wait()
        if code != 0 and not truncated:
            raise GitFailed(["diff-tree", "-p"], code, err)
        return data.decode("utf-8", "surrogateescape"), truncated


def _raw_records(fields: Sequence[bytes]) -> list[bytes]:
    """The raw records (head, path, head, path, ...) of ``diff-tree -r -z`` output split at NUL,
    numstat lines left out."""
    raw: list[bytes] = []
    i = 0
    while i + 1 < len(fields):
        if fields[i].startswith(b":"):
            raw += (fields[i], fields[i + 1])
            i += 2
        else:
            i += 1
    return raw


def parse_diff(ta: TreeHash, tb: TreeHash, fields: list[bytes], max_patch_bytes: int) -> Diff:
    """A ``Diff`` from ``diff-tree -z --raw --numstat`` output split at NUL (no patch text)."""
    raw: dict[str, tuple[str, int | None, int | None]] = {}
    counts: dict[str, tuple[int, int, bool]] = {}
    i = 0
    while i < len(fields):
        item = fields[i]
        if item.startswith(b":"):
            old_mode, new_mode, _o, _n, status = item[1:].decode().split(" ")
            raw[os.fsdecode(fields[i + 1])] = (
                status,
                None if status == "A" else int(old_mode, 8),
                None if status == "D" else int(new_mode, 8),
            )
            i += 2
        elif item:
            added, deleted, path = item.split(b"\t", 2)
            binary = added == b"-"
            counts[os.fsdecode(path)] = (
                0 if binary else int(added),
                0 if binary else int(deleted),
                binary,
            )
            i += 1
        else:
            i += 1
    files = tuple(
        FileChange(path, status, om, nm, *counts.get(path, (0, 0, False)))
        for path, (status, om, nm) in sorted(raw.items())
    )
    return Diff(ta, tb, files, "", bool(files) and max_patch_bytes <= 0)


def _split_stdin_diffs(
    out: bytes, pairs: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], list[bytes]]:
    """Split ``diff-tree --stdin -z`` output by pair: git echoes each input line
    ``<tree> <tree>\\n`` (newline-terminated even with ``-z``) before that pair's output."""
    heads = [f"{a} {b}\n".encode() for a, b in pairs]
    starts = []
    pos = 0
    for head in heads:
        pos = out.index(head, pos)
        starts.append(pos)
        pos += len(head)
    ends = starts[1:] + [len(out)]
    return {
        pair: out[start + len(head) : end].split(b"\0")
        for pair, head, start, end in zip(pairs, heads, starts, ends, strict=True)
    }
