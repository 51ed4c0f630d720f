"""Test doubles for code built on treesearch: a store without a shadow repository, a scorer
without tests.

The search controller takes its collaborators as arguments (``treesearch.types``), so a search
can run in milliseconds with these in place of the real ones:

- ``MemoryStore``: a ``SnapshotStore`` that keeps every state in memory (no shadow repository, no
  store folder) over a real workspace folder, so agents and session tools work on real files
  unchanged (only ``apply_patch`` runs ``git apply``, through ``treesearch.store``);
- ``ScriptedAgent``: the project's real scripted agent (a fixed list of file writes, replacements
  and commands, each a session step), re-exported here; ``CallbackAgent`` runs a function;
- ``FunctionScorer``: a ``StateScorer`` whose score is a function of the workspace's files;
- ``MemorySink``: a ``RunSink`` that keeps a run's events, timings, transcripts and test logs in
  lists and dicts instead of a run directory.

Example::

    store = MemoryStore(workspace)
    scorer = FunctionScorer(lambda files: 1.0 if "fixed" in files.get("a.py", "") else 0.0)
    agent = ScriptedAgent([{"replace": "a.py", "old": "broken", "new": "fixed"}])
    controller = Controller(store=store, scorer=scorer, make_agent=lambda s: agent, ...)

Tree hashes are real git object ids (``MemoryStore`` hashes blobs and trees as git does, without
running it), so a state has the same hash here as in ``treesearch.store.ShadowStore``.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import shutil
import stat
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from treesearch.agents import AgentContext, AgentResult
from treesearch.agents.scripted import ScriptedAgent
from treesearch.errors import (
    CaptureError,
    DiffError,
    MaterializeError,
    RefError,
    RestoreError,
)
from treesearch.scoring.results import Outcome, RunStatus, ScoreResult, TestCase, TestRun
from treesearch.store.source import apply_patch
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
    "CallbackAgent",
    "FunctionScorer",
    "MemorySink",
    "MemoryStore",
    "ScriptedAgent",
    "read_files",
]

_LINK = 0o120000
_EXEC = 0o100755
_FILE = 0o100644
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class _Scan:
    entries: dict[str, tuple[int, str]]
    """Path -> (git mode, blob id)."""
    blobs: dict[str, bytes]
    modes: dict[str, int]
    empty_dirs: tuple[str, ...]
    skipped: tuple[Skipped, ...]


def _blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 - git's id


def _tree_id(entries: Mapping[str, tuple[int, str]]) -> TreeHash:
    """The git tree object id of ``entries`` (nested trees hashed as git does)."""
    root: dict[bytes, Any] = {}
    for path, value in entries.items():
        parts = os.fsencode(path).split(b"/")
        node = root
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value

    def hash_tree(node: dict[bytes, Any]) -> str:
        items = []
        for name, value in node.items():
            if isinstance(value, dict):
                items.append(
                    (name + b"/", b"40000 " + name + b"\0" + bytes.fromhex(hash_tree(value)))
                )
            else:
                mode, oid = value
                items.append((name, b"%o " % mode + name + b"\0" + bytes.fromhex(oid)))
        body = b"".join(entry for _, entry in sorted(items))
        return hashlib.sha1(b"tree %d\0" % len(body) + body).hexdigest()  # noqa: S324

    return TreeHash(hash_tree(root))


def _scan(folder: Path) -> _Scan:
    """Files and symlinks under ``folder`` (never following links; ``.git`` folders left out)."""
    entries: dict[str, tuple[int, str]] = {}
    blobs: dict[str, bytes] = {}
    modes: dict[str, int] = {}
    empty: list[str] = []
    skipped: list[Skipped] = []
    base = os.fspath(folder)
    for top, dirs, files in os.walk(base):
        dirs[:] = sorted(
            d for d in dirs if d != ".git" and not os.path.islink(os.path.join(top, d))
        )
        links = sorted(d for d in os.listdir(top) if os.path.islink(os.path.join(top, d)))
        rel_top = os.path.relpath(top, base)
        names = sorted((set(files) | set(links)) - {".git"})  # a worktree's .git file too
        if not names and not dirs and rel_top != "." and not _has_git(top):
            empty.append(rel_top.replace(os.sep, "/"))
        for name in names:
            full = os.path.join(top, name)
            rel = name if rel_top == "." else f"{rel_top}/{name}".replace(os.sep, "/")
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                data, mode = os.fsencode(os.readlink(full)), _LINK
            elif stat.S_ISREG(st.st_mode):
                with open(full, "rb") as fh:
                    data = fh.read()
                mode = _EXEC if st.st_mode & 0o100 else _FILE
                perm = stat.S_IMODE(st.st_mode)
                if perm not in (0o644, 0o755):
                    modes[rel] = perm
            else:
                skipped.append(Skipped(rel, "special", stat.filemode(st.st_mode)))
                continue
            oid = _blob_id(data)
            entries[rel] = (mode, oid)
            blobs[oid] = data
    return _Scan(entries, blobs, modes, tuple(empty), tuple(skipped))


def _has_git(top: str) -> bool:
    return os.path.lexists(os.path.join(top, ".git"))


def read_files(folder: str | os.PathLike[str]) -> dict[str, str]:
    """The text of every regular file under ``folder`` by relative path (``.git`` left out;
    undecodable bytes replaced): what ``FunctionScorer`` passes to its function."""
    scan = _scan(Path(folder))
    return {
        path: scan.blobs[oid].decode("utf-8", errors="replace")
        for path, (mode, oid) in sorted(scan.entries.items())
        if mode != _LINK
    }


class _Hold:
    """A workspace hold that holds nothing (one process, one store): the session's protocol."""

    reclaimed: str | None = None

    def __init__(self, purpose: str) -> None:
        self.purpose = purpose

    def release(self) -> None:
        """Nothing to release."""

    def __enter__(self) -> _Hold:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class MemoryStore:
    """A ``SnapshotStore`` without git: states are kept in this object's memory.

    The workspace is a real folder: ``capture`` reads it, ``restore`` writes the target's files
    back into it (each file replaced through a temporary file, deletions and empty folders as
    ``ShadowStore`` does them), so agents and session tools run unchanged. Tree hashes are git's
    (blob and tree objects hashed as git hashes them); commit ids are a stable SHA-1 of the
    snapshot's tree, parent, label, kind, metadata and sequence number, so the same operations
    give the same ids in every run. ``.git`` folders are neither captured nor touched; special
    files are reported in ``Snapshot.skipped``; there is no size limit and no ignore file.
    ``path`` is where agent caches would go beside a store (``MemoryStore`` writes nothing).
    """

    def __init__(self, workspace: str | os.PathLike[str], *, path: Path | None = None) -> None:
        root = Path(workspace).resolve()
        if not root.is_dir():
            raise CaptureError(f"{root} is not a folder: give an existing workspace folder")
        self.workspace = root
        """The workspace folder."""
        self.path = path if path is not None else root.parent / f".{root.name}.memory-store"
        """Nominal store folder (never created)."""
        self.snapshots: list[Snapshot] = []
        """Every snapshot taken, oldest first (safety snapshots included)."""
        self.restores: list[RestoreResult] = []
        """Every restore done, in order."""
        self._trees: dict[str, dict[str, tuple[int, str]]] = {}
        self._blobs: dict[str, bytes] = {}

    # --- recording

    def capture(
        self,
        label: str | None = None,
        meta: dict[str, Any] | None = None,
        *,
        if_changed: bool = False,
    ) -> Snapshot:
        """Record the workspace as it is now. ``if_changed``: with nothing changed since the last
        snapshot, return that one (whatever its label and meta), as ``ShadowStore`` does."""
        return self._record(label, meta, "capture", if_changed=if_changed)

    def _record(
        self,
        label: str | None,
        meta: dict[str, Any] | None,
        kind: str,
        *,
        if_changed: bool = False,
    ) -> Snapshot:
        t0 = time.perf_counter()
        try:
            scan = _scan(self.workspace)
        except OSError as exc:
            raise CaptureError(f"capture failed: cannot read {exc.filename}: {exc}") from exc
        tree = _tree_id(scan.entries)
        self._trees[tree] = scan.entries
        self._blobs.update(scan.blobs)
        last = self.snapshots[-1] if self.snapshots else None
        before = self._trees.get(last.tree, {}) if last is not None else {}
        changed = tuple(
            sorted(
                p for p in set(before) | set(scan.entries) if before.get(p) != scan.entries.get(p)
            )
        )
        if (
            if_changed
            and last is not None
            and last.tree == tree
            and last.modes == scan.modes
            and last.empty_dirs == scan.empty_dirs
        ):
            return replace(last, changed=())
        meta = dict(meta or {})
        parent = last.commit if last is not None else None
        ident = json.dumps(
            [tree, parent, label, kind, meta, len(self.snapshots)], sort_keys=True, default=str
        )
        snap = Snapshot(
            tree=tree,
            commit=CommitId(hashlib.sha1(ident.encode()).hexdigest()),  # noqa: S324 - an id
            parent=parent,
            label=label,
            created_at=time.time(),
            kind=kind,
            meta=meta,
            changed=changed,
            skipped=scan.skipped,
            stats=CaptureStats(len(scan.entries), len(scan.entries), time.perf_counter() - t0),
            modes=scan.modes,
            empty_dirs=scan.empty_dirs,
        )
        self.snapshots.append(snap)
        return snap

    def resolve(self, ref: str) -> Snapshot:
        """The snapshot named by a tree hash, a commit, a unique prefix of either, a label, or
        ``last``; the newest one when several recorded the same tree."""
        ref = ref.strip()
        newest = self.snapshots[::-1]
        if not ref:
            raise RefError("empty snapshot reference: give a tree hash, commit, prefix or label")
        if ref in ("last", "@") and newest:
            return newest[0]
        low = ref.lower()
        if len(ref) >= 4 and set(low) <= _HEX:
            hits = [s for s in newest if s.commit.startswith(low) or s.tree.startswith(low)]
            exact = [s for s in hits if low in (s.commit, s.tree)]
            if exact:
                return exact[0]
            if len({s.tree for s in hits}) == 1:
                return hits[0]
            if hits:
                raise RefError(f"snapshot prefix {ref!r} is ambiguous: give more characters")
        for snap in newest:
            if snap.label == ref:
                return snap
        raise RefError(f"no snapshot matches {ref!r}")

    # --- putting states on disk

    def restore(self, ref: str) -> RestoreResult:
        """Put snapshot ``ref`` on disk after a safety snapshot of the workspace."""
        t0 = time.perf_counter()
        target = self.resolve(ref)
        safety = self._record(None, {"purpose": "safety"}, "safety")
        try:
            done = self._write(self.workspace, self._trees[safety.tree], safety, target)
        except OSError as exc:
            raise RestoreError(f"restore of {target.tree[:12]} failed: {exc}") from exc
        result = RestoreResult(
            target=target,
            safety=safety,
            written=done["written"],
            deleted=done["deleted"],
            pruned=done["pruned"],
            created_dirs=done["created"],
            chmodded=done["chmodded"],
            seconds=time.perf_counter() - t0,
        )
        self.restores.append(result)
        return result

    def materialize(self, ref: str, dest: str | os.PathLike[str]) -> Snapshot:
        """Write snapshot ``ref`` into the missing or empty folder ``dest``."""
        snap = self.resolve(ref)
        target = Path(dest)
        if target.is_symlink() or (
            target.exists() and (not target.is_dir() or any(target.iterdir()))
        ):
            raise MaterializeError(f"{target} is not an empty folder; give a new or empty folder")
        try:
            target.mkdir(parents=True, exist_ok=True)
            self._write(target, {}, None, snap)
        except OSError as exc:
            raise MaterializeError(f"cannot materialize into {target}: {exc}") from exc
        return snap

    def apply_patch(self, patch: str, *, strip: int = 1) -> PatchResult:
        """Apply a unified diff to the workspace with ``git apply`` (through ``treesearch.store``,
        the only code that runs git), all or nothing."""
        return apply_patch(self.workspace, patch, strip=strip)

    def _write(
        self,
        root: Path,
        current: Mapping[str, tuple[int, str]],
        before: Snapshot | None,
        target: Snapshot,
    ) -> dict[str, tuple[str, ...]]:
        want = self._trees[target.tree]
        deleted = sorted(p for p in current if p not in want)
        written = sorted(p for p in want if current.get(p) != want[p])
        old_modes = before.modes if before is not None else {}
        chmodded = sorted(
            p
            for p in want
            if p not in written and want[p][0] != _LINK and old_modes.get(p) != target.modes.get(p)
        )
        for rel in deleted:
            os.unlink(root / rel)
        for rel in written:
            mode, oid = want[rel]
            path = self._make_parents(root, rel)
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            tmp = path.with_name(f".{path.name}.memory-store-tmp")
            if mode == _LINK:
                os.symlink(os.fsdecode(self._blobs[oid]), tmp)
            else:
                tmp.write_bytes(self._blobs[oid])
                os.chmod(tmp, target.modes.get(rel, 0o755 if mode == _EXEC else 0o644))
            os.replace(tmp, path)
        for rel in chmodded:
            os.chmod(root / rel, target.modes.get(rel, 0o755 if want[rel][0] == _EXEC else 0o644))
        keep = {"/".join(p.split("/")[:i]) for p in want for i in range(1, p.count("/") + 1)}
        keep |= {
            "/".join(d.split("/")[:i])
            for d in target.empty_dirs
            for i in range(1, d.count("/") + 2)
        }
        pruned = []
        for rel in sorted({os.path.dirname(p) for p in deleted if "/" in p}, key=len, reverse=True):
            while rel and rel not in keep:
                folder = root / rel
                if not folder.is_dir() or any(folder.iterdir()):
                    break
                folder.rmdir()
                pruned.append(rel)
                rel = os.path.dirname(rel)
        created = []
        for rel in target.empty_dirs:
            if not (root / rel).is_dir():
                self._make_parents(root, rel + "/x")
                created.append(rel)
        return {
            "written": tuple(written),
            "deleted": tuple(deleted),
            "pruned": tuple(pruned),
            "created": tuple(created),
            "chmodded": tuple(chmodded),
        }

    @staticmethod
    def _make_parents(root: Path, rel: str) -> Path:
        """Real folders for every parent of ``rel`` (a link or file in the way is removed: a
        restore never writes through a symlink)."""
        folder = root
        for part in rel.split("/")[:-1]:
            folder = folder / part
            if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
                folder.unlink()
            if not folder.exists():
                folder.mkdir()
        return folder / rel.split("/")[-1]

    # --- differences

    def diff(self, a: str, b: str | None = None, *, max_patch_bytes: int = 1_000_000) -> Diff:
        """Changes from ``a`` to ``b`` (``None``: the workspace as it is now, not recorded).

        Line counts and the patch come from ``difflib``: on ambiguous edits they may differ
        from git's."""
        ta = self.resolve(a).tree
        if b is None:
            try:
                scan = _scan(self.workspace)
            except OSError as exc:
                raise DiffError(f"diff failed: {exc}") from exc
            self._blobs.update(scan.blobs)
            tb, entries_b = _tree_id(scan.entries), scan.entries
        else:
            tb = self.resolve(b).tree
            entries_b = self._trees[tb]
        return self._diff(ta, self._trees[ta], tb, entries_b, max_patch_bytes)

    def diffs(self, pairs: Sequence[tuple[str, str]]) -> list[Diff]:
        """File-level changes (no patch text) for each pair, in order."""
        return [self.diff(a, b, max_patch_bytes=0) for a, b in pairs]

    def _diff(
        self,
        ta: TreeHash,
        old: Mapping[str, tuple[int, str]],
        tb: TreeHash,
        new: Mapping[str, tuple[int, str]],
        cap: int,
    ) -> Diff:
        files: list[FileChange] = []
        patch: list[str] = []
        for path in sorted(set(old) | set(new), key=os.fsencode):
            if old.get(path) == new.get(path):
                continue
            a, b = old.get(path), new.get(path)
            status = "A" if a is None else "D" if b is None else "M"
            if a is not None and b is not None and (a[0] == _LINK) != (b[0] == _LINK):
                status = "T"
            da = self._blobs[a[1]] if a else b""
            db = self._blobs[b[1]] if b else b""
            binary = b"\0" in da[:8000] or b"\0" in db[:8000]
            lines = [] if binary else _unified(path, da, db, a is None, b is None)
            added = sum(1 for ln in lines[2:] if ln.startswith("+"))
            removed = sum(1 for ln in lines[2:] if ln.startswith("-"))
            files.append(
                FileChange(
                    path, status, a[0] if a else None, b[0] if b else None, added, removed, binary
                )
            )
            if cap > 0:
                head = f"diff --git a/{path} b/{path}\n"
                if a is None:
                    head += f"new file mode {b[0]:o}\n" if b else ""
                elif b is None:
                    head += f"deleted file mode {a[0]:o}\n"
                elif a[0] != b[0]:
                    head += f"old mode {a[0]:o}\nnew mode {b[0]:o}\n"
                body = f"Binary files a/{path} and b/{path} differ\n" if binary else "".join(lines)
                patch.append(head + body)
        text = "".join(patch)
        truncated = cap > 0 and len(text.encode("utf-8", "surrogateescape")) > cap
        if truncated:
            text = text.encode("utf-8", "surrogateescape")[:cap].decode("utf-8", "ignore")
        return Diff(ta, tb, tuple(files), text if cap > 0 else "", truncated)

    # --- the rest of the session's protocol

    def hold(self, purpose: str = "") -> _Hold:
        """A hold that holds nothing (a ``MemoryStore`` belongs to one process)."""
        return _Hold(purpose)

    def close(self) -> None:
        """Nothing to close."""


