"""The process half of ``treesearch.sandbox`` (see its docstring): ``run`` a command in its own
process group with a timeout, resource ``Limits`` and output cut at both ends. Import these names
from ``treesearch.sandbox``."""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from treesearch import lifecycle
from treesearch._environ import inherited
from treesearch.errors import SandboxError
from treesearch.isolation import Isolation
from treesearch.types import ProcessResult

__all__ = ["Limits", "run"]

StrPath: TypeAlias = "str | os.PathLike[str]"

_READ_CHUNK = 64 * 1024
_STDIN_CHUNK = 64 * 1024
# How long run() keeps reading after the group is gone: enough to collect what is still buffered
# in the pipes, short enough that a process which escaped the group (setsid) while holding the
# pipe open cannot hang the caller.
_DRAIN_SECONDS = 1.0
_GRACE_POLL_SECONDS = 0.02


@dataclass(frozen=True)
class Limits:
    """Resource limits set with ``setrlimit`` in the child; ``None`` keeps the inherited limit.

    A limit above the inherited hard limit is lowered to it. The limits apply to each process of
    the command separately (that is how rlimits work), not to the group as a whole.
    """

    cpu_seconds: int | None = None
    """CPU seconds (``RLIMIT_CPU``); then SIGXCPU, and SIGKILL one second later."""
    memory_bytes: int | None = None
    """Address-space bytes (``RLIMIT_AS``); allocations beyond fail. Not enforced on macOS."""
    file_size_bytes: int | None = None
    """Largest file the process may write, in bytes (``RLIMIT_FSIZE``); beyond: SIGXFSZ/EFBIG."""
    open_files: int | None = None
    """Highest file descriptor number plus one (``RLIMIT_NOFILE``)."""

    def __post_init__(self) -> None:
        for name in ("cpu_seconds", "memory_bytes", "file_size_bytes", "open_files"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                raise SandboxError(
                    f"Limits.{name} must be a non-negative int or None, not {value!r}"
                )

    def _rlimits(self) -> list[tuple[int, int, int]]:
        """``(resource, soft, hard)`` triples, clamped to this process's hard limits."""
        wanted: list[tuple[int, int | None, int]] = [
            # The extra second lets a process catch SIGXCPU before the hard limit's SIGKILL.
            (resource.RLIMIT_CPU, self.cpu_seconds, 1),
            (resource.RLIMIT_AS, self.memory_bytes, 0),
            (resource.RLIMIT_FSIZE, self.file_size_bytes, 0),
            (resource.RLIMIT_NOFILE, self.open_files, 0),
        ]
        triples = []
        for res, value, slack in wanted:
            if value is None:
                continue
            _, hard_now = resource.getrlimit(res)
            soft, hard = value, value + slack
            if hard_now != resource.RLIM_INFINITY:
                soft, hard = min(soft, hard_now), min(hard, hard_now)
            triples.append((res, soft, hard))
        return triples


class _Capture:
    """Keeps the first ``head_limit`` and the last ``tail_limit`` bytes of a stream."""

    def __init__(self, limit: int) -> None:
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def feed(self, data: bytes) -> None:
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        if len(data) >= self.tail_limit:
            self.dropped += len(self.tail) + len(data) - self.tail_limit
            self.tail = bytearray(data[len(data) - self.tail_limit :])
            return
        self.tail += data
        excess = len(self.tail) - self.tail_limit
        if excess > 0:
            del self.tail[:excess]
            self.dropped += excess

    def text(self) -> str:
        if not self.dropped:
            return bytes(self.head + self.tail).decode("utf-8", errors="replace")
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        return f"{head}\n[... {self.dropped} bytes dropped ...]\n{tail}"


def _child_env(
    env: Mapping[str, str] | None, extra: Mapping[str, str] | None
) -> dict[str, str] | None:
    if not extra:
        return dict(env) if env is not None else None
    return inherited(extra) if env is None else {**env, **extra}


def run(
    cmd: str | Sequence[str],
    cwd: StrPath,
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    limits: Limits | None = None,
    stdin: bytes | str | None = None,
    output_limit: int = 64 * 1024,
    kill_grace: float = 2.0,
    extra_env: Mapping[str, str] | None = None,
    isolation: Isolation | None = None,
) -> ProcessResult:
    """Run ``cmd`` in ``cwd`` in a new session and return its result; never leaves processes behind.

    Args:
        cmd: a shell command line (run with ``/bin/sh -c``) or an argument vector (no shell).
        cwd: folder to run in; must exist.
        timeout: wall-clock seconds before the whole process group is ended: SIGTERM to the
            group, then SIGKILL to what is left of it after ``kill_grace`` seconds (sooner when
            every member has exited; that check needs ``/proc``, elsewhere the full grace runs).
        env: the complete environment of the child; ``None`` inherits this process's environment.
        limits: resource limits for the child (``None``: inherited limits).
        stdin: input to feed (``str`` is encoded as UTF-8); ``None`` connects ``/dev/null``, so
            a command that reads its input never waits for a terminal.
        output_limit: bytes kept of each of stdout and stderr: the first half and the last half,
            with a ``[... N bytes dropped ...]`` line between them. Memory use stays bounded
            whatever the command prints.
        kill_grace: seconds between SIGTERM and SIGKILL on timeout.
        extra_env: variables set on top of ``env`` (or of the inherited environment).
        isolation: confine the command (``treesearch.isolation``): ``cwd`` is then the only
            writable folder (with a private ``/tmp``), and the network is off unless allowed.

    Group members still running when the main process exits normally are killed with SIGKILL.
    If this process is killed, the group dies with it: a parent-death signal ends the main
    process, and ``treesearch.lifecycle``'s watchdog (or the next search's reaper) the rest.
    A process that left the group (``setsid``) cannot be reached; if it keeps an output pipe
    open, reading stops about a second after the group is gone.

    Raises:
        SandboxError: ``cwd`` is not a folder, an argument is invalid, or the limits could not be
            applied. A program that cannot be started is not an error: the result has
            ``exit_code=None`` and the reason in ``stderr``.
    """
    if isinstance(cmd, str):
        argv = ["/bin/sh", "-c", cmd]
    else:
        argv = [os.fspath(arg) for arg in cmd]
        if not argv:
            raise SandboxError("run() needs a non-empty command")
    if not timeout > 0:
        raise SandboxError(f"run() timeout must be positive, not {timeout!r}")
    if output_limit < 0:
        raise SandboxError(f"run() output_limit must be >= 0, not {output_limit!r}")
    if kill_grace < 0:
        raise SandboxError(f"run() kill_grace must be >= 0, not {kill_grace!r}")
    cwd_str = os.fspath(cwd)
    if not os.path.isdir(cwd_str):
        raise SandboxError(f"cannot run {argv[0]!r}: working folder {cwd_str!r} does not exist")
    stdin_data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
    if isolation is not None and isolation.active:
        argv = isolation.wrap(argv, cwd_str, _child_env(env, extra_env))

    # Computed before the fork, so that the child only calls prctl and setrlimit.
    try:  # the registry of live groups, so that a killed search takes its groups along
        lifecycle.prepare_tracking()
    except OSError as exc:
        raise SandboxError(f"cannot run {argv[0]!r}: {exc}") from exc
    announce = lifecycle.announce_fd()
    preexec: Callable[[], None] = functools.partial(
        _child_setup, os.getpid(), limits._rlimits() if limits is not None else [], announce
    )

    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd_str,
            env=_child_env(env, extra_env),
            stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=preexec,
            close_fds=True,
        )
    except subprocess.SubprocessError as exc:
        raise SandboxError(f"cannot apply limits {limits!r} to {argv[0]!r}: {exc}") from exc
    except OSError as exc:
        if exc.filename == cwd_str:  # the folder vanished between the check and the start
            raise SandboxError(f"cannot run {argv[0]!r} in {cwd_str!r}: {exc.strerror}") from exc
        return ProcessResult(
            exit_code=None,
            timed_out=False,
            seconds=time.monotonic() - started,
            stdout="",
            stderr=f"cannot start {argv[0]!r}: {exc.strerror or exc}\n",
        )
    finally:
        if announce is not None:
            os.close(announce)
    try:
        lifecycle.track_group(proc.pid)
    except OSError as exc:
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
        raise SandboxError(f"cannot record the process group of {argv[0]!r}: {exc}") from exc
    try:
        return _supervise(proc, stdin_data, started + timeout, output_limit, kill_grace, started)
    finally:
        lifecycle.untrack_group(proc.pid)


