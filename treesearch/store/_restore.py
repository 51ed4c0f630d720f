"""Restore: planning, the journal, execution, rollback and recovery of an interrupted restore.

A restore is a planned write-back, never ``checkout``/``reset``/``clean``: the plan is the
difference between the workspace's tree (its safety snapshot) and the target's, checked against
files the store does not hold before anything is written; a journal names the restore while it is
in flight, so that the next ``open`` completes it or rolls it back after a kill. The journal file
stays between restores, empty when no restore is in flight (``journal_pending``): writing into it
and emptying it costs no new file per restore.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import stat
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from treesearch.errors import RecoveryError, RestoreError
from treesearch.store._catalogue import Catalogue
from treesearch.store._errors import describe, one_line
from treesearch.store._fs import (
    SafeTree,
    UnsafePathError,
    fill_empty,
    is_empty,
    kept_name,
    make_empty,
)
from treesearch.store._git import GitFailed, GitRunner
from treesearch.store._restore_check import checked_scan
from treesearch.store._scan import Scan, Scanner
from treesearch.store._trees import AHEAD_MAX, ObjectReader, Trees
from treesearch.store._walk import MODE, SIZE, WalkResult, default_mode
from treesearch.store.values import RestoreResult, Snapshot
from treesearch.types import TreeHash

Run = Callable[..., bytes]
_DEFER_INDEX = 64
"""A restore that changes at most this many index entries leaves them to the next
``update-index`` of a scan (on its command line); more go to the index at once."""


@dataclass
class Plan:
    deletes: list[str] = field(default_factory=list)
    writes: list[tuple[str, int, str, int]] = field(default_factory=list)
    """(path, git mode, blob id, permission bits)"""
    chmods: list[tuple[str, int]] = field(default_factory=list)
    index_modes: list[tuple[str, int, str]] = field(default_factory=list)
    """Exec-bit changes with unchanged content: (path, git mode, blob id) for the index."""
    prune: list[str] = field(default_factory=list)
    mkdirs: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.deletes or self.writes or self.chmods or self.prune or self.mkdirs)


@dataclass
class Done:
    """What a restore's ``execute`` did so far: what its rollback has to undo."""

    touched: set[str] = field(default_factory=set)
    """Every path it changed (once it had): a path not in it is as it was."""
    kept: dict[str, str] = field(default_factory=dict)
    """Hard-linked files it wrote over or deleted, kept aside: path -> name in the root
    folder (``SafeTree.keep``). Putting one back costs no room; a copy of it would."""


