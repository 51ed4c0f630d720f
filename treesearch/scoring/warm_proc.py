"""One warm server of ``treesearch.scoring.warm``: the ``_warm_server.py`` process, the protocol
with it, and the supervision of one forked test run (output through pipes, the timeout ending
the run's whole process group, the lifecycle watchdog told about every group)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import select
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from treesearch import lifecycle
from treesearch._sandbox_run import _Capture, _GroupGone, _signal_group
from treesearch.scoring import _warm_server, _warm_speed
from treesearch.scoring.warm_plan import Launch, shell_execs
from treesearch.types import ProcessResult

__all__ = ["PYTEST_VERSIONS", "WarmServer", "WarmServerError", "WarmUpError", "untested_pytest"]

_HEADER = struct.Struct(">Q")
_START_SECONDS = 120.0  # importing pytest and the remembered packages on a loaded machine
_REPLY_SECONDS = 300.0  # the server may be importing packages the last run taught it
_DRAIN_SECONDS = 1.0
_GATHER_SECONDS = 0.002
"""After reading a run's output, wait this long for the server's word only (the end of the run
is seen at once), so that the many small writes of an unbuffered run (``PYTHONUNBUFFERED``:
one write per character pytest shows) are read together, not one wake-up each. Not after a read
that filled its buffer (a run writing fast is read at once)."""
_SPEED_MODULE = "_treesearch_warm_speed"


PYTEST_VERSIONS = ((6, 2), (10, 0))
"""The pytest versions the warm runner runs, from the first up to (not with) the second: those
``tests/test_scoring_warm_matrix.py`` runs warm against cold (6.2, 7.4, 8.x, 9.x). A server
whose pytest is another one is not used: the tests run cold, with a note."""


def untested_pytest(version: str) -> str:
    """Why the warm runner does not run this pytest version ('' when it does)."""
    found = re.match(r"(\d+)\.(\d+)", version)
    low, high = PYTEST_VERSIONS
    if found is not None and low <= (int(found[1]), int(found[2])) < high:
        return ""
    return (
        f"pytest {version or '(version unknown)'} is not one the warm runner is tested with"
        f" ({low[0]}.{low[1]} to {high[0] - 1}.x)"
    )


class WarmServerError(Exception):
    """The warm server could not start or run a test run (the caller runs it cold)."""


class WarmUpError(WarmServerError):
    """The server's warm-up session left a change it could not undo (the caller starts servers
    without a warm-up)."""


# --- the wire -------------------------------------------------------------------------------------


def _send(sock: socket.socket, message: Mapping[str, Any], fds: Sequence[int] = ()) -> None:
    data = json.dumps(message).encode("utf-8")
    header = _HEADER.pack(len(data))
    if fds:
        socket.send_fds(sock, [header], list(fds))
    else:
        sock.sendall(header)
    sock.sendall(data)


def _recv(sock: socket.socket, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    buf = b""
    need = _HEADER.size
    size: int | None = None
    while True:
        while len(buf) < need:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([sock], [], [], left)[0]:
                raise WarmServerError(f"the warm server did not answer within {timeout:g} s")
            chunk = sock.recv(need - len(buf))
            if not chunk:
                raise WarmServerError("the warm server ended")
            buf += chunk
        if size is None:
            (size,) = _HEADER.unpack(buf[: _HEADER.size])
            buf = buf[_HEADER.size :]
            need = size
            continue
        message: dict[str, Any] = json.loads(buf[:size].decode("utf-8"))
        return message


# --- one server -----------------------------------------------------------------------------------


class WarmServer:
    """A running ``_warm_server.py`` and the protocol with it."""

    proc: subprocess.Popen[bytes] | _Adopted

    def __init__(
        self,
        interpreter: str,
        env: Mapping[str, str],
        scratch: Path,
        preload: Sequence[str],
        deny: Iterable[str],
        *,
        warm_up: bool = False,
        rewrite_cache: bool = False,
        spare: bool = False,
        premade_args: Sequence[str] | None = None,
        shell_parent: bool = False,
        wait: bool = True,
    ) -> None:
        """``premade_args``: make pytest's configuration ahead for runs with these arguments
        (None: never); ``shell_parent``: the runs are shell lines through a ``/bin/sh`` that does
        not exec (the spare child forks the tests' process ahead); ``wait=False``: return once the
        process is started, and take its greeting (``settle``) when the server is first used."""
        self.preload = list(preload)
        self.deny = set(deny)
        script = scratch / "_treesearch_warm_server.py"
        if not script.exists():
            shutil.copyfile(_warm_server.__file__, script)
        speed = scratch / f"{_SPEED_MODULE}.py"
        speedy = warm_up or rewrite_cache or premade_args is not None
        if speedy and not speed.exists():
            shutil.copyfile(_warm_speed.__file__, speed)
        settings = scratch / f"settings-{time.monotonic_ns()}.json"
        settings.write_text(
            json.dumps(
                {
                    "preload": self.preload,
                    "deny": sorted(self.deny),
                    "lc_ctype": env.get("LC_CTYPE"),
                    "speed_module": _SPEED_MODULE if speedy else None,
                    "warm_up": str(scratch / "warm-up") if warm_up else None,
                    "rewrite_cache": str(scratch / "rewritten") if rewrite_cache else None,
                    "spare": spare,
                    "premade": premade_args is not None,
                    "shell_parent": shell_parent,
                    "pytest_args": list(premade_args) if premade_args is not None else None,
                }
            )
        )
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        lifecycle.prepare_tracking()
        announce = lifecycle.announce_fd()
        self.log = scratch / "server.log"
        try:
            with open(self.log, "ab") as log:
                self.proc = subprocess.Popen(
                    [interpreter, str(script), str(theirs.fileno()), str(settings)],
                    cwd=scratch,
                    env=dict(env),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                    pass_fds=(theirs.fileno(),),
                    start_new_session=True,
                    preexec_fn=functools.partial(lifecycle.announce_self, announce),
                )
        except (OSError, subprocess.SubprocessError) as exc:
            ours.close()
            raise WarmServerError(f"cannot start {interpreter}: {exc}") from exc
        finally:
            theirs.close()
            if announce is not None:
                os.close(announce)
        self.sock = ours
        self.pending_reap = False
        self.runs = 0
        self.greeted = False
        try:
            lifecycle.track_group(self.proc.pid)
        except OSError as exc:
            self.close()
            raise WarmServerError(f"the warm server did not start: {exc}") from exc
        if wait:
            self._greet()

    @classmethod
    def adopt(cls, sock: socket.socket, pid: int, scratch: Path) -> WarmServer:
        """The client of a server that ``clone`` made in another process (a parallel search
        gives its workers copies of its own server): ``sock`` is this end of its socket, ``pid``
        the copy's; its group is tracked here, and its greeting taken when it is first used."""
        try:
            proc = _Adopted(pid)
        except (OSError, AttributeError) as exc:  # (no ``os.pidfd_open``: not Linux)
            sock.close()
            raise WarmServerError(f"the warm server's copy is gone: {exc}") from exc
        self = cls.__new__(cls)
        self.preload, self.deny = [], set()
        self.log = scratch / "server.log"  # a copy writes where its original did; rarely read
        self.proc = proc
        self.sock = sock
        self.pending_reap = False
        self.runs = 0
        self.greeted = False
        lifecycle.prepare_tracking()
        try:
            lifecycle.track_group(pid)
        except OSError as exc:
            self.close()
            raise WarmServerError(f"cannot track the warm server's copy: {exc}") from exc
        return self

    def clone(self) -> tuple[socket.socket, int]:
        """A copy of this server for another client: forked by the server between runs, in a
        session of its own, with everything it imported and its pytest configuration made (a
        few milliseconds, against a start's fraction of a second). Returns the client's end of
        the copy's socket and its pid, for ``adopt`` in the process that will use it; the copy
        ends when that socket does.

        Raises:
            WarmServerError: the server did not make the copy (drop it: its state is unknown).
        """
        self.settle()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            _send(self.sock, {"op": "clone"}, [theirs.fileno()])
            pid = int(_recv(self.sock, _REPLY_SECONDS)["clone"])
        except (OSError, KeyError, TypeError, ValueError) as exc:
            ours.close()
            raise WarmServerError(f"cannot copy the warm server: {exc}") from exc
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        if pid <= 0:
            ours.close()
            raise WarmServerError("the warm server could not fork a copy of itself")
        return ours, pid

    def _greet(self) -> None:
        """Wait for the server's greeting: it has imported pytest (and warmed up)."""
        self.greeted = True
        try:
            hello = _recv(self.sock, _START_SECONDS)
        except (OSError, WarmServerError) as exc:
            self.close()
            raise WarmServerError(
                f"the warm server did not start: {exc}{self._log_tail()}"
            ) from exc
        if not hello.get("ready"):
            self.close()
            raise WarmServerError(str(hello.get("error") or "the warm server refused to start"))
        self.pytest_version: str = str(hello.get("pytest") or "")
        """``pytest.__version__`` in the server."""
        refused = untested_pytest(self.pytest_version)
        if refused:
            self.close()
            raise WarmServerError(refused)
        if hello.get("warm_up"):
            self.close()
            raise WarmUpError(f"its warm-up session could not be undone: {hello['warm_up']}")
        self.warmed: set[str] = set(hello.get("warmed") or ())
        """Top-level names of the modules the warm-up session imported."""
        self.rewrite_cache: str = hello.get("rewrite_cache") or ""
        """Why the cache of rewritten test modules is not used ('' when it is)."""
        self.premade: str | None = hello.get("premade")
        """Why pytest's configuration is not made ahead in the server ('' when it is; None:
        not asked for)."""
        self.base_path: list[str] = list(hello["base_path"])
        self.threaded: str | None = hello.get("threaded")
        self._state(hello)

    def _state(self, message: Mapping[str, Any]) -> None:
        if "modules" in message:
            self.modules: set[str] = set(message["modules"])
            self.files: list[str] = list(message["files"])

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            lines = self.log.read_text(errors="replace").strip().splitlines()
            if lines:
                return f" ({lines[-1][:300]})"
        return ""

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def settle(self) -> None:
        """Take the greeting of a server started without waiting, and the answer to the last
        run's ``reap`` (the server may have been importing)."""
        if not self.greeted:
            self._greet()
        if self.pending_reap:
            reply = _recv(self.sock, _REPLY_SECONDS)
            self.pending_reap = False
            self.threaded = reply.get("threaded")
            self._state(reply)

    def run(
        self,
        launch: Launch,
        cwd: str,
        env: Mapping[str, str],
        *,
        timeout: float,
        kill_grace: float,
        output_limit: int,
        modules_file: str,
    ) -> ProcessResult:
        """One test run in a forked child; the result as ``sandbox.run`` gives it."""
        self.settle()
        pythonpath = env.get("PYTHONPATH", "")
        request = {
            "op": "run",
            "cwd": cwd,
            "env": dict(env),
            "pythonpath": pythonpath.split(os.pathsep) if pythonpath else [],
            "base_path": self.base_path,
            "mode": launch.mode,
            "target": launch.target,
            "argv0": launch.argv0,
            "args": list(launch.args),
            "orig_argv": list(launch.orig_argv),
            "modules_file": modules_file,
            "shell_parent": launch.shell and not shell_execs(),
        }
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        announce = lifecycle.announce_fd()
        started = time.monotonic()
        try:
            fds = [out_w, err_w] + ([announce] if announce is not None else [])
            _send(self.sock, request, fds)
        except OSError as exc:
            for fd in (out_r, err_r):
                os.close(fd)
            raise WarmServerError(f"cannot reach the warm server: {exc}") from exc
        finally:
            for fd in (out_w, err_w) + ((announce,) if announce is not None else ()):
                os.close(fd)
        self.runs += 1
        try:
            pid = int(_recv(self.sock, _REPLY_SECONDS)["pid"])
        except BaseException:
            os.close(out_r)
            os.close(err_r)
            raise
        lifecycle.track_group(pid)
        try:
            return self._supervise(
                pid, out_r, err_r, started, timeout, kill_grace, output_limit, launch
            )
        finally:
            lifecycle.untrack_group(pid)

    def _supervise(
        self,
        pid: int,
        out_r: int,
        err_r: int,
        started: float,
        timeout: float,
        kill_grace: float,
        output_limit: int,
        launch: Launch,
    ) -> ProcessResult:
        out, err = _Capture(output_limit), _Capture(output_limit)
        exited = threading.Event()
        selector = selectors.DefaultSelector()
        status: int | None = None
        timed_out = False
        done = False
        try:
            selector.register(out_r, selectors.EVENT_READ, out)
            selector.register(err_r, selectors.EVENT_READ, err)
            selector.register(self.sock, selectors.EVENT_READ, None)

            def pump(until: float, finished: Callable[[], bool], poll: float | None) -> bool:
                nonlocal status
                while not finished():
                    left = until - time.monotonic()
                    if left <= 0:
                        return False
                    output = full = False
                    for key, _ in selector.select(left if poll is None else min(left, poll)):
                        if key.data is None:
                            status = int(_recv(self.sock, _REPLY_SECONDS)["exit"])
                            selector.unregister(self.sock)
                            exited.set()
                            continue
                        data = os.read(key.fd, 65536)
                        if data:
                            key.data.feed(data)
                            output = True
                            full = full or len(data) == 65536  # a full pipe: read on at once
                        else:
                            selector.unregister(key.fd)
                    if output and not full and poll is None and not exited.is_set():
                        wait = min(_GATHER_SECONDS, until - time.monotonic())
                        if wait > 0:
                            select.select([self.sock], [], [], wait)
                return True

            if not pump(started + timeout, exited.is_set, None):
                timed_out = True
                _signal_group(pid, signal.SIGTERM)
                pump(time.monotonic() + kill_grace, _GroupGone(pid, exited), 0.02)
            _signal_group(pid, signal.SIGKILL)  # whatever the run left behind in its group
            if not exited.is_set():
                pump(time.monotonic() + _REPLY_SECONDS, exited.is_set, None)
            if not exited.is_set():
                raise WarmServerError("the warm server did not report the end of a run")
            _send(self.sock, {"op": "reap"})
            self.pending_reap = True
            captures = (out, err)
            pump(
                time.monotonic() + _DRAIN_SECONDS,
                lambda: not any(k.data in captures for k in selector.get_map().values()),
                None,
            )
            done = True
        finally:
            if not done:
                _signal_group(pid, signal.SIGKILL)
            selector.close()
            os.close(out_r)
            os.close(err_r)
        assert status is not None
        return ProcessResult(
            exit_code=status,
            timed_out=timed_out,
            seconds=time.monotonic() - started,
            stdout=out.text(),
            stderr=err.text(),
            stdout_dropped=out.dropped,
            stderr_dropped=err.dropped,
        )

    def close(self) -> None:
        """End the server (and a child still running) and forget its group."""
        with contextlib.suppress(OSError):
            self.sock.close()
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            _signal_group(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        _signal_group(self.proc.pid, signal.SIGKILL)  # a process the server left in its group
        lifecycle.untrack_group(self.proc.pid)

    def forget(self) -> None:
        """In a forked copy of this process: drop the socket without touching the server."""
        with contextlib.suppress(OSError):
            self.sock.close()


class _Adopted:
    """The process of a server this process did not start (``WarmServer.adopt``): not its
    child, so watched through a pidfd; its exit status is its parent's to read (0 here)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._fd: int | None = os.pidfd_open(pid)

    def poll(self) -> int | None:
        if self._fd is not None and not select.select([self._fd], [], [], 0)[0]:
            return None
        self._close()
        return 0

    def wait(self, timeout: float | None = None) -> int:
        if self._fd is not None and not select.select([self._fd], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired(f"warm server {self.pid}", timeout or 0.0)
        self._close()
        return 0

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        self._close()
