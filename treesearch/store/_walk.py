"""Walking the workspace: what a capture contains, and what it leaves out (and why).

``Walker`` keeps what it saw per folder, so a later walk can re-list only the folders that a
watcher (``_watch.py``) reports as changed and reuse the rest; ``Walker.full`` walks everything.
Both give the same ``WalkResult`` for the same files on disk (a test compares them after random
edits).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from treesearch.store.values import Skipped

MTIME, CTIME, SIZE, INODE, MODE = range(5)
"""Indexes of a stat key in ``WalkResult.files``."""
DEFAULT_FILE_MODE = 0o644
DEFAULT_EXEC_MODE = 0o755
_S_IFMT = stat.S_IFMT(0o177777)
_S_IFREG = stat.S_IFREG
_S_IFLNK = stat.S_IFLNK

Key = tuple[int, int, int, int, int]


@dataclass
class IgnoreRules:
    """Ignored paths of one repository root, as git lists them (``dir/`` for whole folders)."""

    files: set[str] = field(default_factory=set)
    dirs: set[str] = field(default_factory=set)
    keep: set[str] = field(default_factory=set)
    """Paths the user's own repository tracks: captured even when a pattern ignores them."""
    keep_dirs: set[str] = field(default_factory=set)
    """Every folder that holds a ``keep`` path (so an ignored folder is still entered for it)."""
    checked_files: set[str] = field(default_factory=set, compare=False)
    """Files git was asked about one by one (ignored or not): asked again only when an ignore
    input changes, which makes new rules."""


@dataclass
class WalkResult:
    files: dict[str, Key]
    """Captured regular files and symlinks: relative path -> stat key
    ``(mtime_ns, ctime_ns, size, inode, st_mode)`` (the scan's cache compares these directly)."""
    empty_dirs: list[str]
    """Folders with nothing captured beneath them (leaves only)."""
    skipped: list[Skipped]
    nested_repos: list[str]
    modes: dict[str, int]
    """Permission bits of regular files whose mode is not the default for their exec bit."""
    dir_mtimes: dict[str, int] = field(default_factory=dict)
    """mtime (ns) of every folder walked: a changed one may hold new ignored files."""
    ignore_files: dict[str, tuple[int, int]] = field(default_factory=dict)
    """``.gitignore`` files seen: path -> (mtime ns, size)."""
    dir_names: dict[str, frozenset[str]] = field(default_factory=dict)
    """Entry names of every folder walked (a folder whose names did not change holds no new
    ignored file, even if its mtime moved because a file was replaced)."""
    touched: set[str] | None = None
    """After an incremental walk: every path that was or is in a folder listed again (no other
    path can have changed). ``None`` after a full walk."""


class Watch(Protocol):
    """What the walker needs of a watcher: told about every folder before it is listed."""

    def add(self, abs_dir: str, rel_dir: str) -> None: ...
    def forget(self, rel_dirs: Collection[str]) -> None: ...


class NeedFullWalk(Exception):
    """An incremental walk met a change it does not handle (e.g. a folder became a repository)."""


@dataclass
class _Dir:
    """What one walk saw in one folder."""

    mtime: int
    names: frozenset[str]
    files: dict[str, Key]
    modes: dict[str, int]
    skipped: list[Skipped]
    subdirs: dict[str, bool]
    """Walked sub-folders (relative path -> entered only for files the user tracks)."""
    repo_rel: str
    only_keep: bool
    nested: bool
    ignore: tuple[int, int] | None
    linked: frozenset[str]
    """Files with more than one hard link: a change made through another link is not reported
    for this folder, so a folder holding any is re-listed on every incremental walk."""


def default_mode(st_mode: int) -> int:
    return DEFAULT_EXEC_MODE if st_mode & 0o100 else DEFAULT_FILE_MODE


RulesFor = Callable[[str], "IgnoreRules | None"]


