"""Scanning: bring the store's index in line with the workspace, and all the state that makes it
cheap (the store's only mutable caches of the workspace).

``Scanner`` owns the stat cache (stat data of every indexed path as of the last scan), the racy
set (paths modified so recently that a later change could keep their timestamps), the blob ids
known for some of those, the ignore rules and their signature, the walker and its inotify watcher,
and the first capture's seeding from the user's own repository (read-only).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from treesearch.store._git import GitFailed, GitRunner, isolated_env
from treesearch.store._recheck import Recheck
from treesearch.store._scan_edit import blob_id_of, write_in_process
from treesearch.store._scan_known import index_entry_args, new_entries
from treesearch.store._seed import seed_from_user_repo, user_git_dir
from treesearch.store._stat import (
    compare_with_index,
    git_may_miss,
    index_key,
    own_index_entries,
    parse_index,
    racy_key,
    read_scan_time,
    write_scan_time,
)
from treesearch.store._stat import is_racy as _is_racy
from treesearch.store._trees import UNSYNCED_MAX as _UNSYNCED_MAX
from treesearch.store._trees import store_trees
from treesearch.store._walk import SIZE, IgnoreRules, NeedFullWalk, Walker, WalkResult
from treesearch.store._watch import Inotify
from treesearch.types import TreeHash

Key = tuple[int, int, int, int, int]
Run = Callable[..., bytes]

_BULK_PATHS = 256
_FORCE_ARG_BYTES = 64 * 1024
"""Paths to force (see ``Scanner.scan``) up to this size go on git's command line, else to a
process of their own."""
_VERIFY_BYTES = 1 << 20
"""Racy files up to this size are checked by hashing them here instead of by a git process."""
_NO_GIT_CONFIG = ["-c", "safe.directory=*", "-c", "core.fsmonitor=false"]


@dataclass
class Scan:
    """The workspace as one scan found it: its tree (written into the store) and its walk."""

    tree: TreeHash
    walk: WalkResult
    hashed: int
    seconds: float
    raw: tuple[TreeHash, list[bytes]] | None = None
    """Written in the process (``_scan_edit.py``): the tree edited and ``diff-tree``'s raw
    records (split at NUL) from it to ``tree``."""


@dataclass(frozen=True)
class Mirror:
    """What a worker folder's scans take from the workspace it stands in for: that workspace's
    ``.git/info/exclude`` files and the paths its repository tracks (captured even when a
    pattern ignores them), so that both capture the same files."""

    exclude_from: tuple[str, ...] = ()
    keep: frozenset[str] = frozenset()


@dataclass
class _Compared:
    """What a scan must tell git: see ``Scanner._compare``."""

    index_paths: set[str]
    feed: list[str]
    force: list[str]
    racy_known: dict[str, str]
    hashed: int


class Scanner:
    """Scans one workspace into the store's index (see ``scan``)."""

    def __init__(
        self,
        workspace: Path,
        store: Path,
        git: GitRunner,
        run: Run,
        *,
        excludes: Sequence[str],
        respect_gitignore: bool,
        max_file_bytes: int | None,
        watch: bool,
    ) -> None:
        self.workspace = workspace
        self.store = store
        self.git = git
        self.run = run
        """git with a stale ref lock reclaimed (the store's ``_run``)."""
        self.excludes = tuple(excludes)
        self.respect_gitignore = respect_gitignore
        self.max_file_bytes = max_file_bytes
        self.watching = watch
        self.stat_cache: dict[str, Key] | None = None
        """Stat data of every path in the index as of the last scan (None: unknown)."""
        self.tree: TreeHash | None = None
        self.scanned_at = 0
        """When the last scan started (ns): files modified shortly before it are "racy"."""
        self.recent: set[str] = set()
        """Paths modified so recently at the last scan that the next one must ask git again."""
        self.oids: dict[str, str] = {}
        """Blob ids of some recent paths (written by a restore, or changed by a capture): a racy
        file whose content still hashes to its id needs no git process to be checked."""
        self.rules_cache: dict[str, IgnoreRules] | None = None
        self.signature: Any = None
        self.user_tracked: dict[str, tuple[tuple[int, int, int], frozenset[str]]] = {}
        self.mirror: Mirror | None = None
        """Set on a worker's store (``store.workers``): the ignore inputs of the workspace it
        stands in for, which its own folder lacks (that workspace's ``.git``)."""
        self.unsynced: dict[str, tuple[int, str] | None] = {}
        """Index entries a restore made that the index does not have yet (path -> (mode, blob
        id), ``None``: removed): given to the next ``update-index`` a scan runs, before any
        ``write-tree`` (see ``restored``)."""
        self.watch: Inotify | None = None
        self.walker: Walker | None = None
        """The last walk, per folder; with a watcher, the next walk re-lists only what changed."""
        self.recheck = Recheck()
        """Without a watcher: what the next walk must list again (``_recheck.py``)."""
        self.trees = store_trees(git)
        """The store's one object reader and tree cache (``_trees.py``): a small scan's blobs
        and trees are written without git (``_scan_edit.py``); a restore reads through it."""

    # ------------------------------------------------------------------ state

    def forget_index(self) -> None:
        """The in-memory view of the index is no longer known to be right."""
        self.stat_cache = None
        self.tree = None
        # The next scan compares the workspace with the index's own stat data, which finds the
        # paths a restore changed (another process may have told the index since).
        self.unsynced = {}

    def forget(self) -> None:
        """Another process (or a crash) changed the store: drop every cache of it."""
        self.forget_index()
        self.rules_cache = None
        self.signature = None

    def close(self) -> None:
        self.trees.objects.close()
        if self.watch is not None:
            self.watch.close()
            self.watch = None
        self.walker = None

    @property
    def indexed(self) -> Mapping[str, Key]:
        return self.stat_cache or {}

    @property
    def incremental(self) -> bool:
        """Did the last scan re-list only what the watcher reported (a process that scans again
        and again: a search, a session)?"""
        return self.walker is not None and self.walker.relisted is not None

    def note_oid(self, path: str, oid: str) -> None:
        """A capture learnt ``path``'s blob id: a racy path is then checked by hashing."""
        if path in self.recent and oid.strip("0"):
            self.oids[path] = oid

    def restored(
        self,
        written: Sequence[tuple[str, str]],
        touched: Collection[str],
        deleted: Collection[str],
        folders: Collection[str],
        tree: TreeHash,
        update_index: Callable[[], None],
        entries: Mapping[str, tuple[int, str] | None] | None = None,
    ) -> None:
        """A restore wrote ``written`` ((path, blob id)), changed the ``touched`` paths (those
        written included), deleted ``deleted`` and removed or made ``folders``. Keeps the stat
        cache right without a scan. ``update_index`` tells git; if it fails the cache is
        forgotten (the next scan asks git). With ``entries`` (the index entries the restore
        made: path -> (mode, blob id), ``None``: removed) and a stat cache, git is told later,
        with the next ``update-index`` a scan runs anyway (``unsynced``): one git process less
        per restore. (A process that dies before then leaves an index whose stat data differ
        from those paths': the next process's first scan gives them to git.)"""
        cache, self.stat_cache = self.stat_cache, None
        self.tree = None
        if entries is not None and cache is not None:
            if len(self.unsynced.keys() | entries.keys()) <= _UNSYNCED_MAX:
                self.unsynced.update(entries)  # (a later restore's entry replaces an earlier's)
            else:
                for p in entries:
                    self.unsynced.pop(p, None)  # told now: an older entry must not follow it
                update_index()
        else:
            # Told now: an older waiting entry of these paths must not follow (and undo) it.
            for p in [*touched, *deleted, *(p for p, _oid in written)]:
                self.unsynced.pop(p, None)
            update_index()
        if self.walker is not None:
            # The walker's folder records must agree with the stat cache updated below.
            self.walker.wrote([*touched, *deleted, *folders])
        if cache is None:
            return
        cache = dict(cache)  # the last walk's answer, which the walker may give again: a copy
        for p in deleted:
            cache.pop(p, None)
        for p in touched:
            try:
                st = os.lstat(self.workspace / p)
            except OSError:
                cache.pop(p, None)
                continue
            cache[p] = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode)
            self.recent.add(p)  # just written: racy until the timestamp tick has passed
        for p, oid in written:
            if p in self.recent:
                self.oids[p] = oid
        self.stat_cache = cache
        self.tree = tree

    # ------------------------------------------------------------------ scan

    def scan(self, *, verify: bool = False) -> Scan:
        """Bring the store's index in line with the workspace and write its tree (no snapshot).

        Cost with nothing changed: one ``lstat`` per file (our walk) and no git process at all.
        Git is asked only about paths whose stat data changed since the last scan (compared to
        the nanosecond, ``_stat.py``), or that were modified so recently that a later change could
        keep the same timestamps ("racy", as in git's own index); the ignore listing is reused
        while no folder changed. ``verify`` (a restore's safety scan): see every change a full
        walk sees, also those the watcher cannot report.
        """
        t0 = time.perf_counter()
        if not (self.store / "index").exists():
            seed_from_user_repo(self.workspace, self.store, self.git)
        # Until this scan completes, the in-memory view of the index is unknown: an interrupted
        # scan (Ctrl-C, a git error) must not leave a stale view behind.
        cache, self.stat_cache = self.stat_cache, None
        tree, self.tree = self.tree, None
        walk_start = time.time_ns()
        w = self.walk(verify)
        c = self._compare(cache, w)
        made = write_in_process(self, cache, tree, c.feed, c.index_paths, w, _UNSYNCED_MAX)
        if made is not None:  # (the index is told later: ``_scan_edit.py``)
            self._remember(cache, w.files, c.feed, c.racy_known, walk_start)
            self.oids.update((p, oid) for p, oid in made.hashed.items() if p in self.recent)
            self.tree = made.tree
            raw = (made.base, made.raw)
            return Scan(made.tree, w, c.hashed, time.perf_counter() - t0, raw)
        restored = self._unsynced_args(c, w, tree is None)
        feed, stale = self._tell_git(c, w, restored)
        own = own_index_entries(self.store / "index") if feed or stale else 0
        if own > max(_BULK_PATHS, len(w.files) // 20):  # fold them into a new shared index
            with contextlib.suppress(GitFailed):  # (``_stat``): only a smaller file, not needed
                self.run(["update-index", "--split-index"])
        if feed or stale or restored or tree is None:
            tree = TreeHash(self.run(["write-tree"]).decode().strip())
        if restored:
            self.unsynced = {}
        if feed or stale:
            write_scan_time(self.store / "scan-time", walk_start)
        self._remember(cache, w.files, feed, c.racy_known, walk_start)
        self.tree = tree
        return Scan(tree, w, c.hashed, time.perf_counter() - t0)

    def _compare(self, cache: dict[str, Key] | None, w: WalkResult) -> _Compared:
        """The paths git must look at: changed since the last scan, or racy and not verified."""
        new_cache = w.files
        if cache is None:
            index_paths, feed, force, racy_known = self._compare_index(new_cache)
            return _Compared(index_paths, feed, force, racy_known, len(feed))
        if w.touched is not None:
            # An incremental walk says which paths can differ (those in re-listed folders).
            changed = [p for p in w.touched if p in new_cache and cache.get(p) != new_cache[p]]
            index_paths = {p for p in w.touched if p in cache and p not in new_cache}
        else:
            # Comparisons of dicts and of their keys run in C: with nothing changed, no
            # per-file Python loop runs and no set is built.
            index_paths = set() if new_cache.keys() == cache.keys() else set(cache)
            changed = (
                []
                if new_cache == cache
                else [p for p, key in new_cache.items() if cache.get(p) != key]
            )
        recent = self._unverified(
            [p for p in self.recent if p in new_cache and cache.get(p) == new_cache[p]],
            new_cache,
            self.oids,
        )
        # (Forcing costs no extra process: the paths go on the same command line.)
        force = [
            p
            for p in changed
            if p in cache and git_may_miss(index_key(cache[p]), index_key(new_cache[p]))
        ]
        force += recent
        feed = sorted(set(changed).union(recent))
        return _Compared(index_paths, feed, force, {}, len(changed))

    def _unsynced_args(self, c: _Compared, w: WalkResult, tree_unknown: bool) -> list[str]:
        """``update-index`` arguments for the index entries a restore left (``unsynced``) when
        git is to be run anyway or the tree is unknown; else none. They go first: what the scan
        found since (fed, removed) comes after them and wins."""
        if self.unsynced and (c.feed or tree_unknown or c.index_paths.difference(w.files)):
            return index_entry_args(self.unsynced)
        return []

    def _tell_git(
        self, c: _Compared, w: WalkResult, first_args: Sequence[str] = ()
    ) -> tuple[list[str], set[str]]:
        """Feed the changed paths to ``update-index``; returns the paths fed and the stale ones
        (in the index, no longer in the walk). ``first_args`` go to the first ``update-index``
        (see ``_unsynced_args``)."""
        feed, force = c.feed, c.force
        pre = list(first_args)
        stale = c.index_paths.difference(w.files)
        if feed and stale and all(_deleted_in_place(self.workspace, p, w) for p in stale):
            feed = sorted(set(feed).union(stale))  # `--remove` drops them: one git less
        elif stale:
            # Gone, now ignored, or behind a folder that became a symlink: out of the index.
            self.run(
                ["update-index", *pre, "--force-remove", "-z", "--stdin"],
                input=_zjoin(sorted(stale)),
            )
            pre = []
        if not feed:
            if pre:
                self.run(["update-index", *pre])
            return feed, stale
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
                self.run(
                    ["update-index", *pre, "--force-remove", "-z", "--stdin"],
                    input=_zjoin(sorted(force)),
                )
                pre = []
        self.run(
            [
                *bulk,
                "update-index",
                *pre,
                *first,
                "--add",
                "--remove",
                "--replace",
                "-z",
                "--stdin",
            ],
            input=_zjoin(feed),
        )
        return feed, stale

    def _remember(
        self,
        cache: dict[str, Key] | None,
        new_cache: dict[str, Key],
        feed: list[str],
        racy_known: dict[str, str],
        walk_start: int,
    ) -> None:
        """Keep the scan's stat data and the paths that are racy for the next one."""
        self.stat_cache = new_cache
        candidates = set(feed).union(racy_known if cache is None else self.recent)
        self.recent = {
            p for p in candidates if p in new_cache and racy_key(new_cache[p], walk_start)
        }
        self.oids = {p: oid for p, oid in self.oids.items() if p in self.recent}
        for p in feed:
            self.oids.pop(p, None)  # git hashed it again: the id we knew may be out of date
        for p, oid in racy_known.items():
            if p in self.recent and p not in self.oids:
                self.oids[p] = oid
        self.scanned_at = walk_start

    def _compare_index(
        self, files: Mapping[str, Key]
    ) -> tuple[set[str], list[str], list[str], dict[str, str]]:
        """Without a stat cache (a new process): compare the walk with the index's own stat data,
        to the nanosecond. Returns the index's paths, the paths to feed, those to force (see
        ``scan``) and the racy paths whose content was found unchanged, with their blob ids."""
        try:
            out = self.run(["ls-files", "-z", "-s", "--debug"])
        except GitFailed:
            # An index git cannot read (a kill between git removing the old shared index and
            # renaming the new index into place) is only a cache: drop it, hash every file.
            (self.store / "index").unlink(missing_ok=True)
            return set(), sorted(files), sorted(files), {}
        entries = parse_index(out, os.fsdecode)
        if entries is None:  # not the listing we know: let git hash everything again
            paths = sorted(files)
            listed = self.run(["ls-files", "-z"])
            return {os.fsdecode(p) for p in listed.split(b"\0") if p}, paths, paths, {}
        since = read_scan_time(self.store / "scan-time", self.store / "index")
        changed, force, racy = compare_with_index(files, entries, since)
        oids = {p: entries[p][1] for p in racy}
        unverified = self._unverified(racy, files, oids)
        known = {p: oids[p] for p in set(racy).difference(unverified)}
        return set(entries), sorted(set(changed).union(unverified)), force + unverified, known

    def _unverified(
        self, paths: list[str], keys: Mapping[str, Key], oids: Mapping[str, str]
    ) -> list[str]:
        """The racy ``paths`` git must look at again: those whose blob id we do not know, or
        whose content no longer hashes to it (what git does for its own racy entries)."""
        out = []
        for p in paths:
            oid = oids.get(p)
            if (
                oid is None
                or keys[p][SIZE] > _VERIFY_BYTES
                or blob_id_of(self.workspace, p, keys[p], _VERIFY_BYTES) != oid
            ):
                out.append(p)
        return out

    # ------------------------------------------------------------------ walk & ignore rules

    def walk(self, verify: bool = False) -> WalkResult:
        """Walk the workspace; reuse the last ignore listing unless a folder or ignore file changed.

        With a watcher (``_watch.py``), only the folders it reports as changed are listed again;
        the rest of the last walk is reused (same answer, no ``lstat`` per unchanged file).
        """
        no_rules = not (self.respect_gitignore or self.excludes)
        cached = self.rules_cache

        def rules_for(rel: str) -> IgnoreRules | None:
            if no_rules:
                return None
            rules = cached.get(rel) if cached is not None else None
            return rules if rules is not None else self.ignore_rules(rel)

        # Until this walk completes, what the walker holds is unknown (a folder that cannot be
        # listed stops it half-way, after the watcher's events were consumed).
        walker, self.walker = self.walker, None
        w = self._walk_live(walker, rules_for, verify) if (no_rules or cached is not None) else None
        if w is None or walker is None:
            walker = self._new_walker(rules_for)
            w = walker.full()
        self.rules_cache = None
        if no_rules:
            self.walker = walker
            return w
        used = _repo_rules(walker)
        if cached is not None and not self._signature_holds(w, used, walker.relisted):
            fresh = self._relist(w, used, walker.relisted)
            if fresh != used:
                walker = self._new_walker(lambda rel: fresh.get(rel) or self.ignore_rules(rel))
                w = walker.full()
                used = _repo_rules(walker)
            else:
                walker.rules.update(fresh)  # the same rules, plus what git was asked since
                used = fresh
        self.walker = walker
        self.rules_cache = dict(used)
        self.signature = (w.dir_mtimes, w.dir_names, w.ignore_files, self._info_excludes(used))
        return w

    def _walk_live(
        self,
        walker: Walker | None,
        rules_for: Callable[[str], IgnoreRules | None],
        verify: bool = False,
    ) -> WalkResult | None:
        """The last walk brought up to date from the watcher's events (without a watcher: from
        a check of every folder and file it holds, ``_recheck.py``); ``None``: walk it all."""
        watch = self.watch
        if walker is None:
            return None
        if watch is None:
            walker.rules_for = rules_for
            dirty, fresh, names = self.recheck(walker)
            try:
                return walker.update(dirty, fresh, names=names)
            except NeedFullWalk:
                return None
        changes = watch.read()
        if changes is None:
            return None
        walker.rules_for = rules_for
        try:
            w = walker.update(changes.dirty, changes.fresh, verify=verify, names=changes.names)
        except NeedFullWalk:
            return None
        return None if watch.lost else w

    def _new_walker(self, rules_for: Callable[[str], IgnoreRules | None]) -> Walker:
        """A walker for a full walk, with a fresh watcher (its events start now)."""
        if self.watch is not None:
            if self.watch.broken and self.watch.pid == os.getpid():
                self.watching = False  # e.g. the watch limit: do not try on every scan
            self.watch.close()
        self.watch = Inotify.create(str(self.workspace)) if self.watching else None
        return Walker(
            str(self.workspace), rules_for, max_file_bytes=self.max_file_bytes, watch=self.watch
        )

    def _signature_holds(
        self, w: WalkResult, repos: Mapping[str, object], relisted: Collection[str] | None
    ) -> bool:
        """True when the last ignore listing still applies: no ignore file changed, and every
        folder whose mtime moved still holds the same names (a file replaced by rename moves its
        folder's mtime but cannot make a new ignored file). ``relisted``: the only folders whose
        entries can have changed since the last walk (``None``: any)."""
        if self.signature is None:
            return False
        dirs, names, ignore_files, info = self.signature
        if w.ignore_files != ignore_files:
            return False
        if w.dir_mtimes is not dirs and w.dir_mtimes.keys() != dirs.keys():
            return False  # (the walker gives the same dict again when no folder was listed)
        since = self.scanned_at
        for d in w.dir_mtimes if relisted is None else relisted:
            mtime = w.dir_mtimes.get(d)
            if mtime is None:
                continue  # listed, then dropped with a folder above it: not in either walk
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

    def ignore_rules(
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
            if self.mirror is not None and not repo_rel:
                args.extend(f"--exclude-from={f}" for f in self.mirror.exclude_from)
        args.extend(f"--exclude={pattern}" for pattern in self.excludes)
        if only is not None:
            args.append("--")
            args.extend(only)
        env = self.git.with_env(
            GIT_WORK_TREE=str(root), GIT_INDEX_FILE=str(self.store / "no-index")
        )
        out = self.run(args, env=env, cwd=root)
        rules = IgnoreRules()
        if base is not None:
            rules.files.update(base.files)
            rules.dirs.update(base.dirs)
            rules.checked_files.update(base.checked_files)
        for raw in out.split(b"\0"):
            if raw:
                p = os.fsdecode(raw)
                (rules.dirs if p.endswith("/") else rules.files).add(p)
        if self.respect_gitignore and (rules.files or rules.dirs):
            for p in self._tracked_by_user(root):
                if p in rules.files or _under_any(p, rules.dirs):
                    rules.keep.add(p)
                    parts = p.split("/")
                    for i in range(1, len(parts)):
                        rules.keep_dirs.add("/".join(parts[:i]))
        return rules

    def _relist(
        self, w: WalkResult, used: dict[str, IgnoreRules], relisted: Collection[str] | None
    ) -> dict[str, IgnoreRules]:
        """Fresh ignore rules after folders changed: only the new entries are asked about when
        no ignore input changed (the common case: an agent created or replaced a few files)."""
        sig = self.signature
        if (
            sig is None
            or set(used) != {""}
            or w.ignore_files != sig[2]
            or sig[3] != self._info_excludes(used)
        ):
            return {rel: self.ignore_rules(rel) for rel in used}
        base = used[""]
        new_paths, new_files = new_entries(w, sig[1], base, relisted)
        if not new_paths:
            return used  # every new name is a file that was classified before
        if len(new_paths) > 512:
            return {rel: self.ignore_rules(rel) for rel in used}
        if self._nothing_ignorable(w, base, sig[3]):
            rules = IgnoreRules(checked_files=set(base.checked_files))  # git would list nothing
        else:
            rules = self.ignore_rules("", new_paths, base=base)
        rules.checked_files.update(new_files)
        # git's answer about a new folder classified each file in it too.
        rules.checked_files.update(
            f"{p}/{n}"
            for p in new_paths
            if p in w.dir_mtimes
            for n in w.dir_names.get(p, ())
            if n != ".git" and f"{p}/{n}" not in w.dir_mtimes
        )
        return {"": rules}

    def _nothing_ignorable(
        self, w: WalkResult, base: IgnoreRules, info: tuple[tuple[str, int, int], ...]
    ) -> bool:
        """No ignore input exists (so git, asked, would list nothing): no pattern given, no
        ``.gitignore`` entry in any folder walked, no ``info/exclude`` of the workspace's
        repository (``info``: see ``_info_excludes``), of the one a worker mirrors or of the
        store's own, and nothing ignored so far."""
        if base.files or base.dirs or base.keep or self.excludes or w.ignore_files:
            return False
        if self.mirror is not None and self.mirror.exclude_from:
            return False
        if any(size >= 0 for path, _mtime, size in info if path.endswith("exclude")):
            return False
        if os.path.lexists(self.git.git_dir / "info" / "exclude"):
            return False
        return not any(".gitignore" in names for names in w.dir_names.values())

    def _tracked_by_user(self, root: Path) -> frozenset[str]:
        """Paths the user's own repository at ``root`` tracks (read-only: no lock, no refresh)."""
        if self.mirror is not None and root == self.workspace:
            return self.mirror.keep
        gitdir = user_git_dir(root)
        if gitdir is None:
            return frozenset()
        index = gitdir / "index"
        try:
            st = index.stat()
        except OSError:
            return frozenset()
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        cached = self.user_tracked.get(str(root))
        if cached and cached[0] == key:
            return cached[1]
        env = isolated_env(GIT_DIR=str(gitdir), GIT_WORK_TREE=str(root))
        try:
            out = self.git.run([*_NO_GIT_CONFIG, "ls-files", "-z"], env=env, cwd=root)
            paths = frozenset(os.fsdecode(p) for p in out.split(b"\0") if p)
        except GitFailed:
            paths = frozenset()
        self.user_tracked[str(root)] = (key, paths)
        return paths


# ---------------------------------------------------------------------- helpers


def _zjoin(paths: Iterable[str]) -> bytes:
    return b"".join(os.fsencode(p) + b"\0" for p in paths)


def _repo_rules(walker: Walker) -> dict[str, IgnoreRules]:
    """The ignore rules of each repository the walker met (``""`` is the workspace)."""
    return {rel: r for rel, r in walker.rules.items() if r is not None}


def _deleted_in_place(root: Path, rel: str, w: WalkResult) -> bool:
    """A file deleted from a folder that is still a real folder (not a symlink or gone)."""
    parent = rel.rpartition("/")[0]
    return parent in w.dir_mtimes and not os.path.lexists(os.path.join(root, rel))


def _under_any(path: str, dirs: set[str]) -> bool:
    parts = path.split("/")
    return any("/".join(parts[:i]) + "/" in dirs for i in range(1, len(parts)))