def _child_setup(parent: int, rlimits: list[tuple[int, int, int]], announce: int | None) -> None:
    lifecycle.die_with_parent(parent)
    lifecycle.announce_self(announce)
    _apply_rlimits(rlimits)


def _apply_rlimits(rlimits: list[tuple[int, int, int]]) -> None:
    for res, soft, hard in rlimits:
        resource.setrlimit(res, (soft, hard))


def _supervise(
    proc: subprocess.Popen[bytes],
    stdin_data: bytes | None,
    deadline: float,
    output_limit: int,
    kill_grace: float,
    started: float,
) -> ProcessResult:
    """Pump the pipes until the child exits or times out, end its group, collect the result."""
    pgid = proc.pid  # start_new_session: the child leads a new session and process group
    out, err = _Capture(output_limit), _Capture(output_limit)
    wake_r, wake_w = os.pipe()
    exited = threading.Event()

    def wait_for_exit() -> None:
        # WNOWAIT leaves the child a zombie: its pid, and so the group id, cannot be reused
        # until we reap it, which makes the killpg calls below safe.
        try:
            os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            pass
        finally:
            exited.set()
            os.write(wake_w, b"x")

    waiter = threading.Thread(target=wait_for_exit, name=f"sandbox-wait-{proc.pid}", daemon=True)
    selector = selectors.DefaultSelector()
    timed_out = False
    group_ended = False
    try:
        assert proc.stdout is not None and proc.stderr is not None
        selector.register(proc.stdout.fileno(), selectors.EVENT_READ, out)
        selector.register(proc.stderr.fileno(), selectors.EVENT_READ, err)
        selector.register(wake_r, selectors.EVENT_READ, None)
        if stdin_data is not None:
            assert proc.stdin is not None
            if stdin_data:
                os.set_blocking(proc.stdin.fileno(), False)
                selector.register(
                    proc.stdin.fileno(), selectors.EVENT_WRITE, memoryview(stdin_data)
                )
            else:
                proc.stdin.close()
        waiter.start()

        if not _pump(selector, proc, deadline, exited.is_set):
            timed_out = True
            _signal_group(pgid, signal.SIGTERM)
            # The grace lasts until every member of the group has exited (not only the main
            # process), so that grandchildren get their chance to clean up too.
            _pump(
                selector,
                proc,
                time.monotonic() + kill_grace,
                _GroupGone(pgid, exited),
                poll=_GRACE_POLL_SECONDS,
            )
        # Whatever is left of the group (a member that ignored SIGTERM, or a background process
        # the command left running) goes now.
        _signal_group(pgid, signal.SIGKILL)
        group_ended = True
        exited.wait()
        _pump(selector, proc, time.monotonic() + _DRAIN_SECONDS, lambda: _outputs_closed(selector))
        returncode = proc.wait()
    finally:
        if not group_ended:  # an exception (KeyboardInterrupt, ...) interrupted supervision
            _signal_group(pgid, signal.SIGKILL)
            proc.wait()
        if waiter.is_alive() or exited.is_set():
            waiter.join()
        selector.close()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        os.close(wake_r)
        os.close(wake_w)
    return ProcessResult(
        exit_code=returncode,
        timed_out=timed_out,
        seconds=time.monotonic() - started,
        stdout=out.text(),
        stderr=err.text(),
        stdout_dropped=out.dropped,
        stderr_dropped=err.dropped,
    )


