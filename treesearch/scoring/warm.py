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
* the interpreter's pytest is a version the runner is tested with (``warm_proc.PYTEST_VERSIONS``:
  6.2 to 9.x, each run warm against cold by ``tests/test_scoring_warm_matrix.py``);
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

import atexit
import contextlib
import json
import os
import socket
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from treesearch import lifecycle
from treesearch._environ import inherited
from treesearch.errors import ConfigError
from treesearch.scoring.section import WarmMode
from treesearch.scoring.warm_plan import Launch, ShellEnv, plan, shell_execs
from treesearch.scoring.warm_proc import WarmServer, WarmServerError, WarmUpError
from treesearch.types import ProcessResult

__all__ = ["Launch", "WarmClone", "WarmRunner", "WarmServerError", "plan"]

_MAX_SERVERS = 2
_NOT_KEYED = frozenset({"PYTHONPATH", "PWD", "COVERAGE_FILE", "COVERAGE_CORE"})
_MAX_FAILURES = 3


_LIVE: set[WarmRunner] = set()


@dataclass
class WarmClone:
    """A copy of a warm server made for another process (``WarmRunner.clone``): the server's
    key, the copy's pid and this end of its socket (hand it over, then close it here)."""

    key: tuple[Any, ...]
    pid: int
    sock: socket.socket


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
atexit.register(_close_all)


# --- the runner ---------------------------------------------------------------------------------


ColdRun = Callable[..., ProcessResult]