class Walker:
    """Walks ``root`` with ``os.scandir``, one ``lstat`` per entry, and remembers each folder.

    ``rules_for(repo_rel)`` gives the ignore rules of the repository rooted at ``repo_rel`` (``""``
    for the workspace, ``"sub/dir"`` for a nested repository), or ``None`` to ignore nothing.
    ``.git`` entries are never entered or captured, at any depth. ``watch.add`` is called for
    every folder before it is listed, so a change made after the listing is always reported.
    """

    def __init__(
        self,
        root: str,
        rules_for: RulesFor,
        *,
        max_file_bytes: int | None,
        watch: Watch | None = None,
    ) -> None:
        self.root = root
        self.rules_for = rules_for
        self.max_file_bytes = max_file_bytes
        self.watch = watch
        self.dirs: dict[str, _Dir] = {}
        self.rules: dict[str, IgnoreRules | None] = {}
        """Rules of every repository root met (``""`` and nested ones), as ``rules_for`` gave."""
        self._order: list[str] | None = None
        self.listed = 0
        """Folders listed by the last ``full`` or ``update``."""
        self.patched = 0
        """Folders the last ``update`` brought up to date by looking at named entries only."""
        self._touched: set[str] | None = None
        self._written: set[str] = set()
        """Paths the store itself wrote, deleted or chmodded since the last walk."""
        self._new_link = False
        """The walk met a file newly known to have more than one hard link."""
        self.verified = 0
        """Files whose stat data the last ``update`` checked without listing their folder."""
        self.relisted: set[str] | None = None
        """Folders listed by the last ``update`` (``None`` after ``full``): no other folder's
        entries changed."""
        self._totals = _Totals()
        """The union of every folder's record, kept up to date as folders are listed and
        dropped: a walk's answer costs copies of these (in C), not a loop over every folder."""
        self._empty: list[str] | None = None
        """The empty folders as last computed; ``None`` when a folder changed in a way that can
        change them."""
        self._result: WalkResult | None = None
        """The last answer, while no folder was listed or dropped since: a walk that changed
        nothing returns it again (sharing its dicts, which nobody changes), so that it costs
        what the changes cost, not a copy per folder and file."""

    # ---------------------------------------------------------------- walking

    def full(self) -> WalkResult:
        """Walk everything."""
        self.dirs = {}
        self._totals = _Totals()
        self._empty = None
        self._result = None
        self.relisted = None
        self.listed = 0
        self.patched = 0
        self.verified = 0
        self._touched = None
        self._written = set()
        self.rules = {"": self.rules_for("")}
        self._order = None
        self._visit(self.root, "", "", self.rules[""], False, os.lstat(self.root).st_mtime_ns)
        return self.result()

    def wrote(self, paths: Collection[str]) -> None:
        """The store itself changed these paths (a restore): the next ``update`` looks at them
        again (their entries alone, in a folder it knows: ``names``) and counts them as touched,
        so its answer and the store's stat cache, which the restore updated, are compared for
        them."""
        self._written.update(paths)

    def update(
        self,
        dirty: Collection[str],
        fresh: Collection[str],
        *,
        verify: bool = False,
        names: Mapping[str, Collection[str]] | None = None,
    ) -> WalkResult:
        """Re-list the folders in ``dirty`` (relative paths); walk the folders in ``fresh`` (new,
        replaced or moved: whatever was known below them is dropped) from scratch; in the
        folders of ``names`` (folder -> entry names), look at the named entries only (a name an
        event or a check reported: nothing else in that folder changed). Raises
        ``NeedFullWalk`` when that cannot give the same answer as ``full``.

        With ``verify``, every other known file is ``lstat``-ed too, and the folders of those whose
        stat data changed are listed again: the answer then holds every change a full walk sees,
        including those no event reports (writes through a hard link made since the last walk,
        through a shared ``mmap``). A walk that meets a file newly known to have more than one
        link verifies too: its other names may be in folders that got no event."""
        self.listed = 0
        self.patched = 0
        self.verified = 0
        self._touched = set()
        self._new_link = False
        written, self._written = self._written, set()
        todo = set(dirty)
        for rel in fresh:
            if rel in self.dirs:
                self._drop(rel)
            todo.add(_parent(rel))
        again: dict[str, set[str]] = {rel: set(n) for rel, n in (names or {}).items()}
        for path in written:
            parent = _parent(path)
            if parent in self.dirs:
                again.setdefault(parent, set()).add(path[len(parent) + 1 if parent else 0 :])
                continue
            while parent and parent not in self.dirs:
                parent = _parent(parent)
            todo.add(parent)
        todo.update(self._totals.linked)
        patched: set[str] = set()
        for rel in again.keys() - todo:
            if rel in self.dirs and self._patch(rel, again[rel]):
                patched.add(rel)
            else:
                todo.add(rel)
        done: set[str] = set()
        self._relist(todo, done)
        self._touched.update(written)
        if verify or self._new_link:
            self._relist(self._stale_dirs(done), done)
        self.relisted = done | patched
        return self.result()

    def _stale_dirs(self, done: set[str]) -> set[str]:
        """Known folders not listed in this round holding a file whose stat data changed (or
        an oversize file, which may have shrunk)."""
        stale: set[str] = set()
        root = self.root
        stat_at = os.stat
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        checked = 0
        for rel, d in self.dirs.items():
            if rel in done or not d.files:
                continue
            if any(s.reason == "oversize" for s in d.skipped):
                stale.add(rel)
                continue
            try:
                # Names relative to the folder: the kernel does not walk the whole path each time.
                fd = os.open(root + "/" + rel if rel else root, flags)
            except OSError:
                stale.add(rel)
                continue
            cut = len(rel) + 1 if rel else 0
            try:
                for path, key in d.files.items():
                    checked += 1
                    st = stat_at(path[cut:], dir_fd=fd, follow_symlinks=False)
                    if (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode) != key:
                        stale.add(rel)
                        break
            except OSError:
                stale.add(rel)
            finally:
                os.close(fd)
        self.verified = checked
        return stale

    def _relist(self, todo: set[str], done: set[str]) -> None:
        for rel in sorted(todo, key=_depth):
            old = self.dirs.get(rel)
            if old is None or rel in done:
                continue  # gone (its parent drops it) or walked whole in this round
            abs_dir = os.path.join(self.root, rel) if rel else self.root
            try:
                st = os.lstat(abs_dir)
            except OSError as exc:
                raise NeedFullWalk(f"{rel}: {exc.strerror}") from exc
            if not stat.S_ISDIR(st.st_mode):
                raise NeedFullWalk(f"{rel} is no longer a folder")
            repo_rules = self.rules.get(old.repo_rel)
            self._visit(
                abs_dir, rel, old.repo_rel, repo_rules, old.only_keep, st.st_mtime_ns, old, done
            )

    def _visit(  # noqa: C901 - the per-file hot loop stays in one function: no call per file
        self,
        abs_dir: str,
        rel_dir: str,
        repo_rel: str,
        rules: IgnoreRules | None,
        only_keep: bool,
        mtime: int,
        old: _Dir | None = None,
        done: set[str] | None = None,
    ) -> None:
        """List one folder; walk its sub-folders too, except (with ``old``, a re-listing) those
        already known, which keep what was seen in them."""
        self.listed += 1
        if done is not None:
            done.add(rel_dir)
        if self.watch is not None:
            self.watch.add(abs_dir, rel_dir)
        try:
            with os.scandir(abs_dir) as it:
                entries = list(it)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot list folder: {exc.strerror}", rel_dir or ".") from exc
        name_list = [e.name for e in entries]
        names = frozenset(name_list)
        nested = bool(rel_dir) and ".git" in names
        if old is not None and nested != old.nested:
            raise NeedFullWalk(f"{rel_dir} became or stopped being a repository")
        if nested:
            # A nested repository: its files are ours to capture, its own ignore rules apply.
            repo_rel = rel_dir
            if old is not None:
                rules = self.rules.get(rel_dir)
            else:
                rules = self.rules[rel_dir] = self.rules_for(rel_dir)
            only_keep = False
        repo_rules = rules
        files: dict[str, Key] = {}
        modes: dict[str, int] = {}
        skipped: list[Skipped] = []
        subdirs: dict[str, bool] = {}
        ignore: tuple[int, int] | None = None
        linked: list[str] = []
        prefix = rel_dir + "/" if rel_dir else ""
        repo_prefix_len = len(repo_rel) + 1 if repo_rel else 0
        if rules is not None and not (rules.files or rules.dirs or only_keep):
            rules = None  # nothing is ignored here: skip the checks in the hot loop
        max_bytes = self.max_file_bytes
        known = old.subdirs if old is not None else None
        # Hot loop (one iteration per file): kept free of function calls that are not needed.
        for entry, name in zip(entries, name_list):  # noqa: B905 - one list made from the other
            if name == ".git":
                continue
            rel = prefix + name
            if entry.is_dir(follow_symlinks=False):  # d_type: no system call
                sub_only_keep = only_keep
                if rules is not None:
                    in_repo = rel[repo_prefix_len:]
                    if only_keep or (in_repo + "/") in rules.dirs:
                        if in_repo not in rules.keep_dirs:
                            continue
                        sub_only_keep = True
                subdirs[rel] = sub_only_keep
                if known is not None and known.get(rel) == sub_only_keep and rel in self.dirs:
                    continue  # known folder: its own watch reports changes inside it
                if rel in self.dirs:
                    self._drop(rel)
                self._visit(
                    entry.path,
                    rel,
                    repo_rel,
                    repo_rules,
                    sub_only_keep,
                    entry.stat(follow_symlinks=False).st_mtime_ns,
                    None,
                    done,
                )
                continue
            if rules is not None:
                in_repo = rel[repo_prefix_len:]
                if (only_keep or in_repo in rules.files) and in_repo not in rules.keep:
                    continue
            st = entry.stat(follow_symlinks=False)
            mode = st.st_mode
            fmt = mode & _S_IFMT
            if fmt == _S_IFREG:
                if max_bytes is not None and st.st_size > max_bytes:
                    skipped.append(Skipped(rel, "oversize", f"{st.st_size} bytes > {max_bytes}"))
                    continue
                files[rel] = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, mode)
                if st.st_nlink > 1:
                    linked.append(rel)
                if name == ".gitignore":
                    ignore = (st.st_mtime_ns, st.st_size)
                perm = mode & 0o7777
                if perm != (DEFAULT_EXEC_MODE if mode & 0o100 else DEFAULT_FILE_MODE):
                    modes[rel] = perm
            elif fmt == _S_IFLNK:
                files[rel] = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, mode)
            else:
                skipped.append(Skipped(rel, "special", _kind(mode)))
        if known is not None:
            for gone in known.keys() - subdirs.keys():
                if gone in self.dirs:
                    self._drop(gone)
        if old is None or known != subdirs:
            self._order = None
        if (
            linked
            and self._touched is not None
            and (old is None or not old.linked.issuperset(linked))
        ):
            self._new_link = True
        if self._touched is not None:
            self._touched.update(files)
            if old is not None:
                self._touched.update(old.files)
        record = _Dir(
            mtime,
            names,
            files,
            modes,
            skipped,
            subdirs,
            repo_rel,
            only_keep,
            nested,
            ignore,
            frozenset(linked),
        )
        before = self.dirs.get(rel_dir)
        if before is not None:
            self._totals.remove(rel_dir, before)
            if bool(before.files) != bool(files):
                self._empty = None
        else:
            self._empty = None
        self.dirs[rel_dir] = record
        self._totals.add(rel_dir, record)
        self._result = None

    def _patch(self, rel_dir: str, names: Collection[str]) -> bool:  # noqa: C901 - _visit's cases
        """Bring the record of the known folder ``rel_dir`` up to date by looking at ``names``
        only (the entries an event or a check named; nothing else in it changed): the record a
        listing would make, without an ``lstat`` of every other entry. Each name is classified
        as ``_visit`` classifies an entry. False, with nothing changed, when only a listing
        will do: a folder (new, gone or replaced), a special, oversize or hard-linked file, a
        ``.gitignore`` or ``.git`` among them, or a folder that holds such entries."""
        old = self.dirs[rel_dir]
        if old.skipped or old.linked or old.nested:
            return False
        abs_dir = os.path.join(self.root, rel_dir) if rel_dir else self.root
        prefix = rel_dir + "/" if rel_dir else ""
        try:
            st = os.lstat(abs_dir)  # before the entries, as ``_visit`` takes it
        except OSError:
            return False
        if not stat.S_ISDIR(st.st_mode):
            return False
        rules = self.rules.get(old.repo_rel)
        only_keep = old.only_keep
        if rules is not None and not (rules.files or rules.dirs or only_keep):
            rules = None
        repo_prefix_len = len(old.repo_rel) + 1 if old.repo_rel else 0
        max_bytes = self.max_file_bytes
        found: dict[str, Key | None] = {}
        """name -> its key (captured), ``None``: there but not captured (ignored)"""
        gone: list[str] = []
        for name in names:
            rel = prefix + name
            if name in (".git", ".gitignore", "", ".", "..") or "/" in name or rel in old.subdirs:
                return False
            try:
                est = os.lstat(abs_dir + "/" + name)
            except FileNotFoundError:
                gone.append(name)
                continue
            except OSError:
                return False
            mode = est.st_mode
            fmt = mode & _S_IFMT
            if fmt not in (_S_IFREG, _S_IFLNK):
                return False  # a folder (listed with its parent) or a special file
            if rules is not None:
                in_repo = rel[repo_prefix_len:]
                if (only_keep or in_repo in rules.files) and in_repo not in rules.keep:
                    found[name] = None
                    continue
            if fmt == _S_IFREG and (
                est.st_nlink > 1 or (max_bytes is not None and est.st_size > max_bytes)
            ):
                return False
            found[name] = (est.st_mtime_ns, est.st_ctime_ns, est.st_size, est.st_ino, mode)
        had_files = bool(old.files)
        totals = self._totals
        for name in [*gone, *found]:
            rel = prefix + name
            if old.files.pop(rel, None) is not None:
                del totals.files[rel]
            if old.modes.pop(rel, None) is not None:
                del totals.modes[rel]
        for name, key in found.items():
            if key is None:
                continue
            rel = prefix + name
            old.files[rel] = totals.files[rel] = key
            perm = key[MODE] & 0o7777
            if key[MODE] & _S_IFMT == _S_IFREG and perm != default_mode(key[MODE]):
                old.modes[rel] = totals.modes[rel] = perm
        old.names = old.names.difference(gone).union(found)
        old.mtime = st.st_mtime_ns
        totals.dir_mtimes[rel_dir] = old.mtime
        totals.dir_names[rel_dir] = old.names
        if had_files != bool(old.files):
            self._empty = None
        self._result = None
        self.patched += 1
        assert self._touched is not None
        self._touched.update(prefix + n for n in names)
        return True

    def _drop(self, rel: str) -> None:
        """Forget ``rel`` and everything below it."""
        below = rel + "/"
        gone = [d for d in self.dirs if d == rel or d.startswith(below)]
        for d in gone:
            if self._touched is not None:
                self._touched.update(self.dirs[d].files)
            self._totals.remove(d, self.dirs[d])
            del self.dirs[d]
            self.rules.pop(d, None)
        self._order = None
        self._result = None
        if self.watch is not None:
            self.watch.forget(gone)

    # ---------------------------------------------------------------- the answer

    def result(self) -> WalkResult:
        """The answer of the last walk (the same dicts as the previous answer when no folder
        was listed or dropped since: callers must not change them)."""
        touched = None if self._touched is None else set(self._touched)
        if self._result is not None:
            return replace(self._result, touched=touched)
        t = self._totals
        self._result = WalkResult(
            dict(t.files),
            self._empty_dirs(),
            sorted(t.skipped.values(), key=lambda s: s.path),
            sorted(t.nested),
            dict(t.modes),
            dict(t.dir_mtimes),
            dict(t.ignore_files),
            dict(t.dir_names),
            touched,
        )
        return self._result

    def _empty_dirs(self) -> list[str]:
        """Folders with nothing captured below them, counting an empty sub-folder as content."""
        if self._order is None:
            self._order = sorted(self.dirs, key=_depth, reverse=True)
            self._empty = None
        if self._empty is None:
            self._empty = self._count_empty()
        return list(self._empty)

    def _count_empty(self) -> list[str]:
        assert self._order is not None
        dirs = self.dirs
        counts: dict[str, int] = {}
        empty: list[str] = []
        for rel in self._order:
            d = dirs[rel]
            n = len(d.files)
            for sub, sub_only_keep in d.subdirs.items():
                c = counts[sub]
                if c == 0 and not sub_only_keep:
                    empty.append(sub)
                    c = 1
                n += c
            counts[rel] = n
        return empty