def _pump(
    selector: selectors.BaseSelector,
    proc: subprocess.Popen[bytes],
    until: float,
    done: Callable[[], bool],
    *,
    poll: float | None = None,
) -> bool:
    """Move data between the pipes and the buffers until ``done()`` or until ``until`` passes.

    ``done`` is checked after every wake-up, and at least every ``poll`` seconds when given.
    Returns False when the time ran out first.
    """
    while True:
        if done():
            return True
        remaining = until - time.monotonic()
        if remaining <= 0:
            return False
        for key, _ in selector.select(remaining if poll is None else min(remaining, poll)):
            fd = key.fd
            if key.data is None:  # the wake-up pipe; the ``exited`` event carries the news
                os.read(fd, 64)
                continue
            if isinstance(key.data, memoryview):
                _feed_stdin(selector, proc, key.data, fd)
                continue
            data = os.read(fd, _READ_CHUNK)
            if data:
                key.data.feed(data)
            else:
                selector.unregister(fd)


def _outputs_closed(selector: selectors.BaseSelector) -> bool:
    return not any(isinstance(key.data, _Capture) for key in selector.get_map().values())


class _GroupGone:
    """``done`` test of the grace period: the main process exited and no live member is left.

    Scans at most once per poll interval, however often output wakes the pump up.
    """

    def __init__(self, pgid: int, exited: threading.Event) -> None:
        self.pgid = pgid
        self.exited = exited
        self.next_scan = 0.0

    def __call__(self) -> bool:
        now = time.monotonic()
        if not self.exited.is_set() or now < self.next_scan:
            return False
        self.next_scan = now + _GRACE_POLL_SECONDS
        return not _group_has_live_members(self.pgid)


def _group_has_live_members(pgid: int) -> bool:
    """True while a process other than a zombie belongs to process group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        entries = os.listdir("/proc")
    except OSError:  # no procfs: the unreaped main process alone keeps killpg succeeding
        return True
    # killpg counts zombies too, and our own main process stays one until we reap it.
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[0] != b"Z" and int(fields[2]) == pgid:
            return True
    return False


def _feed_stdin(
    selector: selectors.BaseSelector, proc: subprocess.Popen[bytes], data: memoryview, fd: int
) -> None:
    assert proc.stdin is not None
    try:
        written = os.write(fd, data[:_STDIN_CHUNK])
    except BlockingIOError:
        return
    except BrokenPipeError:  # the command stopped reading; the rest of its input is moot
        written = len(data)
    rest = data[written:]
    if rest:
        selector.modify(fd, selectors.EVENT_WRITE, rest)
    else:
        selector.unregister(fd)
        proc.stdin.close()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)
