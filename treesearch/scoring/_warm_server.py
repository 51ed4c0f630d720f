# ruff: noqa: SIM105, SIM115, UP020, UP031 - it runs in the tests' interpreter: plain code, few imports
# Over 700 lines: one script run by the tests' interpreter, which can import nothing of treesearch.
"""The warm pytest server: run by the interpreter of the tests, it imports pytest once and forks a
child per test run, which runs pytest in-process as ``python -m pytest`` would have.

Started by ``treesearch.scoring.warm`` as ``<python> <this file> <socket fd> <settings file>``
with the environment of the test runs (less their per-run variables), so that every interpreter
setting made at start-up (flags, locale, ``PYTHONDONTWRITEBYTECODE``, ...) is the one a cold run
gets. It never imports the workspace's own modules: it runs in a scratch folder, without
``PYTHONPATH``, and imports only pytest and the modules a settings file names (installed
packages the tests imported in earlier runs).

Protocol (a Unix stream socket; each message a 8-byte length and a JSON object, descriptors
attached to the length): the server says ``ready``; then per run the client sends ``run``
(argv, cwd, environment, ``PYTHONPATH`` entries, with stdout, stderr and the lifecycle
watchdog's pipe attached), the server answers ``pid``, then ``exit`` (the wait status) when the
child has ended, leaving it a zombie until the client sends ``reap`` (so that its process group
id cannot be reused while the client ends the group), and answers that with ``reaped``. The end
of the socket (the client died) ends the running child's group and the server. Between runs,
``clone`` (a socket attached) forks a copy of the server for another client on that socket, which
greets it as a new server would; the server answers with the copy's pid.

Standard library only, Python 3.9+: it runs in the interpreter of the tests. It never prints.
"""

import sys

_STARTUP = frozenset(sys.modules)  # what the interpreter itself imported: never shadowable

import atexit  # noqa: E402
import builtins  # noqa: E402
import gc  # noqa: E402
import importlib  # noqa: E402
import importlib.machinery  # noqa: E402
import importlib.util  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import runpy  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import struct  # noqa: E402
import traceback  # noqa: E402
import types  # noqa: E402

_HEADER = struct.Struct(">Q")
_MAX_FDS = 8


def _send(sock, message, fds=()):
    data = json.dumps(message).encode("utf-8")
    header = _HEADER.pack(len(data))
    if fds:
        socket.send_fds(sock, [header], list(fds))
    else:
        sock.sendall(header)
    sock.sendall(data)


def _recv_exact(sock, n):
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _recv(sock):
    header, fds, _flags, _addr = socket.recv_fds(sock, _HEADER.size, _MAX_FDS)
    if not header:
        raise EOFError
    if len(header) < _HEADER.size:
        header += _recv_exact(sock, _HEADER.size - len(header))
    (size,) = _HEADER.unpack(header)
    return json.loads(_recv_exact(sock, size).decode("utf-8")), list(fds)


def _site_dirs():
    """Folders of installed code: the standard library and site-packages (not ``.pth`` additions
    such as editable installs, which are source folders that may change)."""
    import site
    import sysconfig

    dirs = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(os.path.realpath(path))
    for path in site.getsitepackages() + [site.getusersitepackages()]:
        dirs.add(os.path.realpath(path))
    return sorted(dirs)


def _module_file(module):
    path = getattr(module, "__file__", None)
    return os.path.realpath(path) if isinstance(path, str) else None


def _installed(path, site_dirs):
    return path is not None and any(path.startswith(d + os.sep) for d in site_dirs)


def _preload(names, deny):
    """Import installed modules the tests used before; stop at one that starts a thread (a fork
    of a threaded process may deadlock) and return its name."""
    for name in names:
        if name in sys.modules or name.split(".")[0] in deny:
            continue
        try:
            importlib.import_module(name)
        except BaseException:  # noqa: BLE001 - whatever an import does, the server goes on
            continue
        if _threads() > 1:
            return name
    return None


def _threads():
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading

        return threading.active_count()


def _state(site_dirs):
    """The top-level modules this process has imported beyond the interpreter's start-up, and
    the files of all its modules (the client checks that none lies in the workspace)."""
    top = sorted({name.split(".")[0] for name in sys.modules} - _STARTUP - {"__main__"})
    files = sorted({f for f in map(_module_file, list(sys.modules.values())) if f})
    return {"modules": top, "files": files}


# --- the child: one test run ----------------------------------------------------------------------


