"""What a killed search leaves behind, and how it goes: process groups and scratch folders.

A search runs its tests and agent commands in their own sessions (``sandbox.run``), so a SIGKILL
of the search does not reach them through the terminal's process group. Three layers make them
die with it:

* **parent-death signal**: the direct child of ``sandbox.run`` gets ``PR_SET_PDEATHSIG`` =
  SIGKILL (Linux), so it dies with the thread that started it. Its own children escape that.
* **watchdog**: the first tracked group starts one small process per search process (its own
  session, ignoring SIGINT/SIGTERM/SIGHUP) that waits for the end of a pipe only the search
  holds. When the search dies, however it dies, the pipe closes and the watchdog kills every
  process group the search had registered, grandchildren included.
* **reaper**: every group is registered in a file ``procs/<owner>.json`` under the temp root,
  removed when the search exits normally. ``reap`` (run by the next search, and by ``treesearch
  clean``) kills the groups of registry files whose owner is dead, for when the watchdog died too.

A process is identified by its pid, its start time (``/proc/PID/stat``, clock ticks since boot),
the boot id and its pid namespace, so a recycled pid is never mistaken for the process that made a
record (a record made in another pid namespace, a container sharing the temp folder, counts as
alive: it is never acted on). A group
is killed only while its leader is gone or is still the recorded process.

Scratch folders (``scratch_dir``, and ``process_dir`` for one kept for the process's life) carry
the owner in their name and are removed on exit; ``reap`` removes those whose owner is dead
(killed, or a machine that rebooted), never a live process's.

Everything lives under the temp root ``$TMPDIR/treesearch-<uid>`` (mode 0700, owned by the user).
Without ``/proc`` (macOS) the reaper errs on the safe side: a pid that exists counts as alive and
no group is killed. The module never prints.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "Owner",
    "ReapReport",
    "die_with_parent",
    "name_process",
    "owner_alive",
    "process_dir",
    "process_owner",
    "reap",
    "scratch_dir",
    "temp_root",
    "track_group",
    "untrack_group",
]

_PR_SET_PDEATHSIG = 1
_PR_SET_NAME = 15
_OWNER = r"(?P<pid>\d+)-(?P<start>\d+)-(?P<boot>[0-9a-f]+)-(?P<ns>[0-9a-f]+)"
_SCRATCH = re.compile(rf"^(?P<kind>[a-z]+)-{_OWNER}-")
_RECORD = re.compile(rf"^\.?{_OWNER}\.json(\.[0-9a-f]+\.tmp)?$")


# --- identity of processes ------------------------------------------------------------------------


def _read_boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read().strip().replace("-", "")[:8] or "0"
    except OSError:
        return "0"


def _read_pid_namespace() -> str:
    try:  # "pid:[4026531836]"
        return format(int(os.readlink("/proc/self/ns/pid")[5:-1]), "x")
    except (OSError, ValueError):
        return "0"


_BOOT = _read_boot_id()
_NS = _read_pid_namespace()


def _stat_fields(pid: int) -> list[bytes] | None:
    """Fields of ``/proc/PID/stat`` after the command name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_time(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot; None if it is gone, a zombie, or unknown."""
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 20 or fields[0] == b"Z":
        return None
    return int(fields[19])


@dataclass(frozen=True)
class Owner:
    """A process as the reaper knows it: pid, start time (0: unknown), boot id, pid namespace."""

    pid: int
    start: int
    boot: str
    ns: str = _NS

    @property
    def token(self) -> str:
        return f"{self.pid}-{self.start}-{self.boot}-{self.ns}"


def process_owner(pid: int | None = None) -> Owner:
    """The identity of ``pid`` (default: this process)."""
    pid = os.getpid() if pid is None else pid
    return Owner(pid, start_time(pid) or 0, _BOOT)


def owner_alive(owner: Owner) -> bool:
    """True while the process that ``owner`` describes runs (a zombie counts as dead)."""
    if owner.boot != _BOOT:
        return False
    if owner.ns != _NS:  # another pid namespace (a container sharing TMPDIR): cannot tell
        return True
    if os.path.isdir("/proc") and owner.start == 0:  # start unknown: running is all we can ask
        return start_time(owner.pid) is not None
    if not os.path.isdir("/proc"):
        try:  # no way to tell a recycled pid: a pid that exists counts as alive
            os.kill(owner.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return start_time(owner.pid) == owner.start


# --- the temp root and scratch folders ------------------------------------------------------------


def temp_root(base: str | os.PathLike[str] | None = None, *, create: bool = True) -> Path:
    """``<base>/treesearch-<uid>`` (base: the system temp folder), created 0700 if needed.

    Raises:
        OSError: the folder cannot be created (or is missing, with ``create=False``), or it
            exists and is not a folder of this user.
    """
    root = Path(base if base is not None else tempfile.gettempdir()) / f"treesearch-{os.getuid()}"
    if create:
        with contextlib.suppress(FileExistsError):
            root.mkdir(mode=0o700, parents=True)
    info = os.lstat(root)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise PermissionError(
            f"{root} is not a folder owned by this user: remove it or set TMPDIR elsewhere"
        )
    return root


@contextlib.contextmanager
def scratch_dir(kind: str, base: str | os.PathLike[str] | None = None) -> Iterator[Path]:
    """A fresh folder ``<temp root>/<kind>-<owner>-XXXX``, removed on exit (or by ``reap``)."""
    if not re.fullmatch(r"[a-z]+", kind):
        raise ValueError(f"scratch folder kind must be lowercase letters, not {kind!r}")
    folder = Path(tempfile.mkdtemp(prefix=f"{kind}-{process_owner().token}-", dir=temp_root(base)))
    try:
        yield folder
    finally:
        remove_tree(folder)


_KEPT: dict[tuple[int, str, str], Path] = {}
_KEPT_LOCK = threading.Lock()


def process_dir(kind: str, base: str | os.PathLike[str] | None = None) -> Path:
    """A folder ``<temp root>/<kind>-<owner>-XXXX`` kept for this process's life (per ``kind``
    and temp root): made on first use (and again if it went), removed at exit, or by ``reap``
    once the process is gone; a forked child makes its own and never removes its parent's.
    For what every test run would otherwise make and remove again (``scratch_dir``)."""
    root = temp_root(base)
    key = (os.getpid(), kind, str(root))
    folder = _KEPT.get(key)
    if folder is not None and os.path.isdir(folder):
        return folder
    with _KEPT_LOCK:
        folder = _KEPT.get(key)
        if folder is None or not os.path.isdir(folder):
            if not re.fullmatch(r"[a-z]+", kind):
                raise ValueError(f"scratch folder kind must be lowercase letters, not {kind!r}")
            token = process_owner().token
            folder = Path(tempfile.mkdtemp(prefix=f"{kind}-{token}-", dir=root))
            _KEPT[key] = folder
            atexit.register(_remove_own, folder, os.getpid())
    return folder


def _remove_own(folder: Path, pid: int) -> None:
    if os.getpid() == pid:  # (exit handlers are inherited through fork)
        remove_tree(folder)


def remove_tree(path: Path) -> bool:
    """Delete ``path`` and everything in it, opening read-only folders first; never follows links.

    Returns False when something could not be removed (the rest is gone).
    """
    if path.is_symlink() or not path.is_dir():
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return not os.path.lexists(path)
    for folder, dirs, _files in os.walk(path):
        for name in dirs:
            full = os.path.join(folder, name)
            if not os.path.islink(full):
                with contextlib.suppress(OSError):
                    os.chmod(full, stat.S_IRWXU)
    shutil.rmtree(path, ignore_errors=True)
    return not os.path.lexists(path)


# --- parent-death signal --------------------------------------------------------------------------


def _load_prctl() -> object | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _load_prctl()


def die_with_parent(parent: int) -> None:
    """In a freshly forked child: get SIGKILL when the parent's thread ends (Linux only).

    ``parent`` is the pid of the process that forked; if it is already gone the child ends now.
    """
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)  # type: ignore[operator]
        if os.getppid() != parent:  # the parent died before the signal was armed
            os.kill(os.getpid(), signal.SIGKILL)


def name_process(name: str) -> None:
    """Set this process's name as ``ps`` and ``/proc/PID/comm`` show it (Linux only; at most 15
    bytes kept): a process forked without ``exec`` otherwise looks like its parent."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)  # type: ignore[operator]


