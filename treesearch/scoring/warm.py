"""The warm test runner: pytest runs forked from a long-lived server instead of a new interpreter.

A cold ``python -m pytest`` spends most of a small suite's second starting Python and importing
pytest. ``WarmRunner`` keeps a server (``_warm_server.py``, run by the interpreter of the tests)
that has imported pytest, and the installed packages the tests imported in earlier runs, and
forks one child per run: the child takes its own session, the node's folder, the run's
environment, ``sys.path`` and ``sys.argv`` as the cold command would have them, runs pytest
in-process with the same arguments and exits with its status. Output goes through pipes read
here exactly as ``sandbox.run`` reads a cold run's, and the timeout ends the child's whole
process group.

Used only where a run is the same as a cold one:

* the command is ``python -m pytest ...`` (a string without shell features, or an argument
  vector) or a ``pytest`` script whose first line names a Python interpreter;
* no module the server imported is shadowed by a file of the workspace, the node's folder or a
  ``PYTHONPATH`` entry (a workspace with its own ``json.py`` runs cold); an installed package the
  server imported for the tests is dropped from the server instead;
* in ``auto`` mode the first run is made both ways and compared test by test: any difference,
  and any failure of the server, and the runner goes back to cold runs. Every fallback is a
  one-line note (``notes``, ``on_note``).

Differences that remain, by nature of a fork: every run of one server shares its hash seed (when
``PYTHONHASHSEED`` is unset) and the state of packages imported in the server (a package that
reads the current folder at import reads the node's folder of the run that taught the server
to import it).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import select
import selectors
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from treesearch import lifecycle
from treesearch._sandbox_run import _Capture, _GroupGone, _signal_group
from treesearch.scoring import _warm_server
from treesearch.types import ProcessResult

__all__ = ["WARM_MODES", "Launch", "WarmRunner", "WarmServerError", "plan"]

WARM_MODES = ("auto", "on", "off")
"""``scoring.warm``: ``auto`` (warm where safe, first run checked against a cold one), ``on``
(warm where safe, unchecked), ``off`` (always cold)."""

_HEADER = struct.Struct(">Q")
_START_SECONDS = 120.0  # importing pytest and the remembered packages on a loaded machine
_REPLY_SECONDS = 300.0  # the server may be importing packages the last run taught it
_DRAIN_SECONDS = 1.0
_SHELL_SPECIAL = re.compile(r"[$`;&|<>(){}*?\[\]~!#\n\r]")
_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?$")
_PYTEST_SCRIPT = re.compile(r"^py\.?test$")
_MAX_SERVERS = 2
_MAX_FAILURES = 3


class WarmServerError(Exception):
    """The warm server could not start or run a test run (the caller runs it cold)."""


@dataclass(frozen=True)
class Launch:
    """How a test command runs in a warm child."""

    interpreter: str
    """The Python the cold command runs (the server's interpreter)."""
    mode: str
    """``module`` (``python -m pytest``) or ``script`` (a ``pytest`` script)."""
    target: str
    """The module name, or the script's path."""
    args: tuple[str, ...]
    """pytest's arguments."""
    orig_argv: tuple[str, ...]
    """``sys.orig_argv`` of the cold interpreter."""
    argv0: str = ""
    """``sys.argv[0]`` of a script."""
    shell: bool = False
    """The command is a shell line: a signal's death reads as the shell reports it."""


def plan(command: str | Sequence[str], env: Mapping[str, str], cwd: str) -> Launch | str:
    """How ``command`` runs warm with environment ``env`` in ``cwd``, or why it cannot."""
    shell = isinstance(command, str)
    if isinstance(command, str):
        if _SHELL_SPECIAL.search(command):
            return "the test command uses shell features (expansions, redirections, pipes...)"
        try:
            words = shlex.split(command)
        except ValueError:
            return "the test command is not a plain shell line"
    else:
        words = list(command)
    if not words:
        return "the test command is empty"
    first = words[0]
    if "=" in first and not shell:
        return "the test command does not start with a program"
    if "=" in first:
        return "the test command sets variables before its program"
    path = env.get("PATH", os.defpath)
    name = os.path.basename(first)
    if _PYTHON.match(name):
        interpreter = _find(first, path, cwd)
        if interpreter is None:
            return f"{first} was not found"
        if len(words) < 3 or words[1] != "-m" or words[2] != "pytest":
            return "only `python -m pytest ...` runs warm (no interpreter options)"
        return Launch(
            interpreter, "module", "pytest", tuple(words[3:]), (first, *words[1:]), shell=shell
        )
    if _PYTEST_SCRIPT.match(name):
        script = _find(first, path, cwd)
        if script is None:
            return f"{first} was not found"
        interpreter = _shebang(script, path)
        if interpreter is None:
            return f"{script} is not a Python script with a plain interpreter line"
        return Launch(
            interpreter,
            "script",
            os.path.abspath(os.path.join(cwd, script)),
            tuple(words[1:]),
            (interpreter, first if "/" in first else script, *words[1:]),
            argv0=first if "/" in first else script,
            shell=shell,
        )
    return "only pytest commands run warm"


def _find(word: str, path: str, cwd: str) -> str | None:
    if "/" in word:
        full = os.path.normpath(os.path.join(cwd, word))
        return full if os.path.isfile(full) and os.access(full, os.X_OK) else None
    return shutil.which(word, path=path)


def _shebang(script: str, path: str) -> str | None:
    try:
        with open(script, "rb") as handle:
            line = handle.readline(512)
    except OSError:
        return None
    if not line.startswith(b"#!"):
        return None
    words = line[2:].decode("utf-8", "replace").split()
    if len(words) == 2 and os.path.basename(words[0]) == "env":
        found = shutil.which(words[1], path=path)
        words = [found] if found else []
    if len(words) != 1 or not _PYTHON.match(os.path.basename(words[0])):
        return None
    return words[0] if os.path.isabs(words[0]) else None


@functools.lru_cache(maxsize=1)
def _shell_execs() -> bool:
    """Whether ``/bin/sh -c 'cmd'`` replaces itself by a lone command (bash does, dash not):
    then a signal's death of the tests reaches us as such, else as the shell's 128 + n."""
    done = subprocess.run(
        ["/bin/sh", "-c", "/bin/sh -c 'kill -TERM $$'"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=30,
        check=False,
    )
    return done.returncode < 0


def _shell_env(env: Mapping[str, str], cwd: str, launch: Launch) -> dict[str, str] | None:
    """The environment ``/bin/sh -c`` gives the program it runs in ``cwd`` (it sets ``PWD``;
    bash also ``SHLVL`` and ``_``), or None when it cannot be read."""
    program = shutil.which("env", path=env.get("PATH", os.defpath))
    if program is None:
        return None
    try:
        done = subprocess.run(
            ["/bin/sh", "-c", "env -0"],
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    out: dict[str, str] = {}
    for item in done.stdout.split(b"\0"):
        if item:
            key, _, value = item.partition(b"=")
            out[os.fsdecode(key)] = os.fsdecode(value)
    if out.get("_") == program:  # bash names the program it runs there: ours, not env's
        out["_"] = launch.interpreter if launch.mode == "module" else launch.argv0
    return out


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


class _Server:
    """A running ``_warm_server.py`` and the protocol with it."""

    def __init__(
        self,
        interpreter: str,
        env: Mapping[str, str],
        scratch: Path,
        preload: Sequence[str],
        deny: Iterable[str],
    ) -> None:
        self.preload = list(preload)
        self.deny = set(deny)
        script = scratch / "_treesearch_warm_server.py"
        if not script.exists():
            shutil.copyfile(_warm_server.__file__, script)
        settings = scratch / f"settings-{time.monotonic_ns()}.json"
        settings.write_text(
            json.dumps(
                {
                    "preload": self.preload,
                    "deny": sorted(self.deny),
                    "lc_ctype": env.get("LC_CTYPE"),
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
        try:
            lifecycle.track_group(self.proc.pid)
            hello = _recv(self.sock, _START_SECONDS)
        except (OSError, WarmServerError) as exc:
            self.close()
            raise WarmServerError(
                f"the warm server did not start: {exc}{self._log_tail()}"
            ) from exc
        if not hello.get("ready"):
            self.close()
            raise WarmServerError(str(hello.get("error") or "the warm server refused to start"))
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
        """Take the answer to the last run's ``reap`` (the server may have been importing)."""
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
            "shell_parent": launch.shell and not _shell_execs(),
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
                    for key, _ in selector.select(left if poll is None else min(left, poll)):
                        if key.data is None:
                            status = int(_recv(self.sock, _REPLY_SECONDS)["exit"])
                            selector.unregister(self.sock)
                            exited.set()
                            continue
                        data = os.read(key.fd, 65536)
                        if data:
                            key.data.feed(data)
                        else:
                            selector.unregister(key.fd)
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


_LIVE: set[WarmRunner] = set()


def _forget_all() -> None:
    for runner in list(_LIVE):
        for server in runner._servers.values():
            server.forget()
        runner._servers.clear()
    _LIVE.clear()


def _close_all() -> None:
    for runner in list(_LIVE):
        runner.close()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_all)
import atexit  # noqa: E402 - next to its only use

atexit.register(_close_all)


# --- the runner ---------------------------------------------------------------------------------


ColdRun = Callable[..., ProcessResult]


class WarmRunner:
    """Runs pytest commands in warm children where that is the same as a cold run.

    One per ``Scorer`` (so one per worker of a parallel search); ``close`` ends its servers,
    and so do the end of this process (at exit, or its death: the server sees its socket
    close) and ``lifecycle``'s watchdog and reaper.
    """

    def __init__(self, mode: str = "auto", *, on_note: Callable[[str], None] | None = None) -> None:
        if mode not in WARM_MODES:
            raise ValueError(f"warm mode must be one of {', '.join(WARM_MODES)}, not {mode!r}")
        self.mode = mode
        """``auto``, ``on`` or ``off``."""
        self.on_note = on_note
        """Told every note as it is made."""
        self.notes: list[str] = []
        """One line per fallback to cold runs (each said once)."""
        self.warm_runs = 0
        """Test runs made warm."""
        self.cold_runs = 0
        """Test runs made cold (fallbacks and the first run's check included)."""
        self._servers: dict[tuple[Any, ...], _Server] = {}
        self._scratch: Path | None = None
        self._checked = mode != "auto"
        self._disabled = mode == "off"
        self._failures = 0
        self._preload: list[str] = []
        self._deny: set[str] = set()
        self._names: dict[str, tuple[int, frozenset[str], tuple[str, ...]]] = {}

    def describe(self) -> dict[str, Any]:
        """Plain data for ``summary.json``."""
        return {
            "mode": self.mode,
            "warm_runs": self.warm_runs,
            "cold_runs": self.cold_runs,
            "notes": list(self.notes),
        }

    def note(self, text: str) -> None:
        if text in self.notes:
            return
        self.notes.append(text)
        if self.on_note is not None:
            self.on_note(text)

    def run(
        self,
        command: str | Sequence[str],
        cwd: str | os.PathLike[str],
        *,
        timeout: float,
        extra_env: Mapping[str, str],
        workspace: str | os.PathLike[str],
        cold: ColdRun,
        pytest: bool = True,
        report: Path | None = None,
        probe: Path | None = None,
        kill_grace: float = 2.0,
        output_limit: int = 64 * 1024,
    ) -> ProcessResult:
        """Run ``command`` as ``cold(command, cwd, timeout=..., extra_env=...)`` would, warm
        where that is safe. ``pytest``: the runner reads the command as pytest's (else it runs
        cold). ``report`` and ``probe``: the files the run writes (JUnit, probe), compared with
        a cold run's on the first run of ``auto`` mode."""

        def cold_run() -> ProcessResult:
            self.cold_runs += 1
            return cold(command, cwd, timeout=timeout, extra_env=extra_env)

        if self._disabled:
            return cold_run()
        cwd = os.path.abspath(os.fspath(cwd))
        env = {**os.environ, **extra_env}
        launch = plan(command, env, cwd) if pytest else "not a pytest command"
        if not isinstance(launch, str) and launch.shell:
            shell_env = _shell_env(env, cwd, launch)
            if shell_env is None:
                launch = "cannot read the environment /bin/sh gives its commands"
            else:
                env = shell_env
        if isinstance(launch, str):
            self.note(f"warm runner not used: {launch}; the tests run cold")
            return cold_run()
        try:
            server = self._server(launch, env)
            why = self._unsafe(server, workspace, cwd, env)
            if why == "restart":
                server = self._server(launch, env)
                why = self._unsafe(server, workspace, cwd, env)
        except WarmServerError as exc:
            return self._fail(exc, cold_run)
        if why:
            self.note(f"warm runner not used for this workspace: {why}; running cold")
            return cold_run()
        modules_file = str(self._scratch_dir() / "modules.json")

        def warm_run() -> ProcessResult:
            result = server.run(
                launch,
                cwd,
                env,
                timeout=timeout,
                kill_grace=kill_grace,
                output_limit=output_limit,
                modules_file=modules_file,
            )
            self.warm_runs += 1
            self._learn(server, modules_file)
            return result

        try:
            if not self._checked:
                return self._check(cold_run, warm_run, report, probe)
            return warm_run()
        except WarmServerError as exc:
            self._drop(server)
            return self._fail(exc, cold_run)
        except BaseException:
            self._drop(server)  # cut short mid-run (Ctrl-C): its state is unknown
            raise

    def _fail(self, exc: WarmServerError, cold_run: Callable[[], ProcessResult]) -> ProcessResult:
        self._failures += 1
        if self.warm_runs == 0 or self._failures >= _MAX_FAILURES:
            self._disabled = True
            self.note(f"warm runner off: {exc}; running the tests cold")
        else:
            self.note(f"warm runner failed once ({exc}); that run was made cold")
        return cold_run()

    def _check(
        self,
        cold_run: Callable[[], ProcessResult],
        warm_run: Callable[[], ProcessResult],
        report: Path | None,
        probe: Path | None,
    ) -> ProcessResult:
        """The first run, both ways: the cold result is returned; a difference turns warm off."""
        cold = cold_run()
        kept = {p: _take(p) for p in (report, probe) if p is not None}
        warm = warm_run()
        seen = {p: _take(p) for p in kept}
        for path, data in kept.items():
            if data is not None:
                path.write_bytes(data)
        self._checked = True
        differs = _difference(cold, warm, kept, seen, report, probe)
        if differs:
            self._disabled = True
            self.close()
            self.note(f"warm runner off: its first run differed from a cold run ({differs})")
        return cold

    def _server(self, launch: Launch, env: Mapping[str, str]) -> _Server:
        # What a child sets for itself, and what pytest reads only when a session starts: a
        # per-run value there (a plugin's file) must not cost a new server per run.
        server_env = {
            k: v
            for k, v in env.items()
            if k != "PYTHONPATH" and not k.startswith(("TREESEARCH_", "PYTEST_"))
        }
        key = (launch.interpreter, tuple(sorted(server_env.items())))
        for _ in range(3):
            server = self._servers.get(key)
            if server is not None:
                server.settle()
                if server.alive and not server.threaded:
                    return server
                if server.threaded:  # a package started a thread: a fork could deadlock
                    self._deny.add(server.threaded.split(".")[0])
                    self._preload = [n for n in self._preload if n.split(".")[0] not in self._deny]
                self._drop(server)
            if len(self._servers) >= _MAX_SERVERS:
                self._drop(next(iter(self._servers.values())))
            self._servers[key] = _Server(
                launch.interpreter, server_env, self._scratch_dir(), self._preload, self._deny
            )
            _LIVE.add(self)
        raise WarmServerError("the packages the tests import start threads in the server")

    def _drop(self, server: _Server) -> None:
        for key, value in list(self._servers.items()):
            if value is server:
                del self._servers[key]
        server.close()

    def _unsafe(
        self, server: _Server, workspace: str | os.PathLike[str], cwd: str, env: Mapping[str, str]
    ) -> str:
        """Why this run cannot use ``server`` ('' if it can; 'restart' after dropping a
        remembered package the workspace shadows)."""
        server.settle()
        root = os.path.realpath(os.fspath(workspace))
        inside = [f for f in server.files if f == root or f.startswith(root + os.sep)]
        if inside:
            return f"the interpreter's packages live in the workspace ({inside[0]})"
        names = set(self._workspace_names(root))
        names |= _entries(cwd)
        pythonpath = env.get("PYTHONPATH", "")
        for entry in pythonpath.split(os.pathsep) if pythonpath else []:
            names |= _entries(os.path.join(cwd, entry))
        shadowed = server.modules & names
        if not shadowed:
            return ""
        learned = {n.split(".")[0] for n in self._preload} & shadowed
        if learned:
            self._deny |= learned
            self._preload = [n for n in self._preload if n.split(".")[0] not in learned]
            self._drop(server)
            return "restart"
        return (
            "the workspace has modules named like ones pytest uses ("
            + ", ".join(sorted(shadowed)[:5])
            + ")"
        )

    def _workspace_names(self, root: str) -> set[str]:
        """Names a workspace file or folder could be imported as at the top level: the entries
        of every folder that is not a package (pytest puts such folders on ``sys.path``).
        Folders whose time stamp did not change are not listed again."""
        out: set[str] = set()
        stack = [root]
        while stack:
            folder = stack.pop()
            try:
                mtime = os.stat(folder).st_mtime_ns
            except OSError:
                continue
            cached = self._names.get(folder)
            if cached is None or cached[0] != mtime:
                names, subdirs = _listing(folder, folder == root)
                cached = (mtime, names, subdirs)
                self._names[folder] = cached
            out |= cached[1]
            stack.extend(cached[2])
        return out

    def _learn(self, server: _Server, modules_file: str) -> None:
        try:
            with open(modules_file, encoding="utf-8") as handle:
                names = json.load(handle)
        except (OSError, ValueError):
            return
        known = set(self._preload)
        for name in names:
            if isinstance(name, str) and name not in known and name.split(".")[0] not in self._deny:
                self._preload.append(name)
                known.add(name)

    def _scratch_dir(self) -> Path:
        if self._scratch is None:
            owner = lifecycle.process_owner().token  # `reap` removes it if we are killed
            self._scratch = Path(
                tempfile.mkdtemp(prefix=f"warm-{owner}-", dir=lifecycle.temp_root())
            )
        return self._scratch

    def close(self) -> None:
        """End every server of this runner and remove its scratch folder."""
        for server in list(self._servers.values()):
            self._drop(server)
        _LIVE.discard(self)
        if self._scratch is not None:
            lifecycle.remove_tree(self._scratch)
            self._scratch = None

    def __enter__(self) -> WarmRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _module_name(entry: str, is_dir: bool) -> str | None:
    if is_dir:
        return entry if entry.isidentifier() else None
    stem, dot, suffix = entry.partition(".")
    if not dot or not stem.isidentifier():
        return None
    last = suffix.rsplit(".", 1)[-1]
    return stem if last in ("py", "pyc", "pyw", "so", "pyd") else None


def _listing(folder: str, is_root: bool) -> tuple[frozenset[str], tuple[str, ...]]:
    names: set[str] = set()
    subdirs: list[str] = []
    is_package = False
    try:
        with os.scandir(folder) as entries:
            items = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
    except OSError:
        return frozenset(), ()
    for name, is_dir in items:
        if name == "__init__.py":
            is_package = True
        if is_dir:
            if name.startswith(".") or name in ("__pycache__", "node_modules"):
                continue
            if os.path.exists(os.path.join(folder, name, "pyvenv.cfg")):
                continue
            subdirs.append(os.path.join(folder, name))
        module = _module_name(name, is_dir)
        if module is not None:
            names.add(module)
    if is_package and not is_root:
        names = set()
    return frozenset(names), tuple(subdirs)


def _entries(folder: str) -> set[str]:
    try:
        with os.scandir(folder) as entries:
            found = {_module_name(e.name, e.is_dir()) for e in entries}
    except OSError:
        return set()
    return {n for n in found if n is not None}


def _take(path: Path) -> bytes | None:
    """The file's bytes, and the file gone (``None``: there was none)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    with contextlib.suppress(OSError):
        path.unlink()
    return data


def _difference(
    cold: ProcessResult,
    warm: ProcessResult,
    cold_files: Mapping[Path, bytes | None],
    warm_files: Mapping[Path, bytes | None],
    report: Path | None,
    probe: Path | None,
) -> str:
    """What differs between a cold and a warm run of the same state ('' when nothing does)."""
    from treesearch.scoring.junit import ReportError, parse_junit

    if (cold.exit_code, cold.timed_out) != (warm.exit_code, warm.timed_out):
        return f"exit {cold.exit_code} cold, {warm.exit_code} warm"
    if report is not None:
        a, b = cold_files.get(report), warm_files.get(report)
        if (a is None) != (b is None):
            return "only one of them wrote a report"
        if a is not None and b is not None:
            try:
                ca = sorted((c.classname, c.name, c.result) for c in parse_junit(a).cases)
                cb = sorted((c.classname, c.name, c.result) for c in parse_junit(b).cases)
            except ReportError:
                ca, cb = [], []
                if a != b:
                    return "unreadable reports"
            if ca != cb:
                diff = sorted(set(ca) ^ set(cb))
                return "test outcomes: " + ", ".join(f"{c[0]}::{c[1]}" for c in diff[:3])
    if probe is not None:
        a, b = cold_files.get(probe), warm_files.get(probe)
        try:
            pa = json.loads(a) if a is not None else None
            pb = json.loads(b) if b is not None else None
        except ValueError:
            pa, pb = a, b
        if pa != pb:
            return "the session records"
    return ""