def _stdio(fd, write, old):
    """A new ``sys.std*`` stream on ``fd``, made the way the interpreter makes them at start-up
    (the encoding, errors and buffering of the old one, line buffering for a terminal)."""
    unbuffered = write and bool(getattr(old, "write_through", False))
    raw = io.open(fd, "wb" if write else "rb", buffering=0 if unbuffered else -1, closefd=False)
    line = not unbuffered and (os.isatty(fd) or fd == 2)
    stream = io.TextIOWrapper(
        raw,
        encoding=old.encoding,
        errors=old.errors,
        newline="\n",
        line_buffering=line,
        write_through=unbuffered,
    )
    stream.mode = "w" if write else "r"
    return stream


def _start_time():
    try:
        with open("/proc/self/stat", "rb") as handle:
            return int(handle.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return 0


def _freeze():
    """Keep what the server imported out of the children's garbage collections (``gc.freeze``):
    a full collection in a child, which pytest makes at the end of a session, then walks only
    the child's own objects, and the pages of the server's objects stay shared."""
    global _SERVER_MODULES
    if _SPEED is not None:
        _SPEED.prime_inspect(_SITE_DIRS)
    _SERVER_MODULES = frozenset(sys.modules)
    gc.collect()
    gc.freeze()


def _thaw_on_introspection():
    """In a child: the functions that list the objects of the generations see the frozen ones
    again as a cold process would (they unfreeze them first)."""

    def thawing(original):
        def call(*args, **kwargs):
            gc.unfreeze()
            return original(*args, **kwargs)

        call.__name__ = original.__name__
        call.__qualname__ = original.__qualname__
        call.__doc__ = original.__doc__
        return call

    for name in ("get_objects", "get_referrers", "get_freeze_count"):
        setattr(gc, name, thawing(getattr(gc, name)))


def _child(request, fds, sock, spare=None):
    """In the forked child: become the cold run's process, run pytest, exit with its status.
    ``spare``: what a spare child made ahead (``_ahead``)."""
    if spare is None:
        _thaw_on_introspection()
    if spare is None or not spare["led"]:
        os.setsid()
    out_fd, err_fd = fds[0], fds[1]
    announce = fds[2] if len(fds) > 2 else None
    if announce is not None:  # tell the lifecycle watchdog about this group at once
        try:
            os.write(announce, ("%d %d\n" % (os.getpid(), _start_time())).encode("ascii"))
        except OSError:
            pass
        os.close(announce)
    os.close(sock.detach())
    tests = spare.get("tests") if spare is not None else None
    if tests is not None:
        pid, channel = tests
        if request.get("shell_parent"):  # the tests' process forked ahead takes the run
            _send(channel, request, [out_fd, err_fd])
            channel.close()
            _stdio_fds(out_fd, err_fd)
            _wait_as_shell(pid)
        channel.close()  # not a run through the shell: this process runs the tests
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass
    _stdio_fds(out_fd, err_fd)
    if request.get("shell_parent"):
        _shell_parent()
    _run_request(request)


def _stdio_fds(out_fd, err_fd):
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    for fd in {null, out_fd, err_fd} - {0, 1, 2}:
        os.close(fd)


def _run_request(request):
    """In the tests' process, its standard streams set: take the run's folder, environment,
    ``sys.path`` and ``__main__``, run pytest, exit with its status."""
    sys.stdin = sys.__stdin__ = _stdio(0, False, sys.__stdin__)  # type: ignore[misc]
    sys.stdout = sys.__stdout__ = _stdio(1, True, sys.__stdout__)  # type: ignore[misc]
    sys.stderr = sys.__stderr__ = _stdio(2, True, sys.__stderr__)  # type: ignore[misc]
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if _COERCED is not None and "LC_CTYPE" not in os.environ:
        os.environ["LC_CTYPE"] = _COERCED  # the interpreter's C locale coercion at start-up
    path = [os.path.abspath(p) for p in request["pythonpath"]]
    seen = set()
    entries = []
    for entry in path + list(request["base_path"]):
        key = os.path.normcase(os.path.abspath(entry)) if entry else entry
        if key not in seen:
            seen.add(key)
            entries.append(entry)
    if not getattr(sys.flags, "safe_path", False):
        if request["mode"] == "module":
            entries.insert(0, os.getcwd())
        elif request["mode"] == "command":
            entries.insert(0, "")  # ``python -c``: the current folder, as an empty entry
        else:
            entries.insert(0, os.path.dirname(os.path.realpath(request["target"])))
    sys.path[:] = entries
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()
    sys.orig_argv = list(request["orig_argv"])
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    if _PREMADE is not None:
        _PREMADE.arm()
    code = _run_main(request)
    _write_modules(request.get("modules_file"))
    _exit(code)


def _shell_parent():
    """Be ``/bin/sh -c`` of a shell that does not exec its lone command (dash): the group's
    leader, which waits for the tests' process and exits as the shell does (128 + n for a
    signal). The tests' process returns from here."""
    pid = os.fork()
    if pid == 0:
        return
    _wait_as_shell(pid)


def _wait_as_shell(pid):
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)