def _unified(path: str, a: bytes, b: bytes, added: bool, deleted: bool) -> list[str]:
    old = a.decode("utf-8", "surrogateescape").splitlines(keepends=True)
    new = b.decode("utf-8", "surrogateescape").splitlines(keepends=True)
    out = []
    for line in difflib.unified_diff(
        old,
        new,
        "/dev/null" if added else f"a/{path}",
        "/dev/null" if deleted else f"b/{path}",
        n=3,
    ):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return out


@dataclass
class FunctionScorer:
    """A ``StateScorer`` whose score is ``fn(files)``: a function of the text of the
    workspace's files (``read_files``), in [0, 1]; 1.0 counts as a full pass.

    Each call is one "test run" (``test_runs``); with ``cache`` (the default), a tree scored
    before is served from memory (``cache_hits``), as the real scorer's cache does."""

    fn: Callable[[dict[str, str]], float]
    """The score of a state, from its files."""
    cache: bool = True
    """Serve a tree scored before from memory."""
    name: str = "function"
    """The score's name (``ScoreResult.score_name``)."""
    search_spec: Any = None
    """No test spec: nothing bounds a run."""
    test_runs: int = 0
    cache_hits: int = 0
    scored: list[str | None] = field(default_factory=list)
    """Trees actually scored (``None``: a live workspace without a tree), in order."""
    _memo: dict[str, tuple[float, TestRun]] = field(default_factory=dict, repr=False)

    def score(
        self,
        workspace: str | os.PathLike[str],
        tree: str | None = None,
        *,
        parent: Any = None,
        time_limit: float | None = None,
        max_runs: int | None = None,
    ) -> ScoreResult:
        """Score the files under ``workspace`` (``parent``, ``time_limit`` and ``max_runs`` are
        ignored: one call is one run)."""
        known = self._memo.get(tree) if tree is not None and self.cache else None
        cached = known is not None
        if known is not None:
            self.cache_hits += 1
            value, run = known
        else:
            value = min(1.0, max(0.0, float(self.fn(read_files(workspace)))))
            outcome = Outcome.PASSED if value >= 1.0 else Outcome.FAILED
            run = TestRun(
                RunStatus.OK,
                (TestCase("score", outcome, message=f"score {value:g}"),),
                exit_code=0 if value >= 1.0 else 1,
                output=f"score {value:g}\n",
                command=f"<{self.name}>",
            )
            self.test_runs += 1
            self.scored.append(tree)
            if tree is not None and self.cache:
                self._memo[tree] = (value, run)
        return ScoreResult(value, value >= 1.0, self.name, run, tree=tree, cached=cached)

    def complete(
        self,
        workspace: str | os.PathLike[str],
        tree: str | None,
        result: ScoreResult,
        *,
        time_limit: float | None = None,
    ) -> ScoreResult:
        """Never needed (no result of ``score`` is partial): the same as ``score``."""
        return self.score(workspace, tree)