# --- registry of live process groups and the watchdog ---------------------------------------------

# Run by the watchdog: wait for the end of stdin (the search is gone), then kill the groups the
# registry file lists whose leader is gone or still the recorded process. Self-contained, so it
# runs with `python -I -S`, fast and whatever the search's import path.
_WATCHDOG = """
import json, os, signal, sys
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
announced = b""
while True:
    chunk = os.read(0, 4096)
    if not chunk:
        break
    announced += chunk
groups = []
for line in announced.splitlines():  # "pgid start" lines the sandbox's children wrote at birth
    try:
        pgid, start = line.split()
        groups.append((int(pgid), int(start)))
    except ValueError:
        pass
try:
    with open(sys.argv[1]) as f:
        groups += [tuple(g) for g in json.load(f)["groups"]]
except (OSError, ValueError, KeyError):
    pass
for pgid, start in sorted(set(groups)):
    try:
        with open(f"/proc/{pgid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        if start and fields[0] != b"Z" and int(fields[19]) != start:
            continue  # pid recycled by another process: not our group
    except (OSError, IndexError, ValueError):
        pass
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
try:
    os.unlink(sys.argv[1])
except OSError:
    pass
"""


_WATCHDOGS: list[subprocess.Popen[bytes]] = []


class _Registry:
    """This process's live groups, mirrored to its registry file; one watchdog per process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.groups: dict[int, int] = {}
        self.file: Path | None = None
        self.watch_fd: int | None = None
        self.record_fd: int | None = None
        self.written = 0
        """The longest record written to ``record_fd`` so far (shorter ones are padded)."""

    def reset_after_fork(self) -> None:
        # A forked child is another search process: its own groups, file and watchdog.
        for fd in (self.watch_fd, self.record_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.__init__()  # type: ignore[misc]

    def _setup(self) -> Path:
        if self.file is not None:
            return self.file
        procs = temp_root() / "procs"
        procs.mkdir(mode=0o700, exist_ok=True)
        file = procs / f"{process_owner().token}.json"
        read_end, write_end = os.pipe()
        try:
            watchdog = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WATCHDOG, str(file)],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        _WATCHDOGS.append(watchdog)  # it outlives this object (and a fork's reset)
        self.watch_fd, self.file = write_end, file
        return file

    def _write(self) -> None:
        """Rewrite the record in place: one ``pwrite`` of the whole JSON at offset 0, padded
        with spaces (JSON's own whitespace) to the longest record written before, so no
        shorter record ever leaves a tail. Only a process's own end can interrupt its write,
        and a single small write is not cut short by that; the readers (the watchdog, ``reap``)
        read a record only once its process is gone. A temporary file and a rename per update
        (two per test run) made a new inode each time, which costs up to ~1.5 ms where inodes
        are slow to allocate (ext4 without a journal skips those freed in the last ~30 s);
        this is a system call. The file stays (``{"groups": []}``) while the process lives:
        its watchdog removes it at the end, ``reap`` if the watchdog died too."""
        assert self.file is not None
        data = json.dumps({"groups": sorted(self.groups.items())}).encode("ascii")
        fd = self._record()
        os.pwrite(fd, data.ljust(self.written), 0)
        self.written = max(self.written, len(data))

    def _record(self) -> int:
        """The open record file, opened again (and so made again) when it was removed (a
        temporary-file cleaner, say): a record nobody can read protects nothing."""
        assert self.file is not None
        if self.record_fd is not None:
            try:
                gone = os.fstat(self.record_fd).st_nlink == 0
            except OSError:
                gone = True
            if not gone:
                return self.record_fd
            with contextlib.suppress(OSError):
                os.close(self.record_fd)
            self.record_fd = None
        fd = os.open(self.file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self.record_fd, self.written = fd, os.fstat(fd).st_size
        return fd

    def add(self, pgid: int) -> None:
        with self.lock:
            self._setup()
            self.groups[pgid] = start_time(pgid) or 0
            self._write()

    def remove(self, pgid: int) -> None:
        with self.lock:
            if self.groups.pop(pgid, None) is not None:
                self._write()


_REGISTRY = _Registry()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_REGISTRY.reset_after_fork)


def prepare_tracking() -> None:
    """Create the temp root, the registry folder and the watchdog now (they are made once).

    Raises:
        OSError: the temp root cannot be used, or the watchdog cannot start.
    """
    with _REGISTRY.lock:
        _REGISTRY._setup()


def announce_fd() -> int | None:
    """A duplicate of the write end of the watchdog's pipe (after ``prepare_tracking``), for
    ``announce_self`` in a child; the caller closes it once the child has started.

    A duplicate, because subprocess runs the at-fork hooks when it has a ``preexec_fn``, and the
    registry's hook closes its own descriptor in every forked child.
    """
    with _REGISTRY.lock:
        return None if _REGISTRY.watch_fd is None else os.dup(_REGISTRY.watch_fd)


def announce_self(fd: int | None) -> None:
    """In a freshly forked group leader, before exec: tell the watchdog "pgid start".

    ``track_group`` runs in the parent only after the child has started, so a SIGKILL of the
    parent in between would leave the group unknown to the watchdog; this closes that window.
    The line is shorter than PIPE_BUF, so the write is atomic.
    """
    if fd is None:
        return
    pid = os.getpid()
    with contextlib.suppress(OSError):
        os.write(fd, f"{pid} {start_time(pid) or 0}\n".encode("ascii"))


def track_group(pgid: int) -> None:
    """Record the live process group ``pgid`` (led by process ``pgid``) of this process.

    Raises:
        OSError: the registry file cannot be written.
    """
    _REGISTRY.add(pgid)


def untrack_group(pgid: int) -> None:
    """Forget group ``pgid`` once it has ended (the registry file stays, with the groups left,
    until the process ends)."""
    _REGISTRY.remove(pgid)


# --- the reaper -----------------------------------------------------------------------------------


@dataclass
class ReapReport:
    """What ``reap`` found of dead search processes, and what it did (or would do)."""

    groups: list[dict[str, object]] = field(default_factory=list)
    """Process groups ended: pgid, the pids found in it, the owner token."""
    folders: list[str] = field(default_factory=list)
    """Scratch folders removed."""
    dry_run: bool = False

    def __bool__(self) -> bool:
        return bool(self.groups or self.folders)

    def to_dict(self) -> dict[str, object]:
        return {"groups": self.groups, "folders": self.folders, "dry_run": self.dry_run}


def _group_members(pgid: int) -> list[int]:
    members = []
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                fields = _stat_fields(int(entry))
                if fields and len(fields) > 2 and fields[0] != b"Z" and int(fields[2]) == pgid:
                    members.append(int(entry))
    return sorted(members)


def _ours(pgid: int, start: int) -> bool:
    """False when pid ``pgid`` now belongs to another process than the recorded leader."""
    if not os.path.isdir("/proc"):
        return False  # cannot tell: never kill
    now = start_time(pgid)
    return now is None or start == 0 or now == start


def reap(
    base: str | os.PathLike[str] | None = None,
    *,
    dry_run: bool = False,
    only_groups: set[int] | None = None,
    only_folders: set[str] | None = None,
) -> ReapReport:
    """End the process groups and remove the scratch folders of dead treesearch processes.

    Looks only under the temp root (``base`` as for ``temp_root``); a record or folder of a live
    process is never touched. With ``dry_run`` nothing is killed or removed; ``only_groups`` and
    ``only_folders`` (when given) limit the work to those groups and folders.
    """
    report = ReapReport(dry_run=dry_run)
    try:
        root = temp_root(base, create=False)
    except OSError:
        return report
    with contextlib.suppress(FileNotFoundError):
        for record in sorted((root / "procs").iterdir()):
            _reap_record(record, report, dry_run=dry_run, only_groups=only_groups)
    for entry in sorted(root.iterdir()):
        m = _SCRATCH.match(entry.name)
        if not m or not entry.is_dir() or entry.is_symlink():
            continue
        if only_folders is not None and str(entry) not in only_folders:
            continue
        if owner_alive(Owner(int(m["pid"]), int(m["start"]), m["boot"], m["ns"])):
            continue
        report.folders.append(str(entry))
        if not dry_run:
            remove_tree(entry)
    return report


def _reap_record(
    record: Path, report: ReapReport, *, dry_run: bool, only_groups: set[int] | None
) -> None:
    """End the process groups of one registry record of a dead process, then drop the record
    (kept when ``only_groups`` left some of its groups alone)."""
    m = _RECORD.match(record.name)
    if not m:
        return
    owner = Owner(int(m["pid"]), int(m["start"]), m["boot"], m["ns"])
    if owner_alive(owner):
        return
    if record.name.startswith("."):  # a registry update cut short by the kill
        if not dry_run:
            with contextlib.suppress(FileNotFoundError):
                record.unlink()
        return
    try:
        groups = json.loads(record.read_text(encoding="ascii"))["groups"]
    except (OSError, ValueError, KeyError):
        groups = []
    skipped = False
    for pgid, start in groups:
        if only_groups is not None and int(pgid) not in only_groups:
            skipped = True
            continue
        if not _ours(int(pgid), int(start)):
            continue
        members = _group_members(int(pgid))
        if not members:
            continue
        report.groups.append({"pgid": pgid, "pids": members, "owner": owner.token})
        if not dry_run:
            with contextlib.suppress(OSError):
                os.killpg(int(pgid), signal.SIGKILL)
    if not dry_run and not skipped:
        with contextlib.suppress(FileNotFoundError):
            record.unlink()