def _run_main(request):
    """Run the module or script as the interpreter would; the exit status it asks for."""
    try:
        if request["mode"] == "module":
            sys.argv = ["-m"] + list(request["args"])
            runpy._run_module_as_main(request["target"], alter_argv=True)
        elif request["mode"] == "command":
            sys.argv = ["-c"] + list(request["args"])
            main = sys.modules["__main__"]
            exec(compile(request["target"], "<string>", "exec"), main.__dict__)
        else:
            script = request["target"]
            sys.argv = [request["argv0"]] + list(request["args"])
            main = sys.modules["__main__"]
            main.__file__ = script
            main.__cached__ = None
            main.__loader__ = importlib.machinery.SourceFileLoader("__main__", script)
            with open(script, "rb") as handle:
                source = handle.read()
            exec(compile(source, script, "exec", dont_inherit=True), main.__dict__)
        return 0
    except SystemExit as exc:
        return _system_exit_code(exc)
    except KeyboardInterrupt:
        traceback.print_exc()
        return "SIGINT"
    except BaseException:  # noqa: BLE001 - the interpreter reports it and exits with 1
        sys.excepthook(*sys.exc_info())
        return 1


def _system_exit_code(exc):
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write(str(code) + "\n")
    except BaseException:  # noqa: BLE001
        pass
    return 1


def _write_modules(path):
    """Record the installed modules this run imported: the server imports them for later runs."""
    if not path:
        return
    try:
        names = sorted(
            name
            for name, module in list(sys.modules.items())
            if name not in _SERVER_MODULES  # the server has them (and the client knows why)
            and name not in _STARTUP
            and _installed(_module_file(module), _SITE_DIRS)
        )
        used = _PREMADE is not None and _PREMADE.used
        seen = _PREMADE.seen if _PREMADE is not None else None
        words = {"modules": names, "premade": used, "config_kwargs": seen}
        if _written({"modules_file": path}) != words:  # (a rewrite's truncation waits on disk)
            with open(path, "w", encoding="utf-8") as handle:
                json.dump(words, handle)
    except BaseException:  # noqa: BLE001 - a hint only
        pass


def _exit(code):
    """What the interpreter does at its end: wait for threads, run atexit, flush, exit."""
    threading = sys.modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()
        except BaseException:  # noqa: BLE001
            pass
    try:
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001
            if stream is sys.stdout and code == 0:
                code = 120
    if code == "SIGINT":
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 130
    os._exit(code)


# --- the server -----------------------------------------------------------------------------------


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001
            pass


def _kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def _ahead(channel, shell):
    """In a spare child, before its request: what does not depend on it. One that expects to
    be the ``/bin/sh`` of a shell that does not exec (the last run's was) makes its session and
    forks the tests' process now, which waits for the run on a channel of its own."""
    _thaw_on_introspection()
    made = {"led": False, "tests": None}
    if not shell:
        return made
    try:
        os.setsid()
        made["led"] = True
        here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
    except OSError:
        return made
    if pid == 0:
        try:
            os.close(channel.detach())
            here.close()
            try:
                request, fds = _recv(there)
            except BaseException:  # noqa: BLE001 - the spare ended or runs the tests itself
                os._exit(0)
            there.close()
            _stdio_fds(fds[0], fds[1])
            _run_request(request)
        except BaseException:  # noqa: BLE001 - the run's stderr says why, if it is set up
            traceback.print_exc()
        finally:
            os._exit(70)
    there.close()
    made["tests"] = (pid, here)
    return made


def _fork_spare(sock, shell=False):
    """Fork the child of the next run now, between runs (the fork and its first copies of pages
    then cost the next run nothing): it waits for its request on a channel of its own, and ends
    when the channel does (the server ended). Made after the server's state is final for the
    next run (after it imports what the last run taught it): the same process a fork at the
    request would give. (pid, channel), or None."""
    _flush()
    try:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
    except OSError:
        return None
    if pid == 0:
        try:
            os.close(sock.detach())
            ours.close()
            made = _ahead(theirs, shell)
            try:
                request, fds = _recv(theirs)
            except BaseException:  # noqa: BLE001 - the server ended or dropped this spare
                os._exit(0)
            _child(request, fds, theirs, made)
        except BaseException:  # noqa: BLE001 - the run's stderr says why, if it is set up
            traceback.print_exc()
        finally:
            os._exit(70)
    theirs.close()
    return pid, ours