@dataclass
class _Totals:
    """The union of the folder records of a walker (see ``Walker._totals``)."""

    files: dict[str, Key] = field(default_factory=dict)
    modes: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, Skipped] = field(default_factory=dict)
    nested: set[str] = field(default_factory=set)
    dir_mtimes: dict[str, int] = field(default_factory=dict)
    dir_names: dict[str, frozenset[str]] = field(default_factory=dict)
    ignore_files: dict[str, tuple[int, int]] = field(default_factory=dict)
    linked: set[str] = field(default_factory=set)

    def add(self, rel: str, d: _Dir) -> None:
        self.files.update(d.files)
        if d.modes:
            self.modes.update(d.modes)
        for s in d.skipped:
            self.skipped[s.path] = s
        if d.nested:
            self.nested.add(rel)
        self.dir_mtimes[rel] = d.mtime
        self.dir_names[rel] = d.names
        if d.ignore is not None:
            self.ignore_files[_ignore_file(rel)] = d.ignore
        if d.linked:
            self.linked.add(rel)

    def remove(self, rel: str, d: _Dir) -> None:
        for p in d.files:
            del self.files[p]
        for p in d.modes:
            del self.modes[p]
        for s in d.skipped:
            del self.skipped[s.path]
        self.nested.discard(rel)
        del self.dir_mtimes[rel]
        del self.dir_names[rel]
        self.ignore_files.pop(_ignore_file(rel), None)
        self.linked.discard(rel)


def _ignore_file(rel: str) -> str:
    return rel + "/.gitignore" if rel else ".gitignore"


def walk(
    root: str,
    rules_for: RulesFor,
    *,
    max_file_bytes: int | None,
) -> WalkResult:
    """Walk ``root`` once (see ``Walker``)."""
    return Walker(root, rules_for, max_file_bytes=max_file_bytes).full()


def _depth(rel: str) -> int:
    return rel.count("/") + 1 if rel else 0


def _parent(rel: str) -> str:
    return rel.rpartition("/")[0]


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISBLK(mode):
        return "block device"
    return f"file type {stat.S_IFMT(mode):o}"