class WarmRunner:
    """Runs pytest commands in warm children where that is the same as a cold run.

    One per ``Scorer`` (so one per worker of a parallel search); ``close`` ends its servers,
    and so do the end of this process (at exit, or its death: the server sees its socket
    close) and ``lifecycle``'s watchdog and reaper.
    """

    def __init__(
        self,
        mode: WarmMode = "auto",
        *,
        on_note: Callable[[str], None] | None = None,
        warm_up: bool = True,
        rewrite_cache: bool = True,
        spare: bool = True,
        premade: bool = True,
    ) -> None:
        """``mode``: ``scoring.warm`` (``auto``, ``on`` or ``off``)."""
        if mode not in get_args(WarmMode):  # the model's values: a typo must not act as "on"
            raise ConfigError(f"warm: must be one of auto, on, off, got {mode!r}")
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
        self.premade_runs = 0
        """Warm runs that took pytest's configuration made ahead in the server."""
        self.servers_started = 0
        """Servers this runner started (each imports pytest: a fraction of a second of CPU)."""
        self.copies = 0
        """Copies of its servers made for other processes' runners (``clone``)."""
        self._servers: dict[tuple[Any, ...], WarmServer] = {}
        self._scratch: Path | None = None
        self._checked = mode != "auto"
        self._disabled = mode == "off"
        self._failures = 0
        self._preload: list[str] = []
        self._deny: set[str] = set()
        self._names: dict[str, tuple[int, frozenset[str], tuple[str, ...]]] = {}
        self._warm_up = warm_up
        self._shell_env = ShellEnv()
        self._rewrite_cache = rewrite_cache
        self._spare = spare
        self._premade = premade
        self._only_running = False

    @contextlib.contextmanager
    def only_running(self) -> Iterator[None]:
        """Within: a run goes warm only on a server already running. A one-off run (the
        held-out grade at the end of a search) costs less cold than a new server's start."""
        old, self._only_running = self._only_running, True
        try:
            yield
        finally:
            self._only_running = old

    def describe(self) -> dict[str, Any]:
        """Plain data for ``summary.json``."""
        return {
            "mode": self.mode,
            "warm_runs": self.warm_runs,
            "cold_runs": self.cold_runs,
            "servers_started": self.servers_started,
            "server_copies": self.copies,
            "notes": list(self.notes),
        }

    def note(self, text: str) -> None:
        if text in self.notes:
            return
        self.notes.append(text)
        if self.on_note is not None:
            self.on_note(text)

    @property
    def ready(self) -> bool:
        """Runs go warm without a check of their own: ``on``, or ``auto`` once its first run
        was checked (here or by the search: ``take_check``). A run of another command (an
        agent's coverage run) uses the runner only then, never as the first run's check."""
        return self._checked and not self._disabled

    @property
    def checked(self) -> bool:
        """``auto`` mode: the first run was made both ways, they agreed, and warm runs go on."""
        return self.mode == "auto" and self._checked and not self._disabled and self.warm_runs > 0

    def take_check(self) -> None:
        """Skip the first run's check: another runner of the same search, with the same command
        and environment, made it and it agreed (``checked``; a parallel search's workers take
        the search's). A later failure of the server still falls back to cold runs."""
        if self.mode == "auto" and not self._disabled:
            self._checked = True

    def prepare(
        self,
        command: str | Sequence[str],
        cwd: str | os.PathLike[str],
        *,
        extra_env: Mapping[str, str],
    ) -> None:
        """Start the server a run of ``command`` in ``cwd`` with ``extra_env`` would use, so that
        it imports pytest while other work goes on (a parallel search's worker, while the root
        is tested). Nothing runs and nothing is said: the run decides, as ever, whether it goes
        warm (a server that failed to start is found out, and said, then)."""
        if self._disabled:
            return
        launch, env = self._launch(command, os.path.abspath(os.fspath(cwd)), extra_env)
        if isinstance(launch, str):
            return
        with contextlib.suppress(WarmServerError):
            self._server(launch, env)

    def clone(
        self,
        command: str | Sequence[str],
        cwd: str | os.PathLike[str],
        *,
        extra_env: Mapping[str, str],
    ) -> WarmClone | None:
        """A copy of the running server that runs of ``command`` in ``cwd`` with ``extra_env``
        use, for another process's runner (``adopt``; a parallel search's worker): it starts
        with pytest and what the runs taught it imported, without a start of its own. ``None``
        when no such server is running (or warm runs are off, or it cannot be copied)."""
        if self._disabled:
            return None
        launch, env = self._launch(command, os.path.abspath(os.fspath(cwd)), extra_env)
        if isinstance(launch, str):
            return None
        key = self._key(launch, env)
        server = self._servers.get(key)
        if server is None or not server.alive:
            return None
        try:
            sock, pid = server.clone()
        except WarmServerError:
            self._drop(server)  # its state is unknown; the next run here starts another
            return None
        self.copies += 1
        return WarmClone(key, pid, sock)

    def adopt(self, key: tuple[Any, ...], sock: socket.socket, pid: int) -> None:
        """Use the copy of a server another process's runner made (``clone``) for runs whose
        server key is ``key`` (a run with another key starts its own server, as ever)."""
        if self._disabled or key in self._servers:
            sock.close()  # the copy ends with its socket
            return
        with contextlib.suppress(WarmServerError):  # then the first run starts a server
            self._servers[key] = WarmServer.adopt(sock, pid, self._scratch_dir())
            _LIVE.add(self)

    def _launch(
        self, command: str | Sequence[str], cwd: str, extra_env: Mapping[str, str]
    ) -> tuple[Launch | str, dict[str, str]]:
        """How a warm run of ``command`` in ``cwd`` starts, with the environment it gets (for a
        shell line, the one ``/bin/sh`` gives its command); a string: why it cannot be warm."""
        env = inherited(extra_env)
        launch = plan(command, env, cwd)
        if isinstance(launch, str) or not launch.shell:
            return launch, env
        from_shell = self._shell_env(env, cwd, launch)
        if from_shell is None:
            return "cannot read the environment /bin/sh gives its commands", env
        return launch, from_shell

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
        launch: Launch | str
        if pytest:
            launch, env = self._launch(command, cwd, extra_env)
        else:
            launch, env = "not a pytest command", inherited(extra_env)
        if isinstance(launch, str):
            self.note(f"warm runner not used: {launch}; the tests run cold")
            return cold_run()
        if self._only_running and self._key(launch, env) not in self._servers:
            return cold_run()
        if not self._checked:
            # The check's cold run goes first, while a new server imports pytest beside it;
            # its result is what this run returns whatever happens next.
            with contextlib.suppress(WarmServerError):
                self._server(launch, env, wait=False)
            first = cold_run()
            cold_run = lambda: first  # noqa: E731 - the one cold run of this call
        try:
            server = self._server(launch, env)
            why = self._unsafe(server, workspace, cwd, env)
            for _ in range(2):  # without the warm-up, then without a learned package
                if why != "restart":
                    break
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

    def _server(self, launch: Launch, env: Mapping[str, str], *, wait: bool = True) -> WarmServer:
        """The server for runs of ``launch`` with ``env``, started if need be. ``wait=False``:
        only start it (its greeting is taken when it is next asked for)."""
        key = self._key(launch, env)
        server_env = dict(key[1])
        for _ in range(4):
            server = self._servers.get(key)
            if server is not None and not wait:
                return server
            if server is not None:
                try:
                    server.settle()
                except WarmUpError as exc:  # the same server without the warm-up session
                    self._drop(server)
                    self._warm_up = False
                    self.note(f"warm server started without its warm-up: {exc}")
                    continue
                except WarmServerError:
                    self._drop(server)
                    raise
                if server.alive and not server.threaded:
                    return server
                if server.threaded:  # a package started a thread: a fork could deadlock
                    self._deny.add(server.threaded.split(".")[0])
                    self._preload = [n for n in self._preload if n.split(".")[0] not in self._deny]
                self._drop(server)
            if len(self._servers) >= _MAX_SERVERS:
                self._drop(next(iter(self._servers.values())))
            try:
                self._servers[key] = WarmServer(
                    launch.interpreter,
                    server_env,
                    self._scratch_dir(),
                    self._preload,
                    self._deny,
                    warm_up=self._warm_up,
                    rewrite_cache=self._rewrite_cache,
                    spare=self._spare,
                    premade_args=launch.args if self._premade else None,
                    shell_parent=launch.shell and not shell_execs(),
                    wait=wait,
                )
            except WarmUpError as exc:  # the same server without the warm-up session
                self._warm_up = False
                self.note(f"warm server started without its warm-up: {exc}")
                continue
            self.servers_started += 1
            _LIVE.add(self)
        raise WarmServerError("the packages the tests import start threads in the server")

    @staticmethod
    def _key(launch: Launch, env: Mapping[str, str]) -> tuple[str, tuple[tuple[str, str], ...]]:
        """Which server runs ``launch`` with ``env``: the interpreter and the environment
        without what a child sets for itself and what pytest reads only when a session starts
        (a per-run value there, a plugin's file, must not cost a new server per run), nor the
        shell's ``PWD`` (the run's folder: the workers of a parallel search, each in its own
        folder, share copies of one server; the server itself runs in a scratch folder), nor
        coverage.py's data file and core (read when a coverage run starts, in the child)."""
        server_env = {
            k: v
            for k, v in env.items()
            if k not in _NOT_KEYED and not k.startswith(("TREESEARCH_", "PYTEST_"))
        }
        return (launch.interpreter, tuple(sorted(server_env.items())))

    def _drop(self, server: WarmServer) -> None:
        for key, value in list(self._servers.items()):
            if value is server:
                del self._servers[key]
        server.close()

    def _unsafe(
        self,
        server: WarmServer,
        workspace: str | os.PathLike[str],
        cwd: str,
        env: Mapping[str, str],
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
        if server.warmed & shadowed and self._warm_up:  # the warm-up imported it
            self._warm_up = False
            self._drop(server)
            return "restart"
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

    def _learn(self, server: WarmServer, modules_file: str) -> None:
        try:
            with open(modules_file, encoding="utf-8") as handle:
                written = json.load(handle)
            names = written["modules"]
            self.premade_runs += written["premade"] is True
        except (OSError, ValueError, KeyError, TypeError):
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
