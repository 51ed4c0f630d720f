"""Starting a search worker by ``fork`` from the controller (Linux), and handling it.

A worker started as a fresh interpreter spends ~0.4 CPU seconds importing treesearch, pydantic,
networkx and the agents before it can expand anything; a fork of the controller, which has
imported all of that already, starts at once. A fork inherits everything of the controller,
so the child first lets go of what is not its own (``_detach``):

* every file descriptor but stdin/stdout/stderr and its connection is pointed at ``/dev/null``
  (``dup2``: the number stays taken, so an inherited object that closes it later closes only
  that): the store's lock and the workspace hold (``flock``s live on the open file, so a copy
  left open would keep them held after the controller let go), the watcher's inotify, the
  event log, sockets of the controller's warm test servers, pipes of its git processes;
* the exit handlers (``atexit``) and ``weakref.finalize`` callbacks registered in the
  controller are dropped: at the worker's end they would remove the controller's temporary
  folders or close its servers; the worker's own, registered after the fork, run as usual;
* signal handlers the controller set go back to the default (``worker_entry`` sets its own);
* objects inherited are frozen out of the cyclic garbage collector (``gc.freeze``): none of
  them is finalised in the child;
* stdin becomes ``/dev/null``; the process is named ``treesearch-wkr`` (``ps``, ``/proc``).

The child never uses an object of the controller's: it builds its own store, scorer and score
cache connection from the ``WorkerSpec`` it is sent (SQLite forbids using a connection across a
fork; the score cache opens one per operation, and none is open when the pool starts, before the
root is tested). The modules' own at-fork hooks do the rest: the lifecycle registry and watchdog are the
child's own (``lifecycle``), the controller's warm servers are forgotten (``scoring.warm``),
the random module is reseeded (CPython). A fork is made only while the controller runs no
other thread (``can_fork``): a thread holding a lock at the fork would leave it held forever in
the child. Elsewhere (not Linux, or threads running) a worker is a fresh interpreter as before.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable

from treesearch import lifecycle

__all__ = ["PROCESS_NAME", "ForkedProcess", "can_fork", "fork"]

PROCESS_NAME = "treesearch-wkr"
"""What a forked worker is called in ``/proc/PID/comm`` (at most 15 bytes)."""

_SIGNALS = ("SIGHUP", "SIGQUIT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGCHLD")


def can_fork() -> bool:
    """Whether a worker may be forked from this process now: Linux, and no other thread."""
    return sys.platform.startswith("linux") and hasattr(os, "fork") and _one_thread()


def _one_thread() -> bool:
    return threading.active_count() == 1 and len(os.listdir("/proc/self/task")) == 1


class ForkedProcess:
    """A forked child of this process, handled like a ``subprocess.Popen``."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit code (negative: the signal) once the child ended, else ``None``."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: it has ended, how is unknown
                self.returncode = -signal.SIGKILL
                return self.returncode
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the child's end; ``subprocess.TimeoutExpired`` after ``timeout`` seconds
        (as ``Popen.wait``). Woken by the child's end itself (a pidfd) where there is one."""
        if self.poll() is not None:
            assert self.returncode is not None
            return self.returncode
        deadline = None if timeout is None else time.monotonic() + timeout
        pidfd = _pidfd(self.pid)
        try:
            delay = 0.001
            while self.poll() is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(f"process {self.pid}", timeout or 0.0)
                if pidfd is not None:
                    select.select([pidfd], [], [], left)  # readable once the child ended
                else:
                    time.sleep(delay if left is None else min(delay, left))
                    delay = min(delay * 2, 0.05)
        finally:
            if pidfd is not None:
                os.close(pidfd)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)  # Linux 5.3 and later
    except (AttributeError, OSError):
        return None


def fork(main: Callable[[], object], keep: int) -> ForkedProcess:
    """Fork a child that lets go of the controller's state (the module's text), keeping the
    descriptor ``keep`` open, and runs ``main``; its end is ``os._exit`` after its own exit
    handlers (0 when ``main`` returned, ``SystemExit``'s code, 1 after any other exception,
    which is printed to stderr)."""
    for stream in (sys.stdout, sys.stderr):  # else the child would write it again
        with contextlib.suppress(Exception):
            stream.flush()
    pid = os.fork()
    if pid:
        return ForkedProcess(pid)
    code = 1
    try:
        _detach(keep)
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - said on stderr; the exit code tells the controller
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _detach(keep: int) -> None:
    """In the forked child: let go of what belongs to the controller (the module's text)."""
    gc.freeze()
    atexit._clear()
    for fin in list(getattr(weakref.finalize, "_registry", {})):
        fin.detach()
    weakref.finalize._registered_with_atexit = False  # type: ignore[attr-defined]
    for name in _SIGNALS:
        sig = getattr(signal, name, None)
        if sig is not None:
            with contextlib.suppress(OSError, ValueError):
                signal.signal(sig, signal.SIG_DFL)
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:
        for fd in _open_fds():
            if fd not in (1, 2, keep, null):
                with contextlib.suppress(OSError):
                    os.dup2(null, fd, inheritable=fd == 0)
    finally:
        os.close(null)
    lifecycle.name_process(PROCESS_NAME)


def _open_fds() -> list[int]:
    try:
        return sorted(int(n) for n in os.listdir("/proc/self/fd"))
    except OSError:
        return list(range(os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1024))
