"""The shadow snapshot store: a private git repository whose work tree is the user's workspace.

Layout of a store folder (outside the workspace)::

    git/            the shadow repository (GIT_DIR); snapshots are commits under refs/treesearch/
    index           the store's own index (GIT_INDEX_FILE): git's stat cache for the workspace
    lock            flock(2) lock serialising mutations between processes
    state.json      generation counter, last snapshot, last safety snapshot
    journal.json    present only while a restore is in flight (recovered on the next open)
    workspace       the workspace path this store belongs to

Git runs with an environment built from nothing (see ``_git.py``); its exceptions are mapped to one
error class per operation here and nowhere else.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import stat
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
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
    StoreLockedError,
    WorkspaceBusy,
)
from treesearch.store import _init
from treesearch.store._fs import SafeTree, UnsafePathError, atomic_write
from treesearch.store._git import (
    BlobReader,
    GitFailed,
    GitRunner,
    blob_oid,
    date_env,
    fixed_commit_date,
    git_executable,
    isolated_env,
)
from treesearch.store._hold import WorkspaceHold, acquire_hold
from treesearch.store._retention import GcPolicy, named_for_drop, plan_gc, pressure_order
from treesearch.store._stat import (
    compare_with_index,
    git_may_miss,
    index_key,
    parse_index,
    racy_key,
    read_scan_time,
    write_scan_time,
)
from treesearch.store._stat import is_racy as _is_racy
from treesearch.store._walk import (
    MODE,
    SIZE,
    IgnoreRules,
    NeedFullWalk,
    Walker,
    WalkResult,
    default_mode,
)
from treesearch.store._watch import Inotify
from treesearch.store.values import (
    CaptureStats,
    Diff,
    FileChange,
    RestoreResult,
    Skipped,
    Snapshot,
)
from treesearch.types import CommitId, TreeHash

STORE_FORMAT = 1
SNAP_REFS = "refs/treesearch/snapshots/"
PIN_REFS = "refs/treesearch/pins/"
EMPTY_TREE = TreeHash("4b825dc642cb6eb9a060e54bf8d69288fbee4904")
_CHANGED_CAP = 5000
_BULK_PATHS = 256
_FORCE_ARG_BYTES = 64 * 1024
"""Paths to force (see ``_scan``) up to this size go on git's command line, else to a process."""
_VERIFY_BYTES = 1 << 20
"""Racy files up to this size are checked by hashing them here instead of by a git process."""
_HEX = set("0123456789abcdef")

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
\tsharedIndexExpire = 1.day.ago
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


def default_home() -> Path:
    """``$TREESEARCH_HOME``, else ``$XDG_CACHE_HOME/treesearch``, else ``~/.cache/treesearch``."""
    env = os.environ.get("TREESEARCH_HOME")
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME")
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


def _fs(path: bytes) -> str:
    return os.fsdecode(path)


def _b(path: str) -> bytes:
    return os.fsencode(path)


def _zjoin(paths: Iterable[str]) -> bytes:
    return b"".join(_b(p) + b"\0" for p in paths)


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


@dataclass
class _Scan:
    tree: TreeHash
    walk: WalkResult
    hashed: int
    seconds: float


@dataclass
class _State:
    generation: int = 0
    last: str | None = None
    undo: str | None = None

    @classmethod
    def load(cls, path: Path) -> _State:
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return cls()
        except (OSError, ValueError):
            return cls()
        return cls(int(data.get("generation", 0)), data.get("last"), data.get("undo"))

    def save(self, path: Path) -> None:
        atomic_write(
            path, json.dumps({"generation": self.generation, "last": self.last, "undo": self.undo})
        )