class Restorer:
    """Restores of one workspace from one store."""

    def __init__(
        self,
        workspace: Path,
        store: Path,
        git: GitRunner,
        run: Run,
        scanner: Scanner,
        catalogue: Catalogue,
        safety: Callable[[Scan], Snapshot],
    ) -> None:
        self.workspace = workspace
        self.store = store
        self.journal = store / "journal.json"
        self.git = git
        self.run = run
        self.scanner = scanner
        self.catalogue = catalogue
        self.safety = safety
        """Records a safety snapshot of a scan."""
        self.trees: Trees = scanner.trees
        """Parsed trees and the store's one object reader (``_trees.py``): a restore compares
        the trees and reads the contents with no git process of its own."""
        self.known_diff: Callable[[TreeHash, TreeHash], list[bytes] | None] = lambda a, b: None
        """The raw ``diff-tree`` records of two trees if the store has them already (``Diffs``):
        a restore to a tree the store just diffed with the workspace's runs no ``diff-tree``."""

    def restore(self, target: Snapshot) -> RestoreResult:
        """Make the workspace equal to ``target`` (the caller holds the lock and the workspace)."""
        t0 = time.perf_counter()
        if journal_pending(self.journal):
            self.recover()
        try:
            return self._restore(target, t0)
        finally:
            # The safety snapshot's record waits for the restore's own (one write of the state
            # file): a restore that fails before that writes it here.
            self.catalogue.defer_save = False
            with contextlib.suppress(OSError):
                self.catalogue.save_pending()

    def _restore(self, target: Snapshot, t0: float) -> RestoreResult:
        token = secrets.token_hex(4)
        try:
            # Every file the plan changes is checked against its stat data on disk: the safety
            # snapshot holds it as it is, even after a change no event reports.
            # The safety scan's new objects and its snapshot's commit go into one pack.
            with self.trees.one_pack(self.scanner.forget_index):
                scan, plan = checked_scan(self.scanner, lambda s: self.plan(s, target))
                # Its commit and ref are written now; the state file (which names it the last
                # snapshot) waits for the end of the restore, or its journal names it.
                self.catalogue.defer_save = True
                safety = self.safety(scan)
                self.catalogue.defer_save = False
            if not plan.empty:
                self._write_journal(token, target.commit, safety.commit, plan)
        except (GitFailed, OSError) as exc:
            raise RestoreError(
                f"restore to {target.commit[:12]} failed before anything was changed "
                f"({one_line(exc)}); the workspace is as it was"
            ) from exc
        warnings = []
        pruned: list[str] = []
        if plan.empty:
            self.catalogue.bump(last=target.commit, undo=safety.commit)
        else:
            pruned, warning = self._carry_out(plan, token, safety, target, scan.walk)
            warnings = [warning] if warning else []
        return RestoreResult(
            target=target,
            safety=safety,
            written=tuple(p for p, *_ in plan.writes),
            deleted=tuple(plan.deletes),
            pruned=tuple(pruned),
            created_dirs=tuple(plan.mkdirs),
            chmodded=tuple(p for p, _ in plan.chmods),
            seconds=time.perf_counter() - t0,
            warnings=tuple(warnings),
        )

    def _carry_out(
        self, plan: Plan, token: str, safety: Snapshot, target: Snapshot, before: WalkResult
    ) -> tuple[list[str], str | None]:
        """Execute a journalled plan; roll back on failure (``before``: the walk of the safety
        scan). Returns the folders pruned and a warning (the index could not be updated)."""
        done = Done()
        try:
            pruned = self.execute(plan, token, done=done)
        except Exception as exc:
            reason = describe(exc)
            try:
                self._rollback(token, safety, plan, target, done, before)
            except Exception as exc2:  # pragma: no cover - both directions failed
                raise RestoreError(
                    f"restore to {target.commit[:12]} failed ({reason}) and rolling back "
                    f"failed too ({describe(exc2)}); run `treesearch snap restore "
                    f"{safety.commit[:12]}` to return to the state before"
                ) from exc
            raise RestoreError(
                f"restore to {target.commit[:12]} failed: {reason}; the workspace was "
                "rolled back to how it was"
            ) from exc
        # Every file is written: the restore is complete whatever happens next. The index
        # is only git's stat cache; if it cannot be updated (a full disk), the next scan
        # finds the rewritten files by their changed stat data.
        warning = self._sync_index_or_forget(plan, target.tree, pruned)
        try:
            if done.kept:
                with SafeTree(str(self.workspace)) as tree:
                    tree.drop_kept(token, done.kept.values())
            self.catalogue.bump(last=target.commit, undo=safety.commit)
            make_empty(self.journal)
        except OSError as exc:
            raise RestoreError(
                f"restore to {target.commit[:12]} completed: the workspace is at it, but the "
                f"store could not record that ({describe(exc)}); the next treesearch command "
                f"records it (`treesearch snap undo` then returns to {safety.commit[:12]})"
            ) from exc
        return pruned, warning

    # ------------------------------------------------------------------ planning

    def plan(self, scan: Scan, target: Snapshot, only: Collection[str] | None = None) -> Plan:
        """What makes the workspace (its ``scan``) equal to ``target``; ``only``: the content
        changes of these paths alone (the others are known to be as ``target`` has them)."""
        plan = Plan()
        current = scan.walk
        if scan.tree != target.tree:
            self._plan_content(plan, scan.tree, target)
        if only is not None:
            plan.deletes = [p for p in plan.deletes if p in only]
            plan.writes = [w for w in plan.writes if w[0] in only]
            plan.chmods = [c for c in plan.chmods if c[0] in only]
            plan.index_modes = [m for m in plan.index_modes if m[0] in only]
        writing = {p for p, *_ in plan.writes}
        touched = writing | set(plan.deletes) | {p for p, _ in plan.chmods}
        # Permission bits: only files with a non-default mode on either side can differ.
        for path in set(current.modes) | set(target.modes):
            key = current.files.get(path)
            if key is None or path in touched or stat.S_ISLNK(key[MODE]):
                continue
            want = target.modes.get(path, default_mode(key[MODE]))
            if stat.S_IMODE(key[MODE]) != want:
                plan.chmods.append((path, want))
        # Folders: try to prune the parents of deleted files (rmdir refuses non-empty ones) and
        # folders empty now but not in the target, with their parents (``new/`` holding only an
        # empty ``new/inner/`` is left empty once that goes); re-create the target's empty folders.
        keep = _parent_dirs(writing) | _parent_dirs(target.empty_dirs) | set(target.empty_dirs)
        candidates = _parent_dirs([*plan.deletes, *current.empty_dirs]) | set(current.empty_dirs)
        plan.prune = sorted(
            (d for d in candidates if d not in keep), key=lambda d: (-d.count("/"), d)
        )
        walked = current.dir_mtimes
        plan.mkdirs = sorted(d for d in target.empty_dirs if d not in walked or d in plan.prune)
        self._check_conflicts(plan, current)
        return plan

    def _plan_content(self, plan: Plan, tree: TreeHash, target: Snapshot) -> None:
        """The files whose content, type or exec bit differ between ``tree`` and ``target``."""
        fields = self.known_diff(tree, target.tree)
        if fields is None:
            fields = self.trees.diff(tree, target.tree)
        if fields is None:
            out = self.run(["diff-tree", "-r", "-z", "--no-renames", tree, target.tree])
            fields = out.split(b"\0")
        i = 0
        while i + 1 < len(fields):
            head = fields[i]
            if not head.startswith(b":"):
                i += 1
                continue
            path = os.fsdecode(fields[i + 1])
            i += 2
            _old_mode, new_mode, old_oid, new_oid, status = head[1:].decode().split(" ")
            if status == "D":
                plan.deletes.append(path)
                continue
            mode = int(new_mode, 8)
            if status == "M" and old_oid == new_oid and mode != 0o120000:
                plan.chmods.append((path, target.modes.get(path, default_mode(mode))))
                plan.index_modes.append((path, mode, new_oid))
                continue
            perm = 0o777 if mode == 0o120000 else target.modes.get(path, default_mode(mode))
            plan.writes.append((path, mode, new_oid, perm))

    def _check_conflicts(self, plan: Plan, current: WalkResult) -> None:
        """Refuse, before writing anything, a restore that would destroy uncaptured files."""
        deleting = set(plan.deletes)
        problems: list[str] = []
        verdict: dict[str, bool] = {}  # folder -> "everything below is fresh" (no check needed)
        with SafeTree(str(self.workspace)) as tree:
            for path, *_ in plan.writes:
                if _below_fresh(tree, path, deleting, verdict, problems) or path in current.files:
                    continue
                st = tree.lstat(path)
                if st is not None and not stat.S_ISDIR(st.st_mode):
                    problems.append(
                        f"{path} (exists but is not captured: ignored, excluded, oversize or special)"
                    )
        if problems:
            shown = "; ".join(problems[:5])
            if len(problems) > 5:
                shown += f"; and {len(problems) - 5} more"
            raise RestoreError(
                "restore refused, nothing was changed: it would overwrite files the store does "
                f"not hold: {shown}. Move them away first"
            )

    def _write_journal(self, token: str, target: str, safety: str, plan: Plan) -> None:
        data = {
            "token": token,
            "target": target,
            "safety": safety,
            "writes": [p for p, *_ in plan.writes],
        }
        # Not durable: the journal guards against the process dying (SIGKILL, OOM), which
        # leaves the page cache intact; like git's own objects, it does not claim power-loss
        # durability. Written in place into the empty journal file, not renamed into place: a
        # kill while it is written leaves a part of it, which is never JSON (the object's
        # closing brace comes last), and ``recover`` discards it (nothing in the workspace was
        # written yet).
        if not fill_empty(self.journal, json.dumps(data).encode()):
            raise FileExistsError(errno.EEXIST, "a journal is in the way", str(self.journal))

    # ------------------------------------------------------------------ execution

    def execute(
        self, plan: Plan, token: str, root: Path | None = None, done: Done | None = None
    ) -> list[str]:
        """Carry out ``plan``; returns the folders actually pruned. ``done`` (a restore's, in
        the workspace) records what it did, for a rollback."""
        blobs = self.trees.objects  # (the store's: stays open)
        with SafeTree(str(root or self.workspace)) as tree:
            put = _Put(tree, blobs, token, root is None, done)
            for path in plan.deletes:
                if not put.keep(path, move=True):
                    tree.unlink(path)
                put.touch(path)
            pruned = [d for d in plan.prune if tree.rmdir(d)]
            # An entry that finds no room even so is written again after the others.
            deferred: list[tuple[str, int, str, int]] = []
            for i, (path, mode, oid, perm) in enumerate(plan.writes):
                if i % AHEAD_MAX == 0:  # (blobs not read in the process: one cat-file round trip)
                    blobs.ask_ahead([w[2] for w in plan.writes[i : i + AHEAD_MAX]])
                if mode not in (0o100644, 0o100755, 0o120000):
                    raise RestoreError(f"{path}: unsupported entry mode {mode:o} in the snapshot")
                if put.making_room(path, mode, oid, perm) is not None:
                    deferred.append((path, mode, oid, perm))
            for write in deferred:
                full = put.making_room(*write)
                if full is not None:
                    raise full
            for path, perm in plan.chmods:
                tree.chmod(path, perm)
                put.touch(path)
            for d in plan.mkdirs:
                tree.mkdirs(d)
        return pruned

    def _sync_index(self, plan: Plan, tree: TreeHash, pruned: list[str]) -> None:
        """Tell the index what the restore changed (it now holds ``tree``; ``pruned``: the
        folders it removed).

        One ``update-index --index-info`` with the blob ids the plan already knows: nothing is
        hashed again. The entries carry no stat data, which is fine: our own stat cache decides
        what git is asked about, and a later change of these files is fed to git as usual.
        """
        records = [
            f"0 {'0' * 40}\t".encode() + os.fsencode(p) + b"\0" for p in sorted(plan.deletes)
        ]
        records += [
            f"{mode:o} {oid}\t".encode() + os.fsencode(p) + b"\0"
            for p, mode, oid, *_ in sorted(plan.writes) + sorted(plan.index_modes)
        ]

        def update_index() -> None:
            if records:
                self.run(["update-index", "-z", "--index-info"], input=b"".join(records))

        # A few entries go to git with the next capture's update-index: one git less. Only in
        # a process whose scans follow the last walk (the watcher's events, or the recheck
        # without one: a search, a session, whose next capture is near); a one-shot command
        # leaves the index up to date.
        entries: dict[str, tuple[int, str] | None] | None = None
        if len(records) <= _DEFER_INDEX and self.scanner.incremental:
            entries = dict.fromkeys(plan.deletes)
            for p, mode, oid, *_ in plan.writes + plan.index_modes:
                entries[p] = (mode, oid)
        self.scanner.restored(
            [(p, oid) for p, _mode, oid, _perm in plan.writes],
            {p for p, *_ in plan.writes} | {p for p, _ in plan.chmods},
            plan.deletes,
            [*pruned, *plan.mkdirs],  # (a folder it could not prune is as it was)
            tree,
            update_index,
            entries,
        )

    def _sync_index_or_forget(self, plan: Plan, tree: TreeHash, pruned: list[str]) -> str | None:
        """``_sync_index`` after the files are written; a failure (a full disk) only costs the
        cache: it is forgotten, and the warning says so."""
        try:
            self._sync_index(plan, tree, pruned)
            return None
        except (GitFailed, OSError) as exc:
            self.scanner.forget_index()
            return (
                f"the store's index could not be updated ({one_line(exc)}); the next "
                "capture checks the restored files again"
            )

    # ------------------------------------------------------------------ rollback & recovery

    def _rollback(
        self,
        token: str,
        safety: Snapshot,
        plan: Plan,
        target: Snapshot,
        done: Done,
        before: WalkResult,
    ) -> None:
        """Put back what a failed restore changed (``done``) as its safety snapshot holds it
        (``before``: the walk of its scan).

        The rollback needs no room that the files it puts back need (a restore that ran out of
        disk gets here with none left): it writes nothing to the store before they are back;
        it rewrites only what the restore changed (a file it never reached may be hard-linked:
        a copy would take its size again), and a hard-linked file it did change is the very
        file, kept aside, renamed back; it puts back first what shrinks, last what grows; and
        a write that still finds no room removes what is there first (``execute``)."""
        # Sizes as the safety scan saw them: before the walk below updates what it shares.
        sizes = {p: before.files[p][SIZE] for p in done.touched if p in before.files}
        self._cleanup_temps(token, [p for p, *_ in plan.writes])
        with SafeTree(str(self.workspace)) as tree:
            back_as_was = {
                p for p, k in done.kept.items() if p in done.touched and tree.put_back(k, p)
            }
            tree.drop_kept(token, done.kept.values())
        # No scan: it would write the index and hash files into the store, taking the very
        # room a restore that ran out of disk freed (a full disk then failed the rollback too).
        # Every path the restore changed was in its plan: going back from the target's tree
        # rewrites each of them to its safety state, whether its write was done or not.
        self.scanner.forget_index()
        scan = Scan(target.tree, self.scanner.walk(verify=True), 0, 0.0)
        back = self.plan(scan, safety, only=done.touched - back_as_was)
        now = scan.walk.files

        def growth(write: tuple[str, int, str, int]) -> int:
            key = now.get(write[0])
            return sizes.get(write[0], 0) - (key[SIZE] if key is not None else 0)

        back.writes.sort(key=growth)
        self._sync_index_or_forget(back, safety.tree, self.execute(back, token))
        make_empty(self.journal)

    def _cleanup_temps(self, token: str, paths: Iterable[str]) -> None:
        with SafeTree(str(self.workspace)) as tree:
            for p in paths:
                tree.remove_temp(p, token)

    def recover(self) -> str | None:
        """Finish (or else roll back) a restore that was interrupted; ``None`` if there was none."""
        journal = self.journal
        try:
            text = journal.read_text(encoding="utf-8", errors="surrogateescape")
        except FileNotFoundError:
            return None
        if not text:
            return None  # the journal between restores
        try:
            data = json.loads(text)
        except ValueError:
            make_empty(journal)  # torn while written: the restore never started writing
            return "discarded an unfinished journal of a restore that had not started"
        token, target_id, safety_id = data["token"], data["target"], data["safety"]
        self._cleanup_temps(token, data.get("writes", ()))
        with SafeTree(str(self.workspace)) as tree:
            tree.drop_kept(token)  # (hard-linked files kept aside: their other links hold them)
        snaps = self.catalogue.load()
        self.scanner.forget_index()
        for what, commit in (("completed", target_id), ("rolled back", safety_id)):
            snap = snaps.get(commit)
            if snap is not None and self._redo(snap, token):
                make_empty(journal)
                self.catalogue.bump(last=commit, undo=safety_id)
                return f"{what} an interrupted restore (to {commit[:12]})"
        raise RecoveryError(
            f"an interrupted restore in {self.store} could be neither completed nor rolled back; "
            f"the journal is kept at {journal}. Move files that block it and run `treesearch snap "
            "log` again"
        )

    def _redo(self, snap: Snapshot, token: str) -> bool:
        """Bring the workspace to ``snap`` after a kill; False (and nothing left behind but the
        files already written) when that fails."""
        plan = Plan()
        try:
            plan = self.plan(self.scanner.scan(verify=True), snap)
            self._sync_index_or_forget(plan, snap.tree, self.execute(plan, token))
            return True
        except (RestoreError, OSError, GitFailed):
            self._cleanup_temps(token, [p for p, *_ in plan.writes])
            self.scanner.forget_index()
            return False