def _drop_spare(spare):
    if spare is None:
        return
    pid, channel = spare
    channel.close()  # it ends at the end of its channel
    try:
        os.kill(pid, signal.SIGKILL)
        _kill_group(pid)  # the tests' process it forked ahead, if it did (before the reap)
        os.waitpid(pid, 0)
    except OSError:
        pass


def _use_spare(spare, request, fds):
    """Hand the run to the spare child: its pid, or None (it is gone: fork a new one)."""
    pid, channel = spare
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == 0:
            _send(channel, request, fds)
            channel.close()
            return pid
    except OSError:
        pass
    _drop_spare(spare)
    return None


def _serve_run(sock, request, fds, spare=None):
    """Start the child of one run (the spare, or a new fork), report its pid and its end, reap
    it when told to."""
    pid = _use_spare(spare, request, fds) if spare is not None else None
    if pid is None:
        _flush()
        pid = os.fork()
        if pid == 0:
            try:
                _child(request, fds, sock)
            except BaseException:  # noqa: BLE001 - the run's stderr says why, if it is set up
                traceback.print_exc()
            finally:
                os._exit(70)
    for fd in fds:
        os.close(fd)
    _send(sock, {"pid": pid})
    pidfd = os.pidfd_open(pid)
    try:
        while True:
            ready, _, _ = select.select([sock, pidfd], [], [])
            if pidfd in ready:
                break
            try:  # the client never talks during a run: data or EOF means it is gone
                _recv(sock)
            except (EOFError, OSError, ValueError):
                pass
            _kill_group(pid)
            os.waitpid(pid, 0)
            raise EOFError
    finally:
        os.close(pidfd)
    info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    status = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
    _send(sock, {"exit": status})
    message, _ = _recv(sock)  # "reap": the client has ended what was left of the group
    os.waitpid(pid, 0)
    return message


def _written(request):
    """What the last run's child wrote for the server (``_write_modules``)."""
    try:
        with open(request.get("modules_file") or "", encoding="utf-8") as handle:
            written = json.load(handle)
    except (OSError, ValueError):
        return {}
    return written if isinstance(written, dict) else {}


def _learn(request, written, deny, base_path):
    """Import the installed modules the last run imported (and this server had not)."""
    try:
        learned = [n for n in written.get("modules", ()) if n not in sys.modules]
    except TypeError:
        learned = []
    if not learned:
        return learned, None
    old = os.getcwd()
    try:
        os.chdir(request["cwd"])  # a package may read its settings from here at import
    except OSError:
        pass
    threaded = _preload(learned, deny)
    os.chdir(old)
    sys.path[:] = base_path
    _freeze()
    return learned, threaded


def _premade(args, written, base_path):
    """Make pytest's configuration for the next run (``PremadeConfig.make``)."""
    kwargs = written.get("config_kwargs")
    config = _PREMADE.config
    _PREMADE.make(args, kwargs if isinstance(kwargs, dict) else _PREMADE.kwargs)
    sys.path[:] = base_path
    if _PREMADE.config is not config:
        _freeze()


