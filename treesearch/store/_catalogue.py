"""The catalogue of snapshots: recording them as commits, finding them again (resolve, log,
labels), the store's small state file (last snapshot, undo target, generation), pins, held sets
and gc.

Every snapshot is a commit under ``refs/treesearch/snapshots/`` whose message carries its label,
meta and kind; pins are refs under ``refs/treesearch/pins/``. A pin names one snapshot, or a
*held set*: a commit of the empty tree whose parents are the commits held (a run's nodes and
the step snapshots its session files name, some of them commits of a search worker's store that
no ref of this store names) and whose one-line message names the holder, a folder: while the
folder exists ``gc`` keeps every one of them; once it is gone, ``gc`` lets the set go. What git's tree cannot hold
(permission bits other than git's 644/755, empty folders) is a JSON blob of its own, named by id in
the message (``"fsmeta"``) and kept reachable by ``refs/treesearch/meta/<id>``: snapshots with the
same metadata share one blob, so a 0664 checkout (umask 002) costs its list of modes once, not once
per snapshot. Snapshots of format 1 (the metadata inline in the message) are read as before.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from treesearch.errors import CaptureError, GcError, RefError
from treesearch.store._fs import atomic_write
from treesearch.store._git import GitFailed, GitRunner, blob_oid, fixed_commit_date
from treesearch.store._objects import commit_content, write_object
from treesearch.store._retention import GcPolicy, named_for_drop, plan_gc, pressure_order
from treesearch.store._trees import Trees, objects_dir_of
from treesearch.store._walk import default_mode
from treesearch.store.values import CaptureStats, Skipped, Snapshot
from treesearch.types import CommitId, TreeHash

STORE_FORMAT = 1
"""The store folder's layout (its ``format`` file)."""
SNAPSHOT_FORMAT = 2
"""Snapshot messages written now: 2 names the metadata blob; 1 (read too) held it inline."""
KEEP_TITLE = "treesearch keep "
"""The start of a held set's message; the rest of its one line is JSON (``holder``)."""
SNAP_REFS = "refs/treesearch/snapshots/"
PIN_REFS = "refs/treesearch/pins/"
META_REFS = "refs/treesearch/meta/"
_CHANGED_CAP = 5000
_HEX = set("0123456789abcdef")

Run = Callable[..., bytes]


@dataclass(frozen=True)
class TreeEntry:
    """One file of a snapshot, as ``show`` lists it."""

    path: str
    mode: int
    """Git mode: 0o100644, 0o100755 or 0o120000 (symlink)."""
    size: int
    oid: str
    perm: int
    """Permission bits the restore gives the file (symlinks: 0o777)."""


@dataclass(frozen=True)
class GcResult:
    """What ``gc`` dropped and what the store weighs now."""

    dropped: tuple[CommitId, ...]
    kept: int
    bytes_before: int
    bytes_after: int
    dry_run: bool = False
    snapshots: tuple[Snapshot, ...] = ()
    """The dropped (or, with ``dry_run``, to be dropped) snapshots, newest first."""
    held: tuple[Held, ...] = ()
    """The held sets (a run's nodes): those kept and those let go (``released``)."""


@dataclass(frozen=True)
class Held:
    """A named set of commits ``gc`` keeps while its holder folder exists (``ShadowStore.keep``)."""

    name: str
    holder: str | None
    """The folder (a run directory) whose existence holds the set; ``None``: held until
    released by name."""
    commits: tuple[CommitId, ...]
    snapshots: int
    """How many of ``commits`` are snapshots of this store (the others: step snapshots of a
    search worker's store, kept with their objects)."""
    released: str | None = None
    """Why ``gc`` let the set go (``None``: kept)."""