class _Put:
    """The writes of one ``execute``: each entry atomically (a failed write changes nothing).
    In the workspace (``journalled``: a journal is on record) a full disk is returned, not
    raised, and ``making_room`` may remove the old entry first."""

    def __init__(
        self,
        tree: SafeTree,
        blobs: ObjectReader,
        token: str,
        journalled: bool,
        done: Done | None,
    ) -> None:
        self.tree = tree
        self.blobs = blobs
        self.token = token
        self.journalled = journalled
        self.done = done

    def touch(self, path: str) -> None:
        if self.done is not None:
            self.done.touched.add(path)

    def keep(self, path: str, *, move: bool = False) -> bool:
        """Before a restore writes over or (``move``) deletes ``path``: keep a file of more than
        one link aside (``Done.kept``). False when nothing was kept (and ``path`` is as it
        was): another file, or the filesystem refused."""
        done = self.done
        if done is None or path in done.kept:
            return False
        st = self.tree.lstat(path)
        if st is None or not stat.S_ISREG(st.st_mode) or st.st_nlink < 2:
            return False
        name = kept_name(self.token, len(done.kept))
        if not self.tree.keep(path, name, move=move):
            return False
        done.kept[path] = name
        return True

    def __call__(self, path: str, mode: int, oid: str, perm: int) -> OSError | None:
        blobs = self.blobs
        try:
            self.keep(path)
            if mode == 0o120000:
                self.tree.write_symlink(path, blobs.read(oid), self.token)
            else:

                def fill(fd: int) -> None:
                    with os.fdopen(os.dup(fd), "wb", buffering=1 << 20) as fh:
                        blobs.read_to(oid, fh)

                self.tree.write_file(path, fill, perm, self.token)
        except OSError as exc:
            if not self.journalled or exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            return exc
        self.touch(path)
        return None

    def making_room(self, path: str, mode: int, oid: str, perm: int) -> OSError | None:
        """Write; on a full disk, remove the old entry and write again (the safety snapshot
        holds it, and recovery redoes the write after a kill); the error if still full."""
        full = self(path, mode, oid, perm)
        if full is None or not self.journalled or not self.tree.make_room(path):
            return full
        self.touch(path)
        return self(path, mode, oid, perm)