def _load(name, folder):
    """A helper module from its copy in ``folder`` (not in ``sys.modules``: no child sees it)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(folder, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _speed(settings, folder):
    """Install the rewrite cache, make the warm-up session and pytest's config (``_warm_speed``)
    as asked; what became of each, for the client."""
    out = {}
    name = settings.get("speed_module")
    if not name:
        return out
    try:
        speed = _load(name, folder)
    except BaseException as exc:  # noqa: BLE001 - the server runs as it would without it
        return {"rewrite_cache": "cannot load %s: %s" % (name, exc)}
    if settings.get("rewrite_cache"):
        cache = speed.RewriteCache(settings["rewrite_cache"])
        out["rewrite_cache"] = "" if cache.install() else cache.why_not
    if settings.get("warm_up"):
        global _SPEED
        out["warm_up"], out["warmed"] = speed.warm_up(settings["warm_up"], _SITE_DIRS)
        _SPEED = speed
    if settings.get("premade"):
        global _PREMADE
        _PREMADE = speed.PremadeConfig(_SITE_DIRS)
        _PREMADE.make(settings.get("pytest_args") or [])
        out["premade"] = _PREMADE.why_not
    return out


def main():
    sock = socket.socket(fileno=int(sys.argv[1]))
    with open(sys.argv[2], encoding="utf-8") as handle:
        settings = json.load(handle)
    path0 = sys.path[0]
    base_path = sys.path[1:]  # the server's own folder is not a test run's
    sys.path[:] = base_path
    global _SITE_DIRS, _COERCED
    _SITE_DIRS = _site_dirs()
    if os.environ.get("LC_CTYPE") != settings.get("lc_ctype"):
        _COERCED = os.environ.get("LC_CTYPE")
    try:
        import pytest
    except BaseException as exc:  # noqa: BLE001 - said to the client, which runs cold
        _send(sock, {"ready": False, "error": "cannot import pytest: %s" % (exc,)})
        return
    deny = set(settings.get("deny") or ())
    threaded = _preload(settings.get("preload") or (), deny)
    sys.path[:] = base_path
    speed = _speed(settings, path0)
    sys.path[:] = base_path
    _freeze()
    global _HELLO
    _HELLO = {
        "ready": True,
        "base_path": base_path,
        "server_dir": path0,
        "pytest": str(getattr(pytest, "__version__", "")),
        **speed,
    }
    _send(sock, dict(_HELLO, pid=os.getpid(), threaded=threaded, **_state(_SITE_DIRS)))
    _serve(sock, settings, deny, base_path, threaded)
    _reap_clones(wait=1.0)


def _serve(sock, settings, deny, base_path, threaded=None):
    """Answer the client's requests until it ends (or a run taught the server a module that
    starts a thread: the client starts a new server without it)."""
    shell = settings.get("shell_parent")
    spare = _fork_spare(sock, shell) if settings.get("spare") and not threaded else None
    while True:
        try:
            request, fds = _recv(sock)
        except (EOFError, OSError):
            return
        _reap_clones()
        if request.get("op") == "clone" and fds:
            _clone(sock, fds, spare, settings, deny, base_path)
            continue
        if request.get("op") != "run":
            _drop_spare(spare)
            return
        try:
            _serve_run(sock, request, fds, spare)
        except (EOFError, OSError):
            return
        spare = None
        written = _written(request)
        learned, threaded = _learn(request, written, deny, base_path)
        reply = {"reaped": True, "threaded": threaded}
        if learned:
            reply.update(_state(_SITE_DIRS))
        try:
            _send(sock, reply)
        except OSError:
            return
        if threaded:
            return  # the client starts a new server without that module
        if _PREMADE is not None:
            _premade(request["args"], written, base_path)
        spare = _fork_spare(sock, request.get("shell_parent")) if settings.get("spare") else None


def _clone(sock, fds, spare, settings, deny, base_path):
    """Fork a server for another client (a parallel search's worker), whose socket is
    ``fds[0]``: this process as it is (pytest, what the runs taught it, its configuration made),
    in a session of its own, greeting its client as a new server does; a fraction of a start.
    This server answers with its pid (-1: the fork failed)."""
    _flush()
    try:
        pid = os.fork()
    except OSError:
        pid = -1
    if pid == 0:
        try:
            os.close(sock.detach())
            if spare is not None:
                spare[1].close()  # the spare child is this server's
            for fd in fds[1:]:
                os.close(fd)
            del _CLONES[:]  # the server's other copies are not this one's children
            os.setsid()
            client = socket.socket(fileno=fds[0])
            _send(client, dict(_HELLO, pid=os.getpid(), threaded=None, **_state(_SITE_DIRS)))
            _serve(client, settings, deny, base_path)
        except BaseException:  # noqa: BLE001 - the client sees the socket end and runs cold
            traceback.print_exc()  # into the server's log
        finally:
            os._exit(0)
    for fd in fds:
        os.close(fd)
    if pid > 0:
        _CLONES.append(pid)
    _send(sock, {"clone": pid})


def _reap_clones(wait=0.0):
    """Reap the copies that ended; ``wait``: wait up to that many seconds for the others (at
    the server's end: they end with their clients, and a copy reaped here counts its CPU time,
    its runs' included, in this server's children and so in its client's)."""
    for _ in range(max(int(wait * 100), 1)):
        for pid in list(_CLONES):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except OSError:
                done = pid
            if done:
                _CLONES.remove(pid)
        if not _CLONES or not wait:
            return
        select.select([], [], [], 0.01)


_SITE_DIRS = []  # type: list[str]
_COERCED = None
_SPEED = None  # the module ``_warm_speed`` when the server warms up
_PREMADE = None  # its ``PremadeConfig``: pytest's configuration, made for the next run
_SERVER_MODULES = frozenset()  # type: frozenset[str]
_HELLO = {}  # type: dict[str, object]  # the greeting, less what is each process's own (``_clone``)
_CLONES = []  # type: list[int]

if __name__ == "__main__":
    main()