class CallbackAgent:
    """An agent whose ``run`` is a function: ``fn(ctx) -> AgentResult`` (it acts through
    ``ctx.session`` steps like any agent). For tests that need what a scripted agent cannot say,
    e.g. the tokens a model used."""

    kind = "callback"

    def __init__(self, fn: Callable[[AgentContext], AgentResult]) -> None:
        self.fn = fn

    def run(self, ctx: AgentContext) -> AgentResult:
        return self.fn(ctx)


@dataclass
class MemorySink:
    """A ``RunSink`` that keeps a run in memory: ``events`` replay into the same graph."""

    events: list[dict[str, Any]] = field(default_factory=list)
    timings: list[dict[str, Any]] = field(default_factory=list)
    transcripts: dict[str, dict[str, Any]] = field(default_factory=dict)
    test_logs: dict[str, ScoreResult] = field(default_factory=dict)

    def append(self, event: Mapping[str, Any]) -> None:
        # Through JSON, as a run directory's log: what is replayed is what would be read back.
        self.events.append(json.loads(json.dumps(event, sort_keys=True)))

    def append_timing(self, record: Mapping[str, Any]) -> None:
        self.timings.append(dict(record))

    def session_file(self, name: str) -> Path | None:
        return None

    def write_transcript(self, name: str, data: Mapping[str, Any]) -> str:
        self.transcripts[name] = json.loads(json.dumps(data, default=str))
        return f"transcripts/{name}.json"

    def write_test_log(self, tree: str, result: ScoreResult) -> None:
        self.test_logs[tree] = result

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.events)