@dataclass
class State:
    """``state.json``: a generation counter (bumped by every change of the store, so another
    process knows its caches are stale), the last snapshot and the one ``undo`` returns to."""

    generation: int = 0
    last: str | None = None
    undo: str | None = None
    stamp: str | None = None
    """Random, new with every write of the file: the lock's release names the state it leaves
    (``_lock.py``), so a process that knows that write need not read the file again."""

    @classmethod
    def load(cls, path: Path) -> State:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                data = json.loads(os.read(fd, 1 << 16))
            finally:
                os.close(fd)
            stamp = data.get("stamp")
            return cls(
                int(data.get("generation", 0)),
                data.get("last"),
                data.get("undo"),
                stamp if isinstance(stamp, str) else None,
            )
        except (OSError, ValueError, TypeError, AttributeError):
            return cls()

    def save(self, path: Path) -> None:
        stamp = os.urandom(8).hex()
        data = {"generation": self.generation, "last": self.last, "undo": self.undo}
        atomic_write(path, json.dumps({**data, "stamp": stamp}))
        self.stamp = stamp


class Catalogue:
    """The snapshots of one store and its state file."""

    def __init__(self, store: Path, git: GitRunner, run: Run, trees: Trees) -> None:
        self.store = store
        self.trees = trees
        """The store's trees (``_trees.py``): a commit joins the pack of its scan's objects."""
        self.objects = trees.objects
        """The store's one object reader: metadata blobs are read through it."""
        self.git_dir = store / "git"
        self.git = git
        self.run = run
        self.state = State()
        self.gen_seen = -1
        self.defer_save = False
        """While set, ``bump`` changes the state in memory only: the next ``bump`` (or
        ``save_pending``) writes it (a restore records its safety snapshot and its end in one
        write of ``state.json``)."""
        self._unsaved = False
        self.stamp: str | None = None
        """The stamp of the state file as this object last read or wrote it; ``None`` while
        the state in memory may differ from the file's."""
        self.snapshots: dict[str, Snapshot] | None = None
        self.fsmeta: dict[str, str] = {}
        """Commit id -> id of its metadata blob (format 2 snapshots that have metadata)."""
        self._blobs: dict[str, tuple[dict[str, int], tuple[str, ...]]] = {}
        """Metadata blob id -> (modes, empty folders): blobs never change, so never stale."""
        self._found: set[str] = set()
        """Commits ``keep`` found in the object folder (no snapshot of this store); forgotten
        by ``gc``."""
        self._tips: dict[str, str] = {}
        """Held set ref -> its newest commit, as this object last wrote it."""

    # ------------------------------------------------------------------ state

    def refresh(self) -> bool:
        """Read the state file; True when another process (or a crash) changed the store since
        this object last looked: every cache of it must be dropped then."""
        self.state = State.load(self.store / "state.json")
        self.stamp = self.state.stamp
        if self.state.generation == self.gen_seen:
            return False
        self.snapshots = None
        self._found.clear()
        self._tips.clear()
        self.gen_seen = self.state.generation
        return True

    def bump(self, **changes: str | None) -> None:
        """Record ``changes`` (``last``, ``undo``) and a new generation."""
        self.stamp = None
        for key, value in changes.items():
            setattr(self.state, key, value)
        self.state.generation += 1
        self.gen_seen = self.state.generation
        if self.defer_save:
            self._unsaved = True
            return
        self.save_pending(force=True)

    def save_pending(self, *, force: bool = False) -> None:
        """Write the state if a ``bump`` left it unsaved (``force``: in any case)."""
        if force or self._unsaved:
            self.state.save(self.store / "state.json")
            self._unsaved = False
            self.stamp = self.state.stamp

    def knows(self, stamp: str | None) -> bool:
        """Is ``stamp`` that of the state file this object read or wrote last, with nothing
        changed in memory since (its state and caches are the file's: no need to read it)?"""
        return stamp is not None and stamp == self.stamp and not self._unsaved

    # ------------------------------------------------------------------ reading

    def load(self) -> dict[str, Snapshot]:
        """Every snapshot, by commit id (cached until the store changes)."""
        if self.snapshots is None:
            out = self.run(
                ["for-each-ref", "--format=%(objectname)%00%(tree)%00%(contents)%01", SNAP_REFS]
            )
            bodies: list[tuple[str, str, dict[str, Any]]] = []
            for rec in out.split(b"\x01"):
                rec = rec.lstrip(b"\n")
                if not rec:
                    continue
                commit, tree, contents = rec.split(b"\0", 2)
                body = _body(contents.decode())
                if body is not None:
                    bodies.append((commit.decode(), tree.decode(), body))
            self._read_blobs({b["fsmeta"] for _c, _t, b in bodies if b.get("fsmeta")})
            self.fsmeta = {c: b["fsmeta"] for c, _t, b in bodies if b.get("fsmeta")}
            self.snapshots = {c: self._snapshot(c, t, b) for c, t, b in bodies}
        return self.snapshots

    def _read_blobs(self, oids: Iterable[str]) -> None:
        todo = [o for o in oids if o not in self._blobs]
        if not todo:
            return
        for oid in todo:
            data = json.loads(self.objects.read(oid))
            modes = {k: int(v) for k, v in data.get("modes", {}).items()}
            self._blobs[oid] = (modes, tuple(data.get("empty_dirs", ())))

    @property
    def objects_dir(self) -> Path:
        """Where objects written without a git process go: where the store's git writes them
        (a search worker's git points at the search store's objects)."""
        return objects_dir_of(self.git)

    @property
    def _object_tmp(self) -> Path:
        """Where an object's temporary file goes: beside the object folder, on its filesystem
        (a search worker's store lives in a scratch folder, often on another filesystem than
        the search store whose objects it writes: a rename across the two fails)."""
        return self.objects_dir.parent

    def _snapshot(self, commit: str, tree: str, data: dict[str, Any]) -> Snapshot:
        oid = data.get("fsmeta")
        if oid:
            modes, empty_dirs = self._blobs[oid]
            modes = dict(modes)
        else:
            modes = {k: int(v) for k, v in (data.get("modes") or {}).items()}
            empty_dirs = tuple(data.get("empty_dirs") or ())
        return Snapshot(
            tree=TreeHash(tree),
            commit=CommitId(commit),
            parent=data.get("parent"),
            label=data.get("label"),
            created_at=float(data.get("created_at", 0)),
            kind=data.get("kind", "capture"),
            meta=data.get("meta") or {},
            changed=tuple(data.get("changed") or ()),
            skipped=tuple(Skipped(*s) for s in data.get("skipped") or ()),
            stats=None,
            modes=modes,
            empty_dirs=empty_dirs,
            clock_dated=data.get("clock", True) is not False,
        )

    def get(self, commit: str | None) -> Snapshot | None:
        return self.load().get(commit) if commit else None

    def newest_first(self) -> list[Snapshot]:
        return sorted(self.load().values(), key=lambda s: s.created_at, reverse=True)

    def resolve(self, ref: str) -> Snapshot:
        """The snapshot named by a tree hash, a commit, a unique prefix of either, a label,
        ``last``/``@`` or ``undo``. A tree recorded by several snapshots: the newest of them."""
        ref = ref.strip()
        if not ref:
            raise RefError("empty snapshot reference: give a tree hash, commit, prefix or label")
        if ref in ("last", "@", "undo"):
            return self._named(ref)
        newest = self.newest_first()
        if len(ref) >= 4 and set(ref.lower()) <= _HEX:
            low = ref.lower()
            hits = [s for s in newest if s.commit.startswith(low) or s.tree.startswith(low)]
            if len({s.tree for s in hits}) > 1:
                names = ", ".join(sorted({s.commit[:12] for s in hits})[:8])
                raise RefError(
                    f"snapshot prefix {ref!r} is ambiguous (matches {names}): give more characters"
                )
            if hits:
                by_commit = [s for s in hits if s.commit.startswith(low)]
                return (by_commit or hits)[0]
        labelled = [s for s in newest if s.label == ref]
        if labelled:
            return labelled[0]
        raise RefError(
            f"no snapshot matches {ref!r}: give a tree hash, commit, unique prefix or "
            "label (see `treesearch snap log`)"
        )

    def _named(self, ref: str) -> Snapshot:
        if ref == "undo":
            undo = self.get(self.state.undo)
            if undo is None:
                raise RefError("no safety snapshot yet: nothing to undo")
            return undo
        last = self.get(self.state.last)
        if last is None:
            raise RefError("no snapshot yet: capture one first")
        return last

    def tree_of(self, ref: str) -> TreeHash:
        """Tree of a snapshot reference, or of any tree/commit object in the store."""
        try:
            return self.resolve(ref).tree
        except RefError:
            if len(ref) >= 4 and set(ref.lower()) <= _HEX:
                try:
                    out = self.git.run(["rev-parse", "--verify", "--quiet", f"{ref}^{{tree}}"])
                    return TreeHash(out.decode().strip())
                except GitFailed:
                    pass
            raise

    def files(self, snap: Snapshot) -> list[TreeEntry]:
        """The files of ``snap`` with mode, size and restored permission."""
        out = self.run(["ls-tree", "-r", "-z", "--long", "--full-tree", snap.tree])
        entries = []
        for rec in out.split(b"\0"):
            if not rec:
                continue
            info, _, path = rec.partition(b"\t")
            mode, _type, oid, size = info.split()
            m = int(mode, 8)
            p = os.fsdecode(path)
            perm = 0o777 if m == 0o120000 else snap.modes.get(p, default_mode(m))
            entries.append(TreeEntry(p, m, int(size) if size != b"-" else 0, oid.decode(), perm))
        return entries

    # ------------------------------------------------------------------ recording

    def record(
        self,
        kind: str,
        tree: TreeHash,
        *,
        label: str | None,
        meta: dict[str, Any],
        modes: dict[str, int],
        empty_dirs: tuple[str, ...],
        skipped: tuple[Skipped, ...],
        changed: Sequence[str],
        stats: CaptureStats,
        fixed_dates: bool,
    ) -> Snapshot:
        """Commit ``tree`` as a new snapshot (child of the last one) and make it the last."""
        last = self.get(self.state.last)
        created: float = time.time()
        if fixed_dates:
            created = fixed_commit_date(last.created_at if last is not None else None)
        fsmeta = self._store_fsmeta(last, modes, empty_dirs)
        body = {
            "format": SNAPSHOT_FORMAT,
            "kind": kind,
            "label": label,
            "meta": meta,
            "parent": last.commit if last else None,
            "created_at": created,
            "fsmeta": fsmeta,
            "skipped": [[s.path, s.reason, s.detail] for s in skipped],
            "changed": list(changed[:_CHANGED_CAP]),
            "changed_count": len(changed),
            "stats": {"files_seen": stats.files_seen, "files_hashed": stats.files_hashed},
        }
        if fixed_dates:
            body["clock"] = False  # the date orders snapshots; it is not their age
        try:
            message = (
                f"treesearch {kind}{': ' + label if label else ''}\n\n"
                + json.dumps(body, sort_keys=True, ensure_ascii=True)
                + "\n"
            )
        except (TypeError, ValueError) as exc:
            raise CaptureError(f"snapshot meta is not JSON-serialisable: {exc}") from exc
        # The bytes `git commit-tree` writes, without its process (``_objects.py``).
        content = commit_content(tree, message.encode(), int(created))
        pending = self.trees.pending
        if pending is None:
            commit = write_object(self.objects_dir, "commit", content, tmp_dir=self._object_tmp)
        else:
            # With the objects of the scan, in one pack, written before the ref names them.
            commit = pending.add("commit", content)
            self.trees.flush()
        self._write_ref(SNAP_REFS + commit, commit)
        snap = Snapshot(
            tree=tree,
            commit=CommitId(commit),
            parent=last.commit if last else None,
            label=label,
            created_at=created,
            kind=kind,
            meta=meta,
            changed=tuple(changed),
            skipped=skipped,
            stats=stats,
            modes=dict(modes),
            empty_dirs=empty_dirs,
            clock_dated=not fixed_dates,
        )
        self.bump(last=commit)
        if fsmeta:
            self.fsmeta[commit] = fsmeta
        if self.snapshots is not None:
            self.snapshots[commit] = replace(snap, stats=None)
        return snap

    def _store_fsmeta(
        self, last: Snapshot | None, modes: dict[str, int], empty_dirs: tuple[str, ...]
    ) -> str | None:
        """The id of the blob holding ``modes`` and ``empty_dirs`` (``None``: nothing to hold),
        written (with its ref) only when no snapshot holds the same already."""
        if not modes and not empty_dirs:
            return None
        if last is not None and last.modes == modes and last.empty_dirs == empty_dirs:
            known = self.fsmeta.get(last.commit)
            if known:
                return known
        data = json.dumps(
            {"modes": modes, "empty_dirs": list(empty_dirs)},
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=True,
        ).encode()
        oid = blob_oid(data)
        # Held (object and ref) only while a snapshot names it: the loaded snapshots say which.
        if oid not in set(self.fsmeta.values()):
            write_object(self.objects_dir, "blob", data, tmp_dir=self._object_tmp)
            self._write_ref(META_REFS + oid, oid)
            self._blobs[oid] = (dict(modes), tuple(empty_dirs))
        return oid

    def _write_ref(self, name: str, oid: str) -> None:
        """Create a loose ref (we hold the store lock; saves a git process per snapshot)."""
        path = self.git_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        # The temp file outside refs/: a leftover must never look like a ref.
        atomic_write(path, oid + "\n", tmp_dir=self.store)

    # ------------------------------------------------------------------ pins & gc

    def pin(self, ref: str, name: str) -> Snapshot:
        snap = self.resolve(ref)
        self.run(["update-ref", PIN_REFS + _ref_name(name), snap.commit])
        return snap

    def unpin(self, name: str) -> None:
        self.run(["update-ref", "-d", PIN_REFS + _ref_name(name)])

    def keep(self, name: str, commits: Iterable[str], holder: str | None) -> int:
        """Add ``commits`` (commit ids, or any snapshot reference) to what ``name`` holds,
        held while the folder ``holder`` exists.

        Each call writes one small commit whose parents are the set's previous commit and the
        commits added (a chain: a run adding a node per expansion writes a node's worth each
        time, never the whole set again). What names no commit of the object folder is left out:
        a parent git cannot find would fail every later ``gc``. Returns how many were added."""
        ref = PIN_REFS + _ref_name(name)
        prev = self._tips.get(ref)
        if prev is None:
            try:
                prev = self.run(["rev-parse", "--verify", "--quiet", ref]).decode().strip()
            except GitFailed:
                prev = ""
        known = self.load()
        held: dict[str, None] = {}
        for c in dict.fromkeys(commits):
            if c in known or c in self._found:
                held[c] = None
                continue
            kind = b""
            if len(c) == 40 and set(c) <= _HEX:
                with contextlib.suppress(GitFailed):
                    kind, _ = self.objects.read_object(c)
            if kind == b"commit":  # (a commit of a search worker's store)
                held[c] = None
                self._found.add(c)
                continue
            with contextlib.suppress(RefError):  # a tree hash, a prefix, a label: its snapshot
                held[self.resolve(c).commit] = None
        self.trees.flush()  # (a held commit whose objects wait in a pack of the scan)
        tree = write_object(self.objects_dir, "tree", b"", tmp_dir=self._object_tmp)
        line = json.dumps({"holder": holder}, sort_keys=True, ensure_ascii=True)
        parents = ([prev] if prev else []) + list(held)
        content = commit_content(tree, f"{KEEP_TITLE}{line}\n".encode(), 0, parents)
        oid = write_object(self.objects_dir, "commit", content, tmp_dir=self._object_tmp)
        self._write_ref(ref, oid)
        self._tips[ref] = oid
        return len(held)

    def holds(self) -> tuple[dict[str, str], list[Held]]:
        """The pins of single snapshots (ref name -> commit) and the held sets."""
        fmt = "%(refname)%00%(objectname)%00%(contents:subject)"
        out = self.run(["for-each-ref", f"--format={fmt}", PIN_REFS]).decode("utf-8", "replace")
        single: dict[str, str] = {}
        tips: dict[str, tuple[str, str]] = {}
        for line in out.splitlines():
            ref, oid, subject = (line.split("\0") + ["", ""])[:3]
            name = ref[len(PIN_REFS) :]
            if subject.startswith(KEEP_TITLE):
                tips[name] = (oid, subject)
            else:
                single[name] = oid
        if not tips:
            return single, []
        # Every commit of the chains: its parents, and whether it is a link of a chain.
        walk = self.run(
            ["log", "--format=%H%x00%P%x00%s", *sorted({oid for oid, _ in tips.values()})]
        ).decode("utf-8", "replace")
        graph: dict[str, tuple[list[str], bool]] = {}
        for line in walk.splitlines():
            oid, parents, subject = (line.split("\0") + ["", ""])[:3]
            graph[oid] = (parents.split(), subject.startswith(KEEP_TITLE))
        known = self.load()
        sets: list[Held] = []
        for name, (tip, subject) in sorted(tips.items()):
            try:
                holder = json.loads(subject[len(KEEP_TITLE) :]).get("holder")
            except (ValueError, AttributeError):
                holder = None
            commits: dict[str, None] = {}
            link: str | None = tip
            while link is not None:
                above = graph.get(link, ([], False))[0]
                link = None
                for p in above:
                    if graph.get(p, ([], False))[1]:
                        link = p
                    else:
                        commits[p] = None
            held = tuple(CommitId(c) for c in commits)
            sets.append(Held(name, holder, held, sum(c in known for c in held)))
        return single, sets

    def disk_usage(self) -> int:
        """Bytes the store's objects take on disk."""
        total = 0
        for dirpath, _dirs, names in os.walk(self.git_dir / "objects"):
            for name in names:
                with contextlib.suppress(FileNotFoundError):
                    total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
        return total

    def gc(
        self,
        policy: GcPolicy,
        max_bytes: int | None,
        protect: Iterable[str],
        drop_refs: Iterable[str],
        dry_run: bool,
        release: Iterable[str] = (),
    ) -> GcResult:
        """Drop the snapshots ``policy`` lets go, then (``max_bytes``) more, oldest first.
        Held sets stay unless their holder folder is gone or ``release`` names them."""
        snaps = self.newest_first()
        keep: set[str] = {c for c in (self.state.last, self.state.undo) if c}
        keep.update(self.resolve(r).commit for r in protect)
        single, sets = self.holds()
        held = _released(sets, list(release))
        pins = set(single.values())
        for h in held:
            if h.released is None:
                pins.update(h.commits)
        keep.update(pins)
        named = named_for_drop(snaps, drop_refs, keep, pins, lambda r: self.resolve(r).commit)
        drop = plan_gc(snaps, policy, keep=keep, drop=named, now=time.time())
        before = self.disk_usage()
        if dry_run:
            kept = len(snaps) - len(drop)
            return GcResult(
                tuple(s.commit for s in drop), kept, before, before, True, tuple(drop), held
            )
        gone = "".join(f"delete {PIN_REFS}{h.name}\n" for h in held if h.released is not None)
        if gone:
            self.run(["update-ref", "--stdin"], input=gone.encode())
        self._drop(drop)
        self._found.clear()
        self._tips.clear()
        self.run(["gc", "--prune=now", "--quiet"])
        self.bump()  # other processes forget what they trusted (objects no ref held are gone)
        after = self.disk_usage()
        if max_bytes is not None:
            rest = pressure_order(snaps, policy, keep=keep, dropped={s.commit for s in drop})
            while after > max_bytes and rest:
                batch = rest[: max(1, len(rest) // 4)]
                rest = rest[len(batch) :]
                self._drop(batch)
                drop.extend(batch)
                self.run(["gc", "--prune=now", "--quiet"])
                after = self.disk_usage()
        kept = len(snaps) - len(drop)
        return GcResult(
            tuple(s.commit for s in drop), kept, before, after, False, tuple(drop), held
        )

    def _drop(self, snaps: Sequence[Snapshot]) -> None:
        if not snaps:
            return
        dropped = {s.commit for s in snaps}
        kept = {oid for c, oid in self.fsmeta.items() if c not in dropped}
        unused = {self.fsmeta[c] for c in dropped if c in self.fsmeta} - kept
        cmds = "".join(f"delete {SNAP_REFS}{c}\n" for c in sorted(dropped))
        cmds += "".join(f"delete {META_REFS}{oid}\n" for oid in sorted(unused))
        self.run(["update-ref", "--stdin"], input=cmds.encode())
        for oid in unused:
            self._blobs.pop(oid, None)
        self.snapshots = None
        self.bump()


def _body(contents: str) -> dict[str, Any] | None:
    """The JSON body of a snapshot's commit message (``None``: not a snapshot of ours)."""
    _title, _, body = contents.partition("\n\n")
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("format") not in (1, SNAPSHOT_FORMAT):
        return None
    return data


def _released(sets: Sequence[Held], release: Sequence[str]) -> tuple[Held, ...]:
    """``sets`` with ``released`` set on those ``gc`` lets go: named in ``release`` (a name, or
    a run id without its ``run-``), or held by a folder that is gone. Raises ``GcError`` for a
    name in ``release`` that holds nothing."""
    names = {h.name for h in sets}
    for r in release:
        if _ref_name(r) not in names and "run-" + _ref_name(r) not in names:
            have = ", ".join(sorted(names)) or "none"
            raise GcError(f"nothing is held under {r!r} (held: {have}); nothing was dropped")
    asked = {_ref_name(r) for r in release} | {"run-" + _ref_name(r) for r in release}
    out = []
    for h in sets:
        why = None
        if h.name in asked:
            why = "released by name"
        elif h.holder is not None and not os.path.isdir(h.holder):
            why = f"its folder {h.holder} is gone"
        out.append(replace(h, released=why))
    return tuple(out)


def _ref_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "pin"


def label_problem(label: object) -> str | None:
    """Why ``label`` cannot name a snapshot (``None``: it can, as can ``None`` itself).

    A label is one line of text: it is the title of the snapshot's commit message, whose first
    blank line ends the title and whose ``\\x00``/``\\x01`` bytes separate the records the
    catalogue reads back, so a control character would lose the snapshot; and it must be UTF-8,
    so text holding undecodable bytes (surrogate escapes, as from a non-UTF-8 ``argv``) is
    refused rather than written mangled."""
    if label is None:
        return None
    if not isinstance(label, str):
        return f"the label must be text, not {type(label).__name__}"
    try:
        label.encode("utf-8")
    except UnicodeEncodeError:
        raw = label.encode("utf-8", "surrogateescape")
        return f"the label {raw!r} is not valid UTF-8 text"
    bad = next((c for c in label if unicodedata.category(c) == "Cc"), None)
    if bad is not None:
        return (
            f"the label {label!r} holds a control character (U+{ord(bad):04X}); "
            "give one line of text"
        )
    return None
