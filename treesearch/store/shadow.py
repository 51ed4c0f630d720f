"""The shadow snapshot store: a private git repository whose work tree is the user's workspace.

Layout of a store folder (outside the workspace)::

    git/            the shadow repository (GIT_DIR); snapshots are commits under refs/treesearch/
    index           the store's own index (GIT_INDEX_FILE): git's stat cache for the workspace
    lock            flock(2) lock serialising mutations between processes; holds the holder's
                    pid, or ``free <stamp>`` once let go cleanly (``ShadowStore.lock``)
    state.json      generation counter, last snapshot, last safety snapshot
    journal.json    empty unless a restore is in flight (recovered on the next open)
    workspace       the workspace path this store belongs to

The store's rooms: this module is the facade (opening, the lock, the workspace hold, and every
public operation as ``with lock, errors(Op)``); ``_scan.py`` scans the workspace into the index and
holds every cache of it; ``_restore.py`` plans, journals, executes, rolls back and recovers restores;
``_catalogue.py`` records and finds snapshots (resolve, log, labels, pins, gc); ``_diffs.py`` diffs
trees; ``_errors.py`` maps git and OS failures to each operation's ``StoreError`` subclass;
``_objects.py`` writes a snapshot's commit without a git process; ``_pack.py`` packs loose objects
and refs after captures; ``_trees.py`` reads objects (loose ones itself, packed ones through
``cat-file``), compares and makes trees without git. Git runs with an environment built from
nothing (``_git.py``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from treesearch.errors import (
    CaptureError,
    DiffError,
    GcError,
    MaterializeError,
    RecoveryError,
    RefError,
    RestoreError,
    StoreError,
    StoreLocationError,
    WorkspaceBusy,
)
from treesearch.store import _init
from treesearch.store._apply import PatchError, apply
from treesearch.store._catalogue import (
    STORE_FORMAT,
    Catalogue,
    GcResult,
    Held,
    TreeEntry,
    label_problem,
)
from treesearch.store._diffs import Diffs
from treesearch.store._errors import errors
from treesearch.store._fs import SafeTree
from treesearch.store._git import GitFailed, GitRunner
from treesearch.store._hold import WorkspaceHold, acquire_hold
from treesearch.store._lock import claim, free_stamp, let_go, reclaim_git_locks, wait_for
from treesearch.store._pack import Packer
from treesearch.store._restore import Restorer, journal_pending
from treesearch.store._retention import GcPolicy
from treesearch.store._scan import Scan, Scanner
from treesearch.store._scan_edit import tell_index
from treesearch.store.values import CaptureStats, Diff, PatchResult, RestoreResult, Snapshot

# splitIndex.sharedIndexExpire = now: a new shared index (written when a fifth of the entries
# changed) removes the old ones at once; only this store's git processes, under its lock, read them.
_CONFIG = """\
[core]
\trepositoryformatversion = 0
\tbare = false
\tfilemode = true
\tsymlinks = true
\tignorecase = false
\tprecomposeunicode = false
\tautocrlf = false
\tsafecrlf = false
\teol = lf
\tfsmonitor = false
\tuntrackedCache = false
\tsplitIndex = true
\tsparseCheckout = false
\tlogAllRefUpdates = false
\tprotectNTFS = false
\tprotectHFS = false
\tcompression = 1
\tlooseCompression = 1
\thooksPath = {hooks}
[splitIndex]
\tsharedIndexExpire = now
[gc]
\tauto = 0
\tautoDetach = false
[maintenance]
\tauto = false
[commit]
\tgpgSign = false
[tag]
\tgpgSign = false
[diff]
\trenames = false
\texternal =
[index]
\tskipHash = false
"""

# Highest-precedence attributes: no eol conversion, no ident, no filters (LFS or otherwise), no
# re-encoding, whatever the workspace's .gitattributes says. Bytes go in and come out unchanged.
_ATTRIBUTES = "* -text !eol -ident -filter -working-tree-encoding\n"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def default_home(environ: Mapping[str, str] | None = None) -> Path:
    """The store home when none is given: ``TREESEARCH_HOME``, else ``XDG_CACHE_HOME/treesearch``,
    else ``~/.cache/treesearch``, the variables read from ``environ``.

    The library reads no environment variable itself: ``cli.py`` passes ``os.environ``; without
    ``environ`` (a library call), the answer is ``~/.cache/treesearch``, whatever the
    environment says, so that a program's store never moves with a variable it did not set.
    """
    env = environ or {}
    home = env.get("TREESEARCH_HOME")
    if home:
        return Path(home).expanduser()
    cache = env.get("XDG_CACHE_HOME")
    base = Path(cache).expanduser() if cache else Path.home() / ".cache"
    return base / "treesearch"


def store_dir_for(workspace: Path, home: Path) -> Path:
    """The store folder of ``workspace``: keyed by hashes of its parent path and its own path."""
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in workspace.name)[:40] or "root"
    return home / f"{_sha(str(workspace.parent))[:12]}-{_sha(str(workspace))[:16]}-{name}"


def _is_within(child: Path, parent: Path) -> bool:
    try:
        child.relative_to(parent)
        return True
    except ValueError:
        return False


class ShadowStore:
    """Snapshots of one workspace, kept in a shadow git repository outside it.

    Use ``ShadowStore.open(workspace)``. Every mutation holds an inter-process lock; a restore is a
    planned write-back (never ``checkout``/``reset``/``clean``) preceded by a safety snapshot.
    """

    def __init__(
        self,
        workspace: Path,
        path: Path,
        *,
        excludes: Sequence[str] = (),
        respect_gitignore: bool = True,
        max_file_bytes: int | None = None,
        lock_timeout: float = 60.0,
        watch: bool = True,
    ) -> None:
        self.workspace = workspace
        self.path = path
        self.git_dir = path / "git"
        self.excludes = tuple(excludes)
        self.respect_gitignore = respect_gitignore
        self.max_file_bytes = max_file_bytes
        self.lock_timeout = lock_timeout
        self._git = GitRunner(self.git_dir, workspace, path / "index")
        self._lock_fd: int | None = None
        self._lock_depth = 0
        self._scanner = Scanner(
            workspace,
            path,
            self._git,
            self._run,
            excludes=self.excludes,
            respect_gitignore=respect_gitignore,
            max_file_bytes=max_file_bytes,
            watch=watch,
        )
        self._catalogue = Catalogue(path, self._git, self._run, self._scanner.trees)
        self._diffs = Diffs(self._git, self._run)
        self._packer = Packer(self.git_dir, self._run)
        self._known_fsmeta: tuple[str | None, object, object] = (None, None, None)
        """(snapshot, modes, empty folders): a walk's answer whose metadata that snapshot has."""
        self._restorer = Restorer(
            workspace,
            path,
            self._git,
            self._run,
            self._scanner,
            self._catalogue,
            lambda scan: self._capture_locked("safety", None, None, scan=scan),
        )
        self._restorer.known_diff = self._diffs.known_raw
        self.recovered: str | None = None
        """What ``recover()`` did on open, if an interrupted restore was found (else ``None``)."""
        self.fixed_dates = False
        """Date new snapshots a millisecond after the previous one, not by the clock, so the
        same operations give the same commit ids (a search sets it: see ``fixed_commit_date``)."""
        self.repaired: str | None = None
        """What ``open`` repaired in a store left damaged (e.g. by a kill while it was created)."""
        self.reclaimed: list[str] = []
        """Workspace holds taken over from processes that died holding them (the evidence)."""

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(
        cls,
        workspace: str | os.PathLike[str],
        home: str | os.PathLike[str] | None = None,
        *,
        excludes: Sequence[str] = (),
        respect_gitignore: bool = True,
        max_file_bytes: int | None = None,
        lock_timeout: float = 60.0,
        watch: bool = True,
        create: bool = True,
        fixed_dates: bool = False,
    ) -> ShadowStore:
        """Open (creating if needed) the store of ``workspace``.

        ``home`` defaults to ``default_home()`` (``~/.cache/treesearch``: the library reads no
        environment variable; the command line honours ``TREESEARCH_HOME``). ``excludes`` are
        gitignore-style patterns never captured (and so never deleted by a restore);
        ``max_file_bytes`` leaves larger files out (reported in ``Snapshot.skipped``).
        ``watch``: follow changes with inotify where that is reliable (local filesystems on
        Linux), so a scan re-lists only changed folders; ``False`` checks every file on every
        scan, as git does without an fsmonitor (the command line passes ``False`` for
        ``TREESEARCH_WATCH=0``).
        An interrupted restore found here is completed or rolled back (see ``recovered``).
        ``create=False``: a store that does not exist yet is an error naming where it was looked
        for (for commands that need existing snapshots). ``fixed_dates``: see ``fixed_dates``.
        """
        ws = Path(os.path.abspath(os.fspath(workspace)))
        try:
            ws = ws.resolve(strict=True)
        except OSError as exc:
            raise StoreLocationError(
                f"workspace {ws} does not exist: create it or fix the path"
            ) from exc
        if not ws.is_dir():
            raise StoreLocationError(f"workspace {ws} is not a folder")
        if ws == Path(ws.anchor):
            raise StoreLocationError(
                "refusing to use the filesystem root / as a workspace: point at a project folder"
            )
        with contextlib.suppress(RuntimeError, KeyError):
            if ws == Path.home().resolve():
                raise StoreLocationError(
                    f"refusing to use the home folder {ws} itself as a workspace: "
                    "point at a project folder inside it"
                )
        home_path = Path(home).expanduser() if home is not None else default_home()
        home_path = Path(os.path.abspath(home_path))
        home_real = home_path.resolve() if home_path.exists() else home_path
        store = store_dir_for(ws, home_real)
        if _is_within(store, ws):
            raise StoreLocationError(
                f"the store {store} would be inside the workspace {ws}; "
                "choose a store home outside it (--home or TREESEARCH_HOME)"
            )
        # <home>/copies holds the workspace copies of `workspace.copy` runs (runs/cleanup.py).
        if _is_within(ws, home_real) and not _is_within(ws.parent.parent, home_real / "copies"):
            raise StoreLocationError(
                f"the workspace {ws} is inside the store home {home_real}; "
                "choose a workspace outside it or another home"
            )
        self = cls(
            ws,
            store,
            excludes=excludes,
            respect_gitignore=respect_gitignore,
            max_file_bytes=max_file_bytes,
            lock_timeout=lock_timeout,
            watch=watch,
        )
        self.fixed_dates = fixed_dates
        if not create and not (store / "workspace").exists():
            raise StoreLocationError(
                f"no store of workspace {ws} in store home {home_real} (looked for {store}): "
                "give the store home the snapshots were taken with (--home or TREESEARCH_HOME)"
            )
        self._init_store()
        _init.sweep_temps(store)
        if journal_pending(store / "journal.json"):
            try:
                with self.hold("recovering an interrupted restore"):
                    self.recovered = self.recover()
            except WorkspaceBusy:
                pass  # a live holder: its restore is in flight, or its next restore recovers
        return self

    def _init_store(self) -> None:
        expected = {
            "git/config": _CONFIG.format(hooks=self.path / "no-hooks"),
            "git/info/attributes": _ATTRIBUTES,
            "format": f"{STORE_FORMAT}\n",
        }
        if _init.marker_problem(self.path, self.workspace, expected) is None:
            return
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            with self.lock():
                self.repaired = _init.create_or_repair(
                    self.path, self.workspace, self._git, expected
                )
        except GitFailed as exc:
            raise StoreError(f"cannot create the store at {self.path}: {exc.stderr}") from exc
        except OSError as exc:
            raise StoreError(f"cannot create the store at {self.path}: {exc}") from exc

    def close(self) -> None:
        """Release resources (the store holds no lock between operations)."""
        self._scanner.close()
        if self._lock_fd is not None and self._lock_depth == 0:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> ShadowStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ locking

    @contextlib.contextmanager
    def lock(self, timeout: float | None = None) -> Iterator[None]:
        """Hold the store's inter-process lock (re-entrant within this object).

        Waits up to ``timeout`` (default: the store's ``lock_timeout``) for another process, then
        raises ``StoreLockedError`` naming the holder. git children inherit the lock, so the lock
        outlives a killed parent until its git processes are gone too.

        Taking it checks for what the last holder may have left, unless that holder let go
        cleanly (``_lock.py``).
        """
        if self._lock_depth:
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
            return
        if self._lock_fd is None:
            with errors(StoreError, f"cannot open the lock of the store {self.path}"):
                self._lock_fd = os.open(
                    self.path / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644
                )
        fd = self._lock_fd
        wait_for(fd, self.lock_timeout if timeout is None else timeout, self.path)
        clean = False
        try:
            left = free_stamp(fd)
            claim(fd, left is not None, self.path)
            self._lock_depth = 1
            self._git.pass_fds = (fd,)
            killed = self._git.killed
            if left is None:
                with errors(StoreError, f"cannot reclaim a stale lock in the store {self.path}"):
                    reclaim_git_locks(self.path, self.git_dir)
            if not self._catalogue.knows(left):
                self._refresh_state()
            yield
            clean = self._git.killed == killed
        finally:
            self._lock_depth = 0
            self._git.pass_fds = ()
            if clean:
                let_go(fd, self._catalogue.stamp)
            fcntl.flock(fd, fcntl.LOCK_UN)

    def hold(self, purpose: str = "", *, command: str | None = None) -> WorkspaceHold:
        """Hold the workspace until the returned hold is released (or its ``with`` block ends).

        While held, a ``hold`` (or a restore, which takes one) of this workspace in another
        process raises ``WorkspaceBusy`` at once, naming the holder. Re-entrant within this
        process. ``purpose`` says what for (shown to whoever is refused); ``command`` defaults to
        this process's command line. A record left by a holder that died is reported in
        ``reclaimed``.
        """
        with errors(StoreError, f"cannot hold the workspace {self.workspace}"):
            held = acquire_hold(self.path, self.workspace, purpose, command)
        if held.reclaimed:
            self.reclaimed.append(held.reclaimed)
        return held

    def _refresh_state(self) -> None:
        if self._catalogue.refresh():
            self._scanner.forget()  # another process (or a crash) changed the store

    def _run(self, args: Sequence[str], **kw: Any) -> bytes:
        """Run git; reclaim a stale ref lock once (we hold the store lock, so its owner is dead)."""
        try:
            return self._git.run(args, **kw)
        except GitFailed as exc:
            stale = _stale_lock_path(exc.stderr, self.path)
            if stale is None or not self._lock_depth:
                raise
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
            return self._git.run(args, **kw)

    # ------------------------------------------------------------------ capture

    def capture(
        self,
        label: str | None = None,
        meta: dict[str, Any] | None = None,
        *,
        if_changed: bool = False,
    ) -> Snapshot:
        """Record the workspace as a snapshot and return it.

        With nothing changed since the previous snapshot (and no new label or meta), the previous
        snapshot is returned and no object is written. ``if_changed``: with nothing changed, the
        previous snapshot is returned whatever its label and meta (``label`` and ``meta`` then
        describe only a new snapshot: a session's captures before each step). Raises
        ``CaptureError`` (naming the path) when a file cannot be read, and (before anything is
        read) when ``label`` is not one line of UTF-8 text; nothing is recorded then.
        A new snapshot may be followed by packing the store's loose objects (``_pack.py``).
        """
        problem = label_problem(label)
        if problem is not None:
            raise CaptureError(f"capture refused: {problem}")
        with self.lock():
            with errors(CaptureError, "capture failed", reading=True):
                last = self._catalogue.state.last
                snap = self._capture_locked("capture", label, meta, if_changed=if_changed)
            if snap.commit != last:
                what = f"snapshot {snap.commit[:12]} was recorded, but packing the store failed"
                with errors(CaptureError, what):
                    self._packer.maybe_pack()
            return snap

    def _capture_locked(
        self,
        kind: str,
        label: str | None,
        meta: dict[str, Any] | None,
        scan: Scan | None = None,
        *,
        if_changed: bool = False,
    ) -> Snapshot:
        t0 = time.perf_counter()
        if scan is None:
            scan = self._scanner.scan()
        w = scan.walk
        last = self._catalogue.get(self._catalogue.state.last)
        meta = dict(meta or {})
        known = self._known_fsmeta
        if (
            last is not None
            and known[0] == last.commit
            and known[1] is w.modes
            and known[2] is w.empty_dirs
        ):
            # The walker gave the very answer `last` was compared with or made from (nothing
            # was listed since): no comparison per file or folder.
            same_fsmeta, empty_dirs = True, last.empty_dirs
        else:
            empty_dirs = tuple(sorted(w.empty_dirs))
            same_fsmeta = (
                last is not None and last.modes == w.modes and last.empty_dirs == empty_dirs
            )
            if same_fsmeta and last is not None:
                self._known_fsmeta = (last.commit, w.modes, w.empty_dirs)
        skipped = tuple(sorted(w.skipped, key=lambda s: s.path))
        stats = CaptureStats(len(w.files), scan.hashed, 0.0)
        if (
            last is not None
            and last.tree == scan.tree
            and same_fsmeta
            and (
                if_changed
                or ((label is None or label == last.label) and (not meta or meta == last.meta))
            )
        ):
            return replace(
                last,
                changed=(),
                skipped=skipped,
                stats=replace(stats, seconds=time.perf_counter() - t0),
            )
        # A safety snapshot's list of changes is never read: spare the diff.
        changed: list[str] = []
        if last is None:
            changed = sorted(self._scanner.indexed)
        elif kind != "safety":
            changed = self._diffs.changed_since(
                last,
                scan.tree,
                w.modes,
                empty_dirs,
                self._scanner.indexed,
                counts=scan.hashed <= 256,
                note_oid=self._scanner.note_oid,
                raw=scan.raw,
            )
        snap = self._catalogue.record(
            kind,
            scan.tree,
            label=label,
            meta=meta,
            modes=w.modes,
            empty_dirs=empty_dirs,
            skipped=skipped,
            changed=changed,
            stats=stats,
            fixed_dates=self.fixed_dates,
        )
        self._known_fsmeta = (snap.commit, w.modes, w.empty_dirs)
        return replace(snap, stats=replace(stats, seconds=time.perf_counter() - t0))

    # ------------------------------------------------------------------ snapshots & refs

    def log(self, *, include_safety: bool = True, limit: int | None = None) -> list[Snapshot]:
        """Snapshots, newest first."""
        with self.lock(), errors(RefError, "cannot list the snapshots"):
            snaps = self._catalogue.newest_first()
        if not include_safety:
            snaps = [s for s in snaps if s.kind != "safety"]
        return snaps[:limit] if limit is not None else snaps

    def resolve(self, ref: str) -> Snapshot:
        """The snapshot named by a tree hash, a commit, a unique prefix of either, or a label.

        A tree recorded by several snapshots resolves to the newest of them.
        """
        with self.lock(), errors(RefError, f"cannot resolve {ref!r}"):
            return self._catalogue.resolve(ref)

    # ------------------------------------------------------------------ restore

    def restore(self, ref: str) -> RestoreResult:
        """Make the workspace equal to snapshot ``ref``, touching only what differs.

        A safety snapshot of the workspace is taken first (``undo`` returns to it). Files the
        store does not capture (ignored, excluded, oversize) are never deleted or overwritten:
        a restore that would have to is refused before anything is written. A restore that fails
        part-way is rolled back to the safety snapshot; one killed part-way is completed or
        rolled back by the next ``open``.
        """
        with self.hold(f"restore {ref}"), self.lock(), errors(RestoreError, "restore failed"):
            return self._restorer.restore(self._catalogue.resolve(ref))

    def undo(self) -> RestoreResult:
        """Restore the safety snapshot taken by the last restore."""
        return self.restore("undo")

    def recover(self) -> str | None:
        """Finish (or else roll back) a restore that was interrupted; ``None`` if there was none."""
        with self.lock(), errors(RecoveryError, "recovering an interrupted restore failed"):
            return self._restorer.recover()

    # ------------------------------------------------------------------ diff

    def diff(self, a: str, b: str | None = None, *, max_patch_bytes: int = 1_000_000) -> Diff:
        """Changes from ``a`` to ``b`` (``None``: the workspace as it is now, without recording)."""
        with self.lock(), errors(DiffError, "diff failed", reading=True):
            ta = self._catalogue.tree_of(a)
            tb = self._scanner.scan().tree if b is None else self._catalogue.tree_of(b)
            return self._diffs.between(ta, tb, max_patch_bytes)

    def changes(self, a: str, b: str) -> dict[str, str]:
        """The status letter (``A``, ``M``, ``D``, ``T``) of each path that differs between
        snapshots ``a`` and ``b``: ``diff`` without line counts, so no file content is read."""
        with self.lock(), errors(DiffError, "diff failed", reading=True):
            tree_of = self._catalogue.tree_of
            return self._diffs.statuses(tree_of(a), tree_of(b))

    def diffs(self, pairs: Sequence[tuple[str, str]]) -> list[Diff]:
        """File-level changes (no patch text) for several pairs of snapshots, with one git
        process: what a search needs per node (parent -> child, root -> child)."""
        with self.lock(), errors(DiffError, "diff failed"):
            tree_of = self._catalogue.tree_of
            return self._diffs.many([(tree_of(a), tree_of(b)) for a, b in pairs])

    # ------------------------------------------------------------------ patch

    def apply_patch(self, patch: str, *, strip: int = 1) -> PatchResult:
        """Apply the unified diff ``patch`` to the workspace with ``git apply -p<strip>``, under
        this store's settings (no line-ending conversion, no filter: the bytes of the patch).

        All or nothing: ``PatchError`` (git's message in it) when the patch is malformed or a
        hunk does not apply, and no file is written. Paths with ``..`` or ``.git``, and paths
        beyond a symlink, are refused; a file patched in place keeps its permission bits.
        Nothing is recorded: a capture afterwards sees the change.
        """
        with self.lock(), errors(PatchError, "cannot apply the patch"):
            return apply(self._git, self.workspace, patch, strip=strip)

    # ------------------------------------------------------------------ show / materialize

    def files(self, ref: str) -> list[TreeEntry]:
        """The files of snapshot ``ref`` with mode, size and restored permission."""
        with self.lock(), errors(RefError, "cannot list the snapshot"):
            return self._catalogue.files(self._catalogue.resolve(ref))

    def materialize(self, ref: str, dest: str | os.PathLike[str]) -> Snapshot:
        """Write snapshot ``ref`` into ``dest``, a missing or empty folder outside the workspace."""
        target = Path(os.path.abspath(os.fspath(dest)))
        with self.lock(), errors(MaterializeError, f"cannot materialize into {target}"):
            snap = self._catalogue.resolve(ref)
            self._materialize(snap, target)
            return snap

    def _materialize(self, snap: Snapshot, target: Path) -> None:
        real = target.resolve()
        if _is_within(real, self.workspace) or _is_within(real, self.path):
            raise MaterializeError(
                f"{target} is inside the workspace or the store; materialize elsewhere"
            )
        if (target.exists() or target.is_symlink()) and (
            target.is_symlink() or not target.is_dir() or any(target.iterdir())
        ):
            raise MaterializeError(f"{target} is not an empty folder; give a new or empty folder")
        target.mkdir(parents=True, exist_ok=True)
        tmp_index = self.path / f"index.materialize.{os.getpid()}"
        env = self._git.with_env(GIT_WORK_TREE=str(target), GIT_INDEX_FILE=str(tmp_index))
        try:
            self._run(["read-tree", snap.tree], env=env, cwd=target)
            self._run(["checkout-index", "-a", "-f"], env=env, cwd=target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp_index.unlink()
        with SafeTree(str(target)) as tree:
            for path, perm in snap.modes.items():
                tree.chmod(path, perm)
            for d in snap.empty_dirs:
                tree.mkdirs(d)

    # ------------------------------------------------------------------ pins & gc

    def pin(self, ref: str, name: str) -> Snapshot:
        """Keep snapshot ``ref`` through every ``gc`` under ``name`` (e.g. a run id)."""
        with self.lock(), errors(RefError, f"cannot pin {ref!r} as {name!r}"):
            return self._catalogue.pin(ref, name)

    def unpin(self, name: str) -> None:
        """Let the snapshot pinned under ``name`` go (``gc`` may drop it then)."""
        with self.lock(), errors(RefError, f"cannot unpin {name!r}"):
            self._catalogue.unpin(name)

    def keep(self, name: str, refs: Iterable[str], *, holder: Path | str | None = None) -> int:
        """Keep every snapshot or commit in ``refs`` through every ``gc`` while the folder
        ``holder`` exists (``None``: until ``gc(release=[name])`` or ``unpin(name)``), under
        ``name`` (a run: ``run-<id>``; a later call adds to what the name holds, and names the
        holder).

        ``refs``: snapshot references, or commit ids of this object folder that are no snapshot
        of this store (a search worker's step snapshots): those are kept reachable, objects and
        all. Ids not found are skipped. Returns how many were added."""
        holder_s = None if holder is None else os.path.abspath(holder)
        with self.lock(), errors(RefError, f"cannot keep snapshots as {name!r}"):
            return self._catalogue.keep(name, refs, holder_s)

    def held(self) -> list[Held]:
        """The held sets (``keep``), with what each holds."""
        with self.lock(), errors(StoreError, "cannot list what the store holds"):
            return self._catalogue.holds()[1]

    def disk_usage(self) -> int:
        """Bytes the store's objects take on disk."""
        with errors(StoreError, "cannot measure the store"):
            return self._catalogue.disk_usage()

    def gc(
        self,
        *,
        keep_last: int | None = None,
        max_age: float | None = None,
        max_bytes: int | None = None,
        protect: Iterable[str] = (),
        keep_safety: int = 3,
        safety_max_age: float | None = None,
        labelled: bool = False,
        drop: Iterable[str] = (),
        dry_run: bool = False,
        release: Iterable[str] = (),
    ) -> GcResult:
        """Drop old snapshots and their unreachable objects (see ``_retention`` for the rules).

        Unlabelled captures: keep the newest ``keep_last`` (safety snapshots are not counted),
        drop those older than ``max_age`` seconds. Labelled captures are dropped only when named
        in ``drop`` (a label drops every snapshot with it) or when ``labelled`` puts them under
        the capture rules. Safety snapshots: dropped when older than ``safety_max_age``, never
        the newest ``keep_safety``. Then, with ``max_bytes``, the oldest droppable snapshots go
        until the objects fit. Never dropped: pinned snapshots, those a held set holds (a run's
        nodes, ``keep``) while its holder folder exists and ``release`` does not name it, those
        named in ``protect``, the newest snapshot, the last snapshot and the one ``undo``
        returns to. A held set whose folder is gone (or named in ``release``) is let go:
        ``GcResult.held`` says which (``dry_run``: would be).
        """
        policy = GcPolicy(keep_last, max_age, keep_safety, safety_max_age, labelled)
        held = contextlib.nullcontext() if dry_run else self.hold("gc")
        with held, self.lock(), errors(GcError, "gc failed"):
            if not dry_run:
                # The scan's tree and waiting index entries (``_scan_edit.py``) into the index.
                tell_index(self._scanner)
            return self._catalogue.gc(policy, max_bytes, protect, drop, dry_run, release)

    def fsck(self) -> str:
        """Run ``git fsck`` on the store; raises ``StoreError`` if it finds corruption."""
        with self.lock(), errors(StoreError, f"the store {self.path} is damaged"):
            out = self._git.run(["fsck", "--no-progress", "--no-dangling"])
            return out.decode("utf-8", "replace")


# ---------------------------------------------------------------------- helpers


def _stale_lock_path(stderr: str, store: Path) -> Path | None:
    marker = "Unable to create '"
    at = stderr.find(marker)
    if at < 0 or "File exists" not in stderr:
        return None
    end = stderr.find("'", at + len(marker))
    p = Path(stderr[at + len(marker) : end])
    return p if p.suffix == ".lock" and _is_within(p, store) else None


__all__ = ["GcResult", "Held", "ShadowStore", "TreeEntry", "default_home", "store_dir_for"]