def _below_fresh(
    tree: SafeTree, path: str, deleting: set[str], verdict: dict[str, bool], problems: list[str]
) -> bool:
    """Is ``path`` below a folder that is new (or deleted by the plan), so nothing can be in its
    way? Records a file or symlink standing where the target needs a folder in ``problems``."""
    parts = path.split("/")
    for i in range(1, len(parts)):
        d = "/".join(parts[:i])
        if d not in verdict:
            if d in deleting:
                verdict[d] = True
            else:
                try:
                    st = tree.lstat(d)
                except UnsafePathError:
                    st = None  # reported at the first offending component
                if st is not None and not stat.S_ISDIR(st.st_mode):
                    problems.append(
                        f"{d} (the target needs a folder here; the file or symlink "
                        "in the way is not captured)"
                    )
                    verdict[d] = True
                else:
                    verdict[d] = st is None
        if verdict[d]:
            return True
    return False


def _parent_dirs(paths: Iterable[str]) -> set[str]:
    out: set[str] = set()
    for p in paths:
        parts = p.split("/")
        for i in range(1, len(parts)):
            out.add("/".join(parts[:i]))
    return out


def journal_pending(path: Path) -> bool:
    """Whether the journal at ``path`` names a restore in flight (between restores it is empty,
    or missing in a store no restore ever changed)."""
    return not is_empty(path)