@dataclass
class _Plan:
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
        self._state = _State()
        self._gen_seen = -1
        self._stat_cache: dict[str, tuple[int, int, int, int, int]] | None = None
        """Stat data of every path in the index as of the last scan (None: unknown)."""
        self._tree: TreeHash | None = None
        self._scanned_at = 0
        """When the last scan started (ns): files modified shortly before it are "racy"."""
        self._recent: set[str] = set()
        """Paths modified so recently at the last scan that the next one must ask git again."""
        self._oids: dict[str, str] = {}
        """Blob ids of some recent paths (written by a restore, or changed by a capture): a racy
        file whose content still hashes to its id needs no git process to be checked."""
        self._rules_cache: dict[str, IgnoreRules] | None = None
        self._signature: Any = None
        self._snapshots: dict[str, Snapshot] | None = None
        self._user_tracked: dict[str, tuple[tuple[int, int, int], frozenset[str]]] = {}
        self._watching = watch
        self._diff_cache: dict[tuple[str, str], Diff] = {}
        """File-level diffs (no patch text) of recent tree pairs."""
        self._watch: Inotify | None = None
        self._walker: Walker | None = None
        """The last walk, per folder; with a watcher, the next walk re-lists only what changed."""
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

        ``home`` defaults to ``$TREESEARCH_HOME`` or the user's cache folder. ``excludes`` are
        gitignore-style patterns never captured (and so never deleted by a restore);
        ``max_file_bytes`` leaves larger files out (reported in ``Snapshot.skipped``).
        ``watch``: follow changes with inotify where that is reliable (local filesystems on
        Linux), so a scan re-lists only changed folders; ``False`` (or ``TREESEARCH_WATCH=0``)
        checks every file on every scan, as git does without an fsmonitor.
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
        if (store / "journal.json").exists():
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
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        self._walker = None
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
        """
        if self._lock_depth:
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
            return
        if self._lock_fd is None:
            self._lock_fd = os.open(
                self.path / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644
            )
        fd = self._lock_fd
        limit = self.lock_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        delay = 0.005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = _read_holder(fd)
                    raise StoreLockedError(
                        f"the store {self.path} is locked by another process{holder}; waited "
                        f"{limit:.1f}s. Wait for it to finish, or raise the lock timeout"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.1)
        try:
            with contextlib.suppress(OSError):  # the holder's pid is a courtesy (full disk)
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            self._lock_depth = 1
            self._git.pass_fds = (fd,)
            self._reclaim_stale_locks()
            self._refresh_state()
            yield
        finally:
            self._lock_depth = 0
            self._git.pass_fds = ()
            fcntl.flock(fd, fcntl.LOCK_UN)

    def hold(self, purpose: str = "", *, command: str | None = None) -> WorkspaceHold:
        """Hold the workspace until the returned hold is released (or its ``with`` block ends).

        While held, a ``hold`` (or a restore, which takes one) of this workspace in another
        process raises ``WorkspaceBusy`` at once, naming the holder. Re-entrant within this
        process. ``purpose`` says what for (shown to whoever is refused); ``command`` defaults to
        this process's command line. A record left by a holder that died is reported in
        ``reclaimed``.
        """
        held = acquire_hold(self.path, self.workspace, purpose, command)
        if held.reclaimed:
            self.reclaimed.append(held.reclaimed)
        return held

    def _reclaim_stale_locks(self) -> None:
        # We hold the flock and every git process of ours inherits it, so no live owner exists.
        for lock in (self.path / "index.lock", self.git_dir / "packed-refs.lock"):
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()

    def _refresh_state(self) -> None:
        self._state = _State.load(self.path / "state.json")
        if self._state.generation != self._gen_seen:
            # Another process (or a crash) changed the store: drop every cache.
            self._forget_index()
            self._rules_cache = None
            self._signature = None
            self._snapshots = None
            self._gen_seen = self._state.generation

    def _forget_index(self) -> None:
        """The in-memory view of the index is no longer known to be right."""
        self._stat_cache = None
        self._tree = None

    def _bump(self, **changes: str | None) -> None:
        for key, value in changes.items():
            setattr(self._state, key, value)
        self._state.generation += 1
        self._gen_seen = self._state.generation
        self._state.save(self.path / "state.json")

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

    def capture(self, label: str | None = None, meta: dict[str, Any] | None = None) -> Snapshot:
        """Record the workspace as a snapshot and return it.

        With nothing changed since the previous snapshot (and no new label or meta), the previous
        snapshot is returned and no object is written. Raises ``CaptureError`` (naming the path)
        when a file cannot be read; nothing is recorded then.
        """
        try:
            with self.lock():
                return self._capture_locked("capture", label, meta)
        except GitFailed as exc:
            raise CaptureError(_git_message("capture failed", exc)) from exc
        except UnsafePathError as exc:
            raise CaptureError(f"capture failed at {exc.filename}: {exc.strerror}") from exc
        except OSError as exc:
            raise CaptureError(
                f"capture failed: cannot read {exc.filename}: {exc.strerror}"
            ) from exc

    def _capture_locked(
        self, kind: str, label: str | None, meta: dict[str, Any] | None, scan: _Scan | None = None
    ) -> Snapshot:
        t0 = time.perf_counter()
        if scan is None:
            scan = self._scan()
        w = scan.walk
        last = self._snapshot_or_none(self._state.last)
        meta = dict(meta or {})
        empty_dirs = tuple(sorted(w.empty_dirs))
        skipped = tuple(sorted(w.skipped, key=lambda s: s.path))
        stats = CaptureStats(len(w.files), scan.hashed, 0.0)
        if (
            last is not None
            and last.tree == scan.tree
            and last.modes == w.modes
            and last.empty_dirs == empty_dirs
            and (label is None or label == last.label)
            and (not meta or meta == last.meta)
        ):
            return replace(
                last,
                changed=(),
                skipped=skipped,
                stats=replace(stats, seconds=time.perf_counter() - t0),
            )
        # A safety snapshot's list of changes is never read: spare the diff.
        changed = (
            []
            if kind == "safety"
            else self._changed(last, scan.tree, w.modes, empty_dirs, counts=scan.hashed <= 256)
        )
        created: float = time.time()
        git_env = None
        if self.fixed_dates:
            created = fixed_commit_date(last.created_at if last is not None else None)
            git_env = self._git.with_env(**date_env(int(created)))
        body = {
            "format": STORE_FORMAT,
            "kind": kind,
            "label": label,
            "meta": meta,
            "parent": last.commit if last else None,
            "created_at": created,
            "modes": w.modes,
            "empty_dirs": list(empty_dirs),
            "skipped": [[s.path, s.reason, s.detail] for s in skipped],
            "changed": list(changed[:_CHANGED_CAP]),
            "changed_count": len(changed),
            "stats": {"files_seen": stats.files_seen, "files_hashed": stats.files_hashed},
        }
        try:
            message = (
                f"treesearch {kind}{': ' + label if label else ''}\n\n"
                + json.dumps(body, sort_keys=True, ensure_ascii=True)
                + "\n"
            )
        except (TypeError, ValueError) as exc:
            raise CaptureError(f"snapshot meta is not JSON-serialisable: {exc}") from exc
        commit = (
            self._run(
                ["commit-tree", "--no-gpg-sign", scan.tree, "-F", "-"],
                input=message.encode(),
                env=git_env,
            )
            .decode()
            .strip()
        )
        self._write_ref(SNAP_REFS + commit, commit)
        snap = Snapshot(
            tree=scan.tree,
            commit=CommitId(commit),
            parent=last.commit if last else None,
            label=label,
            created_at=created,
            kind=kind,
            meta=meta,
            changed=tuple(changed),
            skipped=skipped,
            stats=replace(stats, seconds=time.perf_counter() - t0),
            modes=dict(w.modes),
            empty_dirs=empty_dirs,
        )
        self._bump(last=commit)
        if self._snapshots is not None:
            self._snapshots[commit] = replace(snap, stats=None)
        return snap

    def _write_ref(self, name: str, oid: str) -> None:
        """Create a loose ref (we hold the store lock; saves a git process per snapshot)."""
        path = self.git_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        # The temp file outside refs/: a leftover must never look like a ref.
        atomic_write(path, oid + "\n", tmp_dir=self.path)

    def _changed(
        self,
        last: Snapshot | None,
        tree: TreeHash,
        modes: dict[str, int],
        empty_dirs: tuple[str, ...],
        *,
        counts: bool,
    ) -> list[str]:
        """Paths changed since ``last``; with ``counts`` (a small change), the file-level diff
        with line counts is kept too: a session asks for exactly that right after a capture."""
        indexed = self._stat_cache or {}
        if last is None:
            return sorted(indexed)
        paths: set[str] = set()
        if last.tree != tree:
            extra = ["--raw", "--numstat"] if counts else []
            out = self._run(["diff-tree", "-r", "-z", "--no-renames", *extra, last.tree, tree])
            fields = out.split(b"\0")
            if counts:
                self._remember_diff(_parse_diff(last.tree, tree, fields, 0))
            for i in range(len(fields) - 1):
                head = fields[i]
                if not head.startswith(b":"):
                    continue
                path = _fs(fields[i + 1])
                paths.add(path)
                new_oid = head.split(b" ")[3].decode()
                if path in self._recent and new_oid.strip("0"):
                    self._oids[path] = new_oid  # racy now: the next scan checks it by hashing
        paths.update(p for p in set(modes) ^ set(last.modes) if p in indexed)
        paths.update(p for p in modes if p in last.modes and modes[p] != last.modes[p])
        paths.update(set(empty_dirs) ^ set(last.empty_dirs))
        return sorted(paths)

    def _scan(self, *, verify: bool = False) -> _Scan:
        """Bring the store's index in line with the workspace and write its tree (no snapshot).

        Cost with nothing changed: one ``lstat`` per file (our walk) and no git process at all.
        Git is asked only about paths whose stat data changed since the last scan (compared to
        the nanosecond, ``_stat.py``), or that were modified so recently that a later change could
        keep the same timestamps ("racy", as in git's own index); the ignore listing is reused
        while no folder changed. ``verify`` (a restore's safety scan): see every change a full
        walk sees, also those the watcher cannot report.
        """
        t0 = time.perf_counter()
        if not (self.path / "index").exists():
            self._seed_from_user_repo()
        # Until this scan completes, the in-memory view of the index is unknown: an interrupted
        # scan (Ctrl-C, a git error) must not leave a stale view behind.
        cache, self._stat_cache = self._stat_cache, None
        tree, self._tree = self._tree, None
        walk_start = time.time_ns()
        w = self._walk(verify)
        files = new_cache = w.files
        force: list[str] = []  # fed paths git's whole-second compare could miss: removed first
        racy_known: dict[str, str] = {}
        if cache is None:
            index_paths, feed, force, racy_known = self._compare_index(files)
            hashed = len(feed)
        else:
            if w.touched is not None:
                # An incremental walk says which paths can differ (those in re-listed folders).
                changed = [p for p in w.touched if p in new_cache and cache.get(p) != new_cache[p]]
                index_paths = {p for p in w.touched if p in cache and p not in new_cache}
            else:
                # Comparisons of dicts and of their keys run in C: with nothing changed, no
                # per-file Python loop runs and no set is built.
                same_paths = new_cache.keys() == cache.keys()
                index_paths = set() if same_paths else set(cache)
                changed = (
                    []
                    if new_cache == cache
                    else [p for p, key in new_cache.items() if cache.get(p) != key]
                )
            recent = self._unverified(
                [p for p in self._recent if p in new_cache and cache.get(p) == new_cache[p]],
                new_cache,
                self._oids,
            )
            # (Forcing costs no extra process: the paths go on the same command line.)
            force = [
                p
                for p in changed
                if p in cache and git_may_miss(index_key(cache[p]), index_key(new_cache[p]))
            ]
            force += recent
            feed = sorted(set(changed).union(recent))
            hashed = len(changed)
        stale = index_paths.difference(files)
        if feed and stale and all(_deleted_in_place(self.workspace, p, w) for p in stale):
            feed = sorted(set(feed).union(stale))  # `--remove` drops them: one git less
        elif stale:
            # Gone, now ignored, or behind a folder that became a symlink: out of the index.
            self._run(
                ["update-index", "--force-remove", "-z", "--stdin"], input=_zjoin(sorted(stale))
            )
        if feed:
            # For many paths, a tiny bigFileThreshold makes git stream new blobs into one pack
            # (bulk check-in) instead of one loose object file each: much faster cold captures.
            # A few paths stay loose objects, so small captures do not pile up tiny packs.
            bulk = ["-c", "core.bigFileThreshold=1"] if len(feed) > _BULK_PATHS else []
            first: list[str] = []
            if force:
                # Out of the index first, so git hashes them whatever its own stat compare says.
                if sum(len(p) + 3 for p in force) <= _FORCE_ARG_BYTES:
                    first = ["--force-remove", *("./" + p for p in force), "--no-force-remove"]
                else:
                    self._run(
                        ["update-index", "--force-remove", "-z", "--stdin"],
                        input=_zjoin(sorted(force)),
                    )
            self._run(
                [*bulk, "update-index", *first, "--add", "--remove", "--replace", "-z", "--stdin"],
                input=_zjoin(feed),
            )
        if feed or stale or tree is None:
            tree = TreeHash(self._run(["write-tree"]).decode().strip())
        if feed or stale:
            write_scan_time(self.path / "scan-time", walk_start)
        self._stat_cache = new_cache
        self._recent = {
            p
            for p in (
                set(feed).union(racy_known) if cache is None else set(feed).union(self._recent)
            )
            if p in new_cache and racy_key(new_cache[p], walk_start)
        }
        self._oids = {p: oid for p, oid in self._oids.items() if p in self._recent}
        for p in feed:
            self._oids.pop(p, None)  # git hashed it again: the id we knew may be out of date
        for p, oid in racy_known.items():
            if p in self._recent and p not in self._oids:
                self._oids[p] = oid
        self._scanned_at = walk_start
        self._tree = tree
        return _Scan(tree, w, hashed, time.perf_counter() - t0)

    def _compare_index(
        self, files: Mapping[str, tuple[int, int, int, int, int]]
    ) -> tuple[set[str], list[str], list[str], dict[str, str]]:
        """Without a stat cache (a new process): compare the walk with the index's own stat data,
        to the nanosecond. Returns the index's paths, the paths to feed, those to force (see
        ``_scan``) and the racy paths whose content was found unchanged, with their blob ids."""
        out = self._run(["ls-files", "-z", "-s", "--debug"])
        entries = parse_index(out, _fs)
        if entries is None:  # not the listing we know: let git hash everything again
            paths = sorted(files)
            listed = self._run(["ls-files", "-z"])
            return {_fs(p) for p in listed.split(b"\0") if p}, paths, paths, {}
        since = read_scan_time(self.path / "scan-time", self.path / "index")
        changed, force, racy = compare_with_index(files, entries, since)
        oids = {p: entries[p][1] for p in racy}
        unverified = self._unverified(racy, files, oids)
        known = {p: oids[p] for p in set(racy).difference(unverified)}
        return set(entries), sorted(set(changed).union(unverified)), force + unverified, known

    def _unverified(
        self, paths: list[str], keys: Mapping[str, tuple[int, ...]], oids: Mapping[str, str]
    ) -> list[str]:
        """The racy ``paths`` git must look at again: those whose blob id we do not know, or
        whose content no longer hashes to it (what git does for its own racy entries)."""
        out = []
        for p in paths:
            oid = oids.get(p)
            if (
                oid is None
                or keys[p][SIZE] > _VERIFY_BYTES
                or _blob_id(self.workspace, p, keys[p]) != oid
            ):
                out.append(p)
        return out

    def _walk(self, verify: bool = False) -> WalkResult:
        """Walk the workspace; reuse the last ignore listing unless a folder or ignore file changed.

        With a watcher (``_watch.py``), only the folders it reports as changed are listed again;
        the rest of the last walk is reused (same answer, no ``lstat`` per unchanged file).
        """
        no_rules = not (self.respect_gitignore or self.excludes)
        cached = self._rules_cache

        def rules_for(rel: str) -> IgnoreRules | None:
            if no_rules:
                return None
            rules = cached.get(rel) if cached is not None else None
            return rules if rules is not None else self._ignore_rules(rel)

        # Until this walk completes, what the walker holds is unknown (a folder that cannot be
        # listed stops it half-way, after the watcher's events were consumed).
        walker, self._walker = self._walker, None
        w = self._walk_live(walker, rules_for, verify) if (no_rules or cached is not None) else None
        if w is None or walker is None:
            walker = self._new_walker(rules_for)
            w = walker.full()
        self._rules_cache = None
        if no_rules:
            self._walker = walker
            return w
        used = _repo_rules(walker)
        if cached is not None and not self._signature_holds(w, used):
            fresh = self._relist(w, used)
            if fresh != used:
                walker = self._new_walker(lambda rel: fresh.get(rel) or self._ignore_rules(rel))
                w = walker.full()
                used = _repo_rules(walker)
            else:
                walker.rules.update(fresh)  # the same rules, plus what git was asked since
                used = fresh
        self._walker = walker
        self._rules_cache = dict(used)
        self._signature = (w.dir_mtimes, w.dir_names, w.ignore_files, self._info_excludes(used))
        return w

    def _walk_live(
        self,
        walker: Walker | None,
        rules_for: Callable[[str], IgnoreRules | None],
        verify: bool = False,
    ) -> WalkResult | None:
        """The last walk brought up to date from the watcher's events; ``None``: walk it all."""
        watch = self._watch
        if walker is None or watch is None:
            return None
        changes = watch.read()
        if changes is None:
            return None
        walker.rules_for = rules_for
        try:
            w = walker.update(changes.dirty, changes.fresh, verify=verify)
        except NeedFullWalk:
            return None
        return None if watch.lost else w

    def _new_walker(self, rules_for: Callable[[str], IgnoreRules | None]) -> Walker:
        """A walker for a full walk, with a fresh watcher (its events start now)."""
        if self._watch is not None:
            if self._watch.broken and self._watch.pid == os.getpid():
                self._watching = False  # e.g. the watch limit: do not try on every scan
            self._watch.close()
        self._watch = Inotify.create(str(self.workspace)) if self._watching else None
        return Walker(
            str(self.workspace), rules_for, max_file_bytes=self.max_file_bytes, watch=self._watch
        )

    def _signature_holds(self, w: WalkResult, repos: Mapping[str, object]) -> bool:
        """True when the last ignore listing still applies: no ignore file changed, and every
        folder whose mtime moved still holds the same names (a file replaced by rename moves its
        folder's mtime but cannot make a new ignored file)."""
        if self._signature is None:
            return False
        dirs, names, ignore_files, info = self._signature
        if w.ignore_files != ignore_files or w.dir_mtimes.keys() != dirs.keys():
            return False
        since = self._scanned_at
        for d, mtime in w.dir_mtimes.items():
            if (mtime != dirs[d] or _is_racy(mtime, since)) and w.dir_names[d] != names.get(d):
                return False
        return bool(info == self._info_excludes(repos))

    def _info_excludes(self, repos: Mapping[str, object]) -> tuple[tuple[str, int, int], ...]:
        """Stat data of the ignore inputs outside the walk: each repository's info/exclude and
        index (its tracked files are never ignored)."""
        out = []
        for rel in sorted(repos):
            gitdir = (self.workspace / rel if rel else self.workspace) / ".git"
            for p in (gitdir / "info" / "exclude", gitdir / "index"):
                try:
                    st = p.stat()
                    out.append((str(p), st.st_mtime_ns, st.st_size))
                except OSError:
                    out.append((str(p), 0, -1))
        return tuple(out)

    def _ignore_rules(
        self, repo_rel: str, only: Sequence[str] | None = None, base: IgnoreRules | None = None
    ) -> IgnoreRules:
        """Ignored paths of the repository at ``repo_rel``, as git lists them.

        With ``only`` (paths relative to that repository), git looks at those paths alone and
        the answer is merged into ``base``: new entries of a folder are classified without
        walking the whole tree again.
        """
        root = self.workspace / repo_rel if repo_rel else self.workspace
        args = ["--literal-pathspecs", "ls-files", "-z", "--others", "--ignored", "--directory"]
        dot_git = root / ".git"
        if self.respect_gitignore:
            args.append("--exclude-standard")
            info = dot_git / "info" / "exclude"
            if dot_git.is_dir() and info.is_file():
                args.append(f"--exclude-from={info}")
        args.extend(f"--exclude={pattern}" for pattern in self.excludes)
        if only is not None:
            args.append("--")
            args.extend(only)
        env = self._git.with_env(
            GIT_WORK_TREE=str(root), GIT_INDEX_FILE=str(self.path / "no-index")
        )
        out = self._run(args, env=env, cwd=root)
        rules = IgnoreRules()
        if base is not None:
            rules.files.update(base.files)
            rules.dirs.update(base.dirs)
            rules.checked_files.update(base.checked_files)
        for raw in out.split(b"\0"):
            if not raw:
                continue
            p = _fs(raw)
            (rules.dirs if p.endswith("/") else rules.files).add(p)
        if self.respect_gitignore and (rules.files or rules.dirs):
            tracked = self._tracked_by_user(root)
            for p in tracked:
                if p in rules.files or _under_any(p, rules.dirs):
                    rules.keep.add(p)
                    parts = p.split("/")
                    for i in range(1, len(parts)):
                        rules.keep_dirs.add("/".join(parts[:i]))
        return rules

    def _relist(self, w: WalkResult, used: dict[str, IgnoreRules]) -> dict[str, IgnoreRules]:
        """Fresh ignore rules after folders changed: only the new entries are asked about when
        no ignore input changed (the common case: an agent created or replaced a few files)."""
        sig = self._signature
        if (
            sig is not None
            and set(used) == {""}
            and w.ignore_files == sig[2]
            and (sig[3] == self._info_excludes(used))
        ):
            old_names = sig[1]
            base = used[""]
            new_paths: list[str] = []
            new_files: list[str] = []
            for d, names in w.dir_names.items():
                before = old_names.get(d)
                if before is None or names is before:
                    continue  # a new folder (its parent lists it as new), or one not re-listed
                prefix = d + "/" if d else ""
                for n in sorted(names - before):
                    p = prefix + n
                    if n == ".git" or p in w.dir_mtimes:
                        new_paths.append(p)  # a folder: what it holds may differ every time
                    elif p not in base.checked_files:
                        new_paths.append(p)
                        new_files.append(p)
            if not new_paths:
                return used  # every new name is a file that was classified before
            if len(new_paths) <= 512:
                rules = self._ignore_rules("", new_paths, base=base)
                rules.checked_files.update(new_files)
                return {"": rules}
        return {rel: self._ignore_rules(rel) for rel in used}

    def _tracked_by_user(self, root: Path) -> frozenset[str]:
        """Paths the user's own repository at ``root`` tracks (read-only: no lock, no refresh)."""
        gitdir = _user_git_dir(root)
        if gitdir is None:
            return frozenset()
        index = gitdir / "index"
        try:
            st = index.stat()
        except OSError:
            return frozenset()
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        cached = self._user_tracked.get(str(root))
        if cached and cached[0] == key:
            return cached[1]
        env = isolated_env(GIT_DIR=str(gitdir), GIT_WORK_TREE=str(root))
        try:
            out = self._git.run(
                ["-c", "safe.directory=*", "-c", "core.fsmonitor=false", "ls-files", "-z"],
                env=env,
                cwd=root,
            )
            paths = frozenset(_fs(p) for p in out.split(b"\0") if p)
        except GitFailed:
            paths = frozenset()
        self._user_tracked[str(root)] = (key, paths)
        return paths

    def _seed_from_user_repo(self) -> None:
        """First capture of a git workspace: start from the user's index and objects (read-only).

        The user's index file is copied (with its mtime, so git's racy-entry checks stay right)
        and the blobs it names are copied into the store with one pack stream; files whose stat
        data still match are then never read again. The store never points at the user's object
        folder, which the user's own gc may prune.
        """
        gitdir = _user_git_dir(self.workspace)
        if gitdir is None or not (gitdir / "index").is_file():
            return
        env = isolated_env(GIT_DIR=str(gitdir), GIT_WORK_TREE=str(self.workspace))
        pre = ["-c", "safe.directory=*", "-c", "core.fsmonitor=false"]
        try:
            out = self._git.run([*pre, "ls-files", "-s", "-z"], env=env)
        except GitFailed:
            return
        oids = set()
        for rec in out.split(b"\0"):
            if not rec:
                continue
            info, _, _ = rec.partition(b"\t")
            mode, oid, stage = info.split(b" ")
            if stage == b"0" and mode in (b"100644", b"100755", b"120000"):
                oids.add(oid)
        if not oids:
            return
        tmp_index = self.path / "index.seed"
        try:
            pack = subprocess.Popen(
                [
                    git_executable(),
                    *pre,
                    "-c",
                    "pack.compression=1",
                    "pack-objects",
                    "--stdout",
                    "--window=0",
                    "-q",
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
                cwd=str(self.workspace),
            )
            unpack = subprocess.Popen(
                [git_executable(), "index-pack", "--stdin"],
                stdin=pack.stdout,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=self._git.env,
                cwd=str(self.path),
                pass_fds=self._git.pass_fds,
            )
            assert pack.stdin is not None and pack.stdout is not None
            pack.stdout.close()
            pack.stdin.write(b"".join(o + b"\n" for o in sorted(oids)))
            pack.stdin.close()
            packed, unpacked = pack.wait(), unpack.wait()
            if packed != 0 or unpacked != 0:
                return
            shutil.copy2(gitdir / "index", tmp_index)
            # The copy must be one our git reads (no split index or sparse index links).
            self._git.run(["ls-files", "-z"], env=self._git.with_env(GIT_INDEX_FILE=str(tmp_index)))
            os.replace(tmp_index, self.path / "index")
        except (OSError, GitFailed):
            with contextlib.suppress(FileNotFoundError):
                tmp_index.unlink()

    # ------------------------------------------------------------------ snapshots & refs

    def _load_snapshots(self) -> dict[str, Snapshot]:
        if self._snapshots is None:
            out = self._run(
                ["for-each-ref", "--format=%(objectname)%00%(tree)%00%(contents)%01", SNAP_REFS]
            )
            snaps: dict[str, Snapshot] = {}
            for rec in out.split(b"\x01"):
                rec = rec.lstrip(b"\n")
                if not rec:
                    continue
                commit, tree, contents = rec.split(b"\0", 2)
                snap = _parse_snapshot(commit.decode(), tree.decode(), contents.decode())
                if snap is not None:
                    snaps[snap.commit] = snap
            self._snapshots = snaps
        return self._snapshots

    def _snapshot_or_none(self, commit: str | None) -> Snapshot | None:
        if not commit:
            return None
        return self._load_snapshots().get(commit)

    def log(self, *, include_safety: bool = True, limit: int | None = None) -> list[Snapshot]:
        """Snapshots, newest first."""
        with self.lock():
            snaps = sorted(
                self._load_snapshots().values(), key=lambda s: s.created_at, reverse=True
            )
        if not include_safety:
            snaps = [s for s in snaps if s.kind != "safety"]
        return snaps[:limit] if limit is not None else snaps

    def resolve(self, ref: str) -> Snapshot:
        """The snapshot named by a tree hash, a commit, a unique prefix of either, or a label.

        A tree recorded by several snapshots resolves to the newest of them.
        """
        with self.lock():
            return self._resolve_locked(ref)

    def _resolve_locked(self, ref: str) -> Snapshot:
        ref = ref.strip()
        if not ref:
            raise RefError("empty snapshot reference: give a tree hash, commit, prefix or label")
        snaps = self._load_snapshots()
        if ref in ("last", "@"):
            last = self._snapshot_or_none(self._state.last)
            if last is None:
                raise RefError("no snapshot yet: capture one first")
            return last
        if ref == "undo":
            undo = self._snapshot_or_none(self._state.undo)
            if undo is None:
                raise RefError("no safety snapshot yet: nothing to undo")
            return undo
        newest = sorted(snaps.values(), key=lambda s: s.created_at, reverse=True)
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

    def _tree_of(self, ref: str) -> TreeHash:
        """Tree of a snapshot reference, or of any tree/commit object in the store."""
        try:
            return self._resolve_locked(ref).tree
        except RefError:
            if len(ref) >= 4 and set(ref.lower()) <= _HEX:
                try:
                    out = self._git.run(["rev-parse", "--verify", "--quiet", f"{ref}^{{tree}}"])
                    return TreeHash(out.decode().strip())
                except GitFailed:
                    pass
            raise

    # ------------------------------------------------------------------ restore

    def restore(self, ref: str) -> RestoreResult:
        """Make the workspace equal to snapshot ``ref``, touching only what differs.

        A safety snapshot of the workspace is taken first (``undo`` returns to it). Files the
        store does not capture (ignored, excluded, oversize) are never deleted or overwritten:
        a restore that would have to is refused before anything is written. A restore that fails
        part-way is rolled back to the safety snapshot; one killed part-way is completed or
        rolled back by the next ``open``.
        """
        try:
            with self.hold(f"restore {ref}"), self.lock():
                return self._restore_locked(self._resolve_locked(ref))
        except GitFailed as exc:
            raise RestoreError(_git_message("restore failed", exc)) from exc

    def undo(self) -> RestoreResult:
        """Restore the safety snapshot taken by the last restore."""
        return self.restore("undo")

    def _restore_locked(self, target: Snapshot) -> RestoreResult:
        t0 = time.perf_counter()
        if (self.path / "journal.json").exists():
            self._recover_locked()
        token = secrets.token_hex(4)
        try:
            # verify: the safety snapshot must see every change, even those no event reports
            scan = self._scan(verify=True)
            safety = self._capture_locked("safety", None, None, scan=scan)
            plan = self._plan(scan, target)
            if not plan.empty:
                self._write_journal(token, target.commit, safety.commit, plan)
        except (GitFailed, OSError) as exc:
            raise RestoreError(
                f"restore to {target.commit[:12]} failed before anything was changed "
                f"({_one_line(exc)}); the workspace is as it was"
            ) from exc
        pruned: list[str] = []
        warnings: list[str] = []
        if not plan.empty:
            try:
                pruned = self._execute(plan, token)
            except Exception as exc:
                reason = _describe(exc)
                try:
                    self._rollback(token, safety, plan, target)
                except Exception as exc2:  # pragma: no cover - both directions failed
                    raise RestoreError(
                        f"restore to {target.commit[:12]} failed ({reason}) and rolling back "
                        f"failed too ({_describe(exc2)}); run `treesearch snap restore "
                        f"{safety.commit[:12]}` to return to the state before"
                    ) from exc
                raise RestoreError(
                    f"restore to {target.commit[:12]} failed: {reason}; the workspace was "
                    "rolled back to how it was"
                ) from exc
            # Every file is written: the restore is complete whatever happens next. The index
            # is only git's stat cache; if it cannot be updated (a full disk), the next scan
            # finds the rewritten files by their changed stat data.
            warning = self._sync_index_or_forget(plan, target.tree)
            if warning:
                warnings.append(warning)
            try:
                self._bump(last=target.commit, undo=safety.commit)
                (self.path / "journal.json").unlink()
            except OSError as exc:
                raise RestoreError(
                    f"restore to {target.commit[:12]} completed: the workspace is at it, but the "
                    f"store could not record that ({_describe(exc)}); the next treesearch command "
                    f"records it (`treesearch snap undo` then returns to {safety.commit[:12]})"
                ) from exc
        else:
            self._bump(last=target.commit, undo=safety.commit)
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

    def _plan(self, scan: _Scan, target: Snapshot) -> _Plan:
        plan = _Plan()
        current = scan.walk
        if scan.tree != target.tree:
            out = self._run(["diff-tree", "-r", "-z", "--no-renames", scan.tree, target.tree])
            fields = out.split(b"\0")
            i = 0
            while i + 1 < len(fields):
                head = fields[i]
                if not head.startswith(b":"):
                    i += 1
                    continue
                path = _fs(fields[i + 1])
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
        # folders empty now but not in the target; re-create the target's empty folders.
        keep = _parent_dirs(writing) | _parent_dirs(target.empty_dirs) | set(target.empty_dirs)
        candidates = _parent_dirs(plan.deletes) | set(current.empty_dirs)
        plan.prune = sorted(
            (d for d in candidates if d not in keep), key=lambda d: (-d.count("/"), d)
        )
        walked = current.dir_mtimes
        plan.mkdirs = sorted(d for d in target.empty_dirs if d not in walked or d in plan.prune)
        self._check_conflicts(plan, current)
        return plan

    def _check_conflicts(self, plan: _Plan, current: WalkResult) -> None:
        """Refuse, before writing anything, a restore that would destroy uncaptured files."""
        deleting = set(plan.deletes)
        problems: list[str] = []
        verdict: dict[str, bool] = {}  # folder -> "everything below is fresh" (no check needed)
        with SafeTree(str(self.workspace)) as tree:
            for path, *_ in plan.writes:
                parts = path.split("/")
                fresh = False
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
                        fresh = True
                        break
                if fresh or path in current.files:
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

    def _write_journal(self, token: str, target: str, safety: str, plan: _Plan) -> None:
        data = {
            "token": token,
            "target": target,
            "safety": safety,
            "writes": [p for p, *_ in plan.writes],
        }
        # Not durable: the journal guards against the process dying (SIGKILL, OOM), which
        # leaves the page cache intact; like git's own objects, it does not claim power-loss
        # durability.
        atomic_write(self.path / "journal.json", json.dumps(data))

    def _execute(self, plan: _Plan, token: str, root: Path | None = None) -> list[str]:
        """Carry out ``plan``; returns the folders actually pruned."""
        with SafeTree(str(root or self.workspace)) as tree, BlobReader(self._git) as blobs:
            for path in plan.deletes:
                tree.unlink(path)
            pruned = [d for d in plan.prune if tree.rmdir(d)]
            deferred: list[tuple[str, Callable[[int], None], int]] = []
            for path, mode, oid, perm in plan.writes:
                if mode == 0o120000:
                    tree.write_symlink(path, blobs.read(oid), token)
                    continue
                if mode not in (0o100644, 0o100755):
                    raise RestoreError(f"{path}: unsupported entry mode {mode:o} in the snapshot")

                def fill(fd: int, oid: str = oid) -> None:
                    with os.fdopen(os.dup(fd), "wb", buffering=1 << 20) as fh:
                        blobs.read_to(oid, fh)

                # In the workspace a journal is on record: on a full disk, the old file may go
                # first (the safety snapshot holds it; recovery redoes the write after a kill),
                # and a file that still finds no room is written again after the others.
                try:
                    tree.write_file(path, fill, perm, token, make_room=root is None)
                except OSError as exc:
                    if root is not None or exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                        raise
                    deferred.append((path, fill, perm))
            for path, refill, perm in deferred:
                tree.write_file(path, refill, perm, token, make_room=True)
            for path, perm in plan.chmods:
                tree.chmod(path, perm)
            for d in plan.mkdirs:
                tree.mkdirs(d)
        return pruned

    def _sync_index(self, plan: _Plan, tree: TreeHash) -> None:
        """Tell the index what the restore changed (it now holds ``tree``).

        One ``update-index --index-info`` with the blob ids the plan already knows: nothing is
        hashed again. The entries carry no stat data, which is fine: our own stat cache decides
        what git is asked about, and a later change of these files is fed to git as usual.
        """
        cache, self._stat_cache = self._stat_cache, None
        self._tree = None
        records = [f"0 {'0' * 40}\t".encode() + _b(p) + b"\0" for p in sorted(plan.deletes)]
        records += [
            f"{mode:o} {oid}\t".encode() + _b(p) + b"\0"
            for p, mode, oid, *_ in sorted(plan.writes) + sorted(plan.index_modes)
        ]
        if records:
            self._run(["update-index", "-z", "--index-info"], input=b"".join(records))
        touched = {p for p, *_ in plan.writes} | {p for p, _ in plan.chmods}
        if self._walker is not None:
            # The walker's folder records must agree with the stat cache updated below.
            self._walker.wrote([*touched, *plan.deletes, *plan.prune, *plan.mkdirs])
        if cache is not None:
            for p in plan.deletes:
                cache.pop(p, None)
            for p in touched:
                try:
                    st = os.lstat(self.workspace / p)
                except OSError:
                    cache.pop(p, None)
                    continue
                cache[p] = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode)
                self._recent.add(p)  # just written: racy until the timestamp tick has passed
            for p, _mode, oid, *_ in plan.writes:
                if p in self._recent:
                    self._oids[p] = oid
            self._stat_cache = cache
            self._tree = tree

    def _sync_index_or_forget(self, plan: _Plan, tree: TreeHash) -> str | None:
        """``_sync_index`` after the files are written; a failure (a full disk) only costs the
        cache: it is forgotten, and the warning says so."""
        try:
            self._sync_index(plan, tree)
            return None
        except (GitFailed, OSError) as exc:
            self._forget_index()
            return (
                f"the store's index could not be updated ({_one_line(exc)}); the next "
                "capture checks the restored files again"
            )

    def _rollback(self, token: str, safety: Snapshot, plan: _Plan, target: Snapshot) -> None:
        self._cleanup_temps(token, [p for p, *_ in plan.writes])
        self._forget_index()
        try:
            scan = self._scan(verify=True)
        except (GitFailed, OSError):
            # The scan writes the index, which a full disk refuses. Without it: every path that
            # differs between the safety and the target was in the plan, and going back from
            # the target's tree rewrites each of them (done or not) to its safety state.
            self._forget_index()
            scan = _Scan(target.tree, self._walk(verify=True), 0, 0.0)
        back = self._plan(scan, safety)
        self._execute(back, token)
        self._sync_index_or_forget(back, safety.tree)
        with contextlib.suppress(FileNotFoundError):
            (self.path / "journal.json").unlink()

    def _cleanup_temps(self, token: str, paths: Iterable[str]) -> None:
        with SafeTree(str(self.workspace)) as tree:
            for p in paths:
                tree.remove_temp(p, token)

    # ------------------------------------------------------------------ recovery

    def recover(self) -> str | None:
        """Finish (or else roll back) a restore that was interrupted; ``None`` if there was none."""
        with self.lock():
            return self._recover_locked()

    def _recover_locked(self) -> str | None:
        journal = self.path / "journal.json"
        try:
            data = json.loads(journal.read_text(encoding="utf-8", errors="surrogateescape"))
        except FileNotFoundError:
            return None
        except ValueError:
            journal.unlink()  # torn before the rename: the restore never started writing
            return "discarded an unfinished journal of a restore that had not started"
        token, target_id, safety_id = data["token"], data["target"], data["safety"]
        self._cleanup_temps(token, data.get("writes", ()))
        snaps = self._load_snapshots()
        self._forget_index()
        for what, commit in (("completed", target_id), ("rolled back", safety_id)):
            snap = snaps.get(commit)
            if snap is None:
                continue
            plan = _Plan()
            try:
                plan = self._plan(self._scan(verify=True), snap)
                self._execute(plan, token)
                self._sync_index_or_forget(plan, snap.tree)
            except (RestoreError, OSError, GitFailed):
                self._cleanup_temps(token, [p for p, *_ in plan.writes])
                self._forget_index()
                continue
            journal.unlink()
            self._bump(last=commit, undo=safety_id)
            return f"{what} an interrupted restore (to {commit[:12]})"
        raise RecoveryError(
            f"an interrupted restore in {self.path} could be neither completed nor rolled back; "
            f"the journal is kept at {journal}. Move files that block it and run `treesearch snap "
            "log` again"
        )

    # ------------------------------------------------------------------ diff

    def diff(self, a: str, b: str | None = None, *, max_patch_bytes: int = 1_000_000) -> Diff:
        """Changes from ``a`` to ``b`` (``None``: the workspace as it is now, without recording)."""
        try:
            with self.lock():
                ta = self._tree_of(a)
                tb = self._scan().tree if b is None else self._tree_of(b)
                known = self._diff_cache.get((ta, tb)) if max_patch_bytes <= 0 else None
                return known if known is not None else self._diff_trees(ta, tb, max_patch_bytes)
        except GitFailed as exc:
            raise DiffError(_git_message("diff failed", exc)) from exc
        except OSError as exc:
            raise DiffError(f"diff failed: cannot read {exc.filename}: {exc.strerror}") from exc

    def diffs(self, pairs: Sequence[tuple[str, str]]) -> list[Diff]:
        """File-level changes (no patch text) for several pairs of snapshots, with one git
        process: what a search needs per node (parent -> child, root -> child)."""
        try:
            with self.lock():
                trees = [(self._tree_of(a), self._tree_of(b)) for a, b in pairs]
                todo = sorted({(a, b) for a, b in trees if a != b} - self._diff_cache.keys())
                parsed: dict[tuple[str, str], list[bytes]] = {}
                if todo:
                    out = self._run(
                        ["diff-tree", "-r", "-z", "--no-renames", "--raw", "--numstat", "--stdin"],
                        input="".join(f"{a} {b}\n" for a, b in todo).encode(),
                    )
                    parsed = _split_stdin_diffs(out, todo)
                for ta, tb in todo:
                    self._remember_diff(_parse_diff(ta, tb, parsed.get((ta, tb), []), 0))
                return [
                    self._diff_cache[(ta, tb)] if ta != tb else Diff(ta, tb, (), "", False)
                    for ta, tb in trees
                ]
        except GitFailed as exc:
            raise DiffError(_git_message("diff failed", exc)) from exc

    def _remember_diff(self, d: Diff) -> None:
        """Keep a file-level diff of two trees (immutable: trees never change)."""
        cache = self._diff_cache
        cache[(d.a, d.b)] = d
        while len(cache) > 64:
            del cache[next(iter(cache))]

    def _diff_trees(self, ta: TreeHash, tb: TreeHash, max_patch_bytes: int) -> Diff:
        if ta == tb:
            return Diff(ta, tb, (), "", False)
        out = self._run(["diff-tree", "-r", "-z", "--no-renames", "--raw", "--numstat", ta, tb])
        diff = _parse_diff(ta, tb, out.split(b"\0"), max_patch_bytes)
        if max_patch_bytes > 0:
            patch, truncated = self._patch(ta, tb, max_patch_bytes)
            diff = replace(diff, patch=patch, truncated=truncated)
        return diff

    def _patch(self, ta: str, tb: str, cap: int) -> tuple[str, bool]:
        proc = self._git.popen(
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

    # ------------------------------------------------------------------ show / materialize

    def files(self, ref: str) -> list[TreeEntry]:
        """The files of snapshot ``ref`` with mode, size and restored permission."""
        try:
            with self.lock():
                snap = self._resolve_locked(ref)
                out = self._run(["ls-tree", "-r", "-z", "--long", "--full-tree", snap.tree])
        except GitFailed as exc:
            raise RefError(_git_message("cannot list the snapshot", exc)) from exc
        entries = []
        for rec in out.split(b"\0"):
            if not rec:
                continue
            info, _, path = rec.partition(b"\t")
            mode, _type, oid, size = info.split()
            m = int(mode, 8)
            p = _fs(path)
            perm = 0o777 if m == 0o120000 else snap.modes.get(p, default_mode(m))
            entries.append(TreeEntry(p, m, int(size) if size != b"-" else 0, oid.decode(), perm))
        return entries

    def materialize(self, ref: str, dest: str | os.PathLike[str]) -> Snapshot:
        """Write snapshot ``ref`` into ``dest``, a missing or empty folder outside the workspace."""
        target = Path(os.path.abspath(os.fspath(dest)))
        try:
            with self.lock():
                snap = self._resolve_locked(ref)
                real = target.resolve()
                if _is_within(real, self.workspace) or _is_within(real, self.path):
                    raise MaterializeError(
                        f"{target} is inside the workspace or the store; materialize elsewhere"
                    )
                if (target.exists() or target.is_symlink()) and (
                    target.is_symlink() or not target.is_dir() or any(target.iterdir())
                ):
                    raise MaterializeError(
                        f"{target} is not an empty folder; give a new or empty folder"
                    )
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
                return snap
        except GitFailed as exc:
            raise MaterializeError(_git_message(f"cannot materialize into {target}", exc)) from exc
        except OSError as exc:
            raise MaterializeError(f"cannot materialize into {target}: {exc}") from exc

    # ------------------------------------------------------------------ pins & gc

    def pin(self, ref: str, name: str) -> Snapshot:
        """Keep snapshot ``ref`` through every ``gc`` under ``name`` (e.g. a run id)."""
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "pin"
        with self.lock():
            snap = self._resolve_locked(ref)
            self._run(["update-ref", PIN_REFS + safe, snap.commit])
            return snap

    def unpin(self, name: str) -> None:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "pin"
        with self.lock():
            self._run(["update-ref", "-d", PIN_REFS + safe])

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
    ) -> GcResult:
        """Drop old snapshots and their unreachable objects (see ``_retention`` for the rules).

        Unlabelled captures: keep the newest ``keep_last`` (safety snapshots are not counted),
        drop those older than ``max_age`` seconds. Labelled captures are dropped only when named
        in ``drop`` (a label drops every snapshot with it) or when ``labelled`` puts them under
        the capture rules. Safety snapshots: dropped when older than ``safety_max_age``, never
        the newest ``keep_safety``. Then, with ``max_bytes``, the oldest droppable snapshots go
        until the objects fit. Never dropped: pinned snapshots, those named in ``protect``, the
        newest snapshot, the last snapshot and the one ``undo`` returns to.
        """
        policy = GcPolicy(keep_last, max_age, keep_safety, safety_max_age, labelled)
        try:
            if dry_run:
                with self.lock():
                    return self._gc_locked(policy, max_bytes, protect, drop, True)
            with self.hold("gc"), self.lock():
                return self._gc_locked(policy, max_bytes, protect, drop, False)
        except GitFailed as exc:
            raise GcError(_git_message("gc failed", exc)) from exc

    def _gc_locked(
        self,
        policy: GcPolicy,
        max_bytes: int | None,
        protect: Iterable[str],
        drop_refs: Iterable[str],
        dry_run: bool,
    ) -> GcResult:
        snaps = sorted(self._load_snapshots().values(), key=lambda s: s.created_at, reverse=True)
        keep: set[str] = {c for c in (self._state.last, self._state.undo) if c}
        keep.update(self._resolve_locked(r).commit for r in protect)
        pins = self._run(["for-each-ref", "--format=%(objectname)", PIN_REFS]).decode().split()
        keep.update(pins)
        resolve = self._resolve_locked
        named = named_for_drop(snaps, drop_refs, keep, pins, lambda r: resolve(r).commit)
        drop = plan_gc(snaps, policy, keep=keep, drop=named, now=time.time())
        before = self.disk_usage()
        if dry_run:
            return GcResult(
                tuple(s.commit for s in drop),
                len(snaps) - len(drop),
                before,
                before,
                True,
                tuple(drop),
            )
        self._drop(drop)
        self._run(["gc", "--prune=now", "--quiet"])
        after = self.disk_usage()
        if max_bytes is not None:
            rest = pressure_order(snaps, policy, keep=keep, dropped={s.commit for s in drop})
            while after > max_bytes and rest:
                batch = rest[: max(1, len(rest) // 4)]
                rest = rest[len(batch) :]
                self._drop(batch)
                drop.extend(batch)
                self._run(["gc", "--prune=now", "--quiet"])
                after = self.disk_usage()
        return GcResult(
            tuple(s.commit for s in drop),
            len(snaps) - len(drop),
            before,
            after,
            False,
            tuple(drop),
        )

    def _drop(self, snaps: Sequence[Snapshot]) -> None:
        if not snaps:
            return
        cmds = "".join(f"delete {SNAP_REFS}{s.commit}\n" for s in snaps)
        self._run(["update-ref", "--stdin"], input=cmds.encode())
        self._snapshots = None
        self._bump()

    def fsck(self) -> str:
        """Run ``git fsck`` on the store; raises ``StoreError`` if it finds corruption."""
        try:
            with self.lock():
                out = self._git.run(["fsck", "--no-progress", "--no-dangling"])
                return out.decode("utf-8", "replace")
        except GitFailed as exc:
            raise StoreError(f"the store {self.path} is damaged: {exc.stderr}") from exc


# ---------------------------------------------------------------------- helpers


def _parse_snapshot(commit: str, tree: str, contents: str) -> Snapshot | None:
    _title, _, body = contents.partition("\n\n")
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("format") != STORE_FORMAT:
        return None
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
        modes={k: int(v) for k, v in (data.get("modes") or {}).items()},
        empty_dirs=tuple(data.get("empty_dirs") or ()),
    )


def _user_git_dir(root: Path) -> Path | None:
    dot = root / ".git"
    if dot.is_dir():
        return dot
    if dot.is_file():
        try:
            line = dot.read_text().strip()
        except OSError:
            return None
        if line.startswith("gitdir:"):
            p = Path(line[7:].strip())
            p = p if p.is_absolute() else (root / p)
            return p if p.is_dir() else None
    return None


def _parse_diff(ta: TreeHash, tb: TreeHash, fields: list[bytes], max_patch_bytes: int) -> Diff:
    """A ``Diff`` from ``diff-tree -z --raw --numstat`` output split at NUL (no patch text)."""
    raw: dict[str, tuple[str, int | None, int | None]] = {}
    counts: dict[str, tuple[int, int, bool]] = {}
    i = 0
    while i < len(fields):
        item = fields[i]
        if item.startswith(b":"):
            old_mode, new_mode, _o, _n, status = item[1:].decode().split(" ")
            raw[_fs(fields[i + 1])] = (
                status,
                None if status == "A" else int(old_mode, 8),
                None if status == "D" else int(new_mode, 8),
            )
            i += 2
        elif item:
            added, deleted, path = item.split(b"\t", 2)
            binary = added == b"-"
            counts[_fs(path)] = (0 if binary else int(added), 0 if binary else int(deleted), binary)
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


def _repo_rules(walker: Walker) -> dict[str, IgnoreRules]:
    """The ignore rules of each repository the walker met (``""`` is the workspace)."""
    return {rel: r for rel, r in walker.rules.items() if r is not None}


def _deleted_in_place(root: Path, rel: str, w: WalkResult) -> bool:
    """A file deleted from a folder that is still a real folder (not a symlink or gone)."""
    parent = rel.rpartition("/")[0]
    return parent in w.dir_mtimes and not os.path.lexists(os.path.join(root, rel))


def _blob_id(root: Path, rel: str, key: tuple[int, ...]) -> str | None:
    """git's blob id of a file or symlink as it is now (``None`` if it cannot be read)."""
    path = os.path.join(root, rel)
    try:
        if stat.S_ISLNK(key[MODE]):
            data = os.fsencode(os.readlink(path))
        else:
            with open(path, "rb", opener=_nofollow) as fh:
                data = fh.read(_VERIFY_BYTES + 1)
    except OSError:
        return None
    return blob_oid(data)


def _nofollow(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW)


def _under_any(path: str, dirs: set[str]) -> bool:
    parts = path.split("/")
    return any("/".join(parts[:i]) + "/" in dirs for i in range(1, len(parts)))


def _parent_dirs(paths: Iterable[str]) -> set[str]:
    out: set[str] = set()
    for p in paths:
        parts = p.split("/")
        for i in range(1, len(parts)):
            out.add("/".join(parts[:i]))
    return out


def _read_holder(fd: int) -> str:
    try:
        pid = os.pread(fd, 32, 0).decode().strip()
    except OSError:
        return ""
    return f" (pid {pid})" if pid else ""


def _stale_lock_path(stderr: str, store: Path) -> Path | None:
    marker = "Unable to create '"
    at = stderr.find(marker)
    if at < 0 or "File exists" not in stderr:
        return None
    end = stderr.find("'", at + len(marker))
    p = Path(stderr[at + len(marker) : end])
    return p if p.suffix == ".lock" and _is_within(p, store) else None


def _git_message(what: str, exc: GitFailed) -> str:
    text = exc.stderr or f"git exited {exc.code}"
    for line in text.splitlines():
        if "open(" in line or "Permission denied" in line or "unable to" in line.lower():
            return f"{what}: {line.strip()}"
    return f"{what}: {text.splitlines()[-1] if text else ''}".strip()


def _one_line(exc: BaseException) -> str:
    """The last line of ``_describe``: messages stay on one line."""
    lines = [line.strip() for line in _describe(exc).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.filename}: {exc.strerror}"
    if isinstance(exc, GitFailed):
        return exc.stderr or str(exc)
    return str(exc)


__all__ = ["GcResult", "ShadowStore", "TreeEntry", "default_home", "store_dir_for"]
