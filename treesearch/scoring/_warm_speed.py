# ruff: noqa: SIM105, UP020, UP031 - it runs in the tests' interpreter: plain code, few imports
"""What makes a warm server's children quick, with the same results (``_warm_server.py``).

The one module of treesearch that names pytest's private internals (``_pytest``) or the import
system's (``_imp``); ``tests/test_private_names.py`` fails on such a name anywhere else. Each
part is kept for a gain measured with and without it in one run (the warm runner's time per
test run, on the demo project and on marshmallow's ``tests/test_fields.py``, a SWE-bench
checkout; figures below), and runs under every pytest the warm runner accepts
(``tests/test_scoring_warm_matrix.py``: 6.2, 7.4, 8.x, 9.x warm against cold). The other
patches of pytest's and pluggy's internals the warm runner had (a memo of the failure reports'
syntax trees, pluggy 1.6's ``varnames``, the server's import of pytest's default plugins) each
saved less than 10% of a warm run and are gone.

Loaded by the server from a copy beside it, never put in ``sys.modules`` (a child does not see
it). Four things:

* ``warm_up``: one pytest session in the server, on a scratch project outside every workspace,
  so that what pytest builds lazily on first use (compiled patterns, lazily imported modules)
  is built once in the server instead of in every child. Everything such a session leaves that
  a test could see is put back (environment, folder, ``sys.path``, import hooks, modules of the
  scratch project, warnings filters, logging, fault handler, exit handlers, hooks,
  ``sys.last_*``, caches of source lines, the last config kept in ``_pytest.assertion.util``)
  and checked, with open files and threads; whatever stays changed is said, and the client
  starts its servers without a warm-up. Measured gain (with ``prime_inspect``), warm run
  time without it over with it: demo 1.25x and 1.31x, marshmallow 1.02x-1.16x.
* ``prime_inspect``: ``inspect.getmodule``'s tables of module files for the installed modules
  (a child's first failure report otherwise walks every module with ``realpath``). Measured
  gain: demo (6 of 10 tests fail) 1.14x and 1.20x; marshmallow (no failure) 0.98x-1.03x.
* ``RewriteCache``: pytest rewrites the asserts of every test module and conftest in every run
  (the runs write no bytecode, so pytest's own pyc cache is never there). The cache keeps the
  rewritten code in the server's scratch folder under a hash of the source BYTES, the
  interpreter, pytest's version and the rewrite's option: never under time stamps or sizes (a
  restored state may hold other bytes of the same size within the same second), and not under
  the path (the code gets the file's name put in, with ``_imp._fix_co_filename``). It is used
  only for the exact ``_rewrite_test`` texts it knows (pytest 8.x and 9.x; under 6.2 and 7.4 it
  steps aside), only while nothing the rewrite depends on has been replaced (a plugin that
  patches the rewriter gets pytest's own path), never for a source whose rewrite warns, and a
  source that does not compile goes to pytest's own function (same traceback). Measured gain
  (pytest 9.2): demo 1.08x and 1.16x, marshmallow 1.23x and 1.16x.
* ``PremadeConfig``: ``_pytest.config.get_config(args)`` (the plugin manager, the ``Config``,
  the registration of pytest's ~40 default plugins and their options) made in the server and
  taken by a child's first call when nothing it depends on differs. Measured gain: alone,
  marshmallow 1.05x (pytest 7.4) and 1.08x (pytest 9.2); with the three parts above, demo
  1.10x (127.0 ms a warm run without it, 115.0 ms with it; CPU 92.6 and 81.3 ms, 1.14x).

The figures: two runs on 2 shared cores (2026-12, on 750ef54's code), each test run's median wall time
without the part over with it, every variant a warm runner of its own, interleaved round by
round (30-40 rounds); ``tests/test_fields.py`` of marshmallow at 8b3a326 (77 tests) under
pytest 7.4.4 and 9.2.0. Removed for less: the syntax-tree memo 0.97x-1.06x, ``varnames``
1.03x-1.04x under pluggy 1.6 (pluggy 1.7 never used it), the server's import of pytest's
default plugins 1.00x-1.02x (a run teaches the server them). Those three removed and
``PremadeConfig`` kept were then measured together, in a third run (2026-12, 750ef54's code
with the removed parts switched off, Python 3.11.7, pytest 9.2.0, 2 shared cores): 40
interleaved rounds, warm runner mode ``on``, the demo project (10 tests, 6 failing), a median
warm run of 113.8 ms with every patch, 115.0 ms (1.01x) with the kept four, 127.0 ms (1.12x;
CPU 1.15x) with the kept three only. Without ``PremadeConfig`` a warm run would take more than
10% longer than before, which issue 32 does not allow. The script is
``experiments/benchmarks/warm_patches.py`` (its docstring: how to run it on 750ef54), e.g.
``--rounds 40 --variants "kept + PremadeConfig;kept only (warm_up, prime, RewriteCache)"``.

Standard library only, Python 3.9+: it runs in the interpreter of the tests. It never prints.
"""

import gc
import hashlib
import inspect
import io
import linecache
import logging
import marshal
import os
import sys
import warnings
from _imp import _fix_co_filename  # type: ignore[attr-defined]  # the import system's own

# --- the warm-up session --------------------------------------------------------------------------

# A small project laid out as most are (settings in pyproject.toml, tests in a folder, a module
# of its own): pytest runs through the paths it takes in a real run.
_SUITE = {
    "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["."]\ntestpaths = ["tests"]\n',
    "treesearch_warm_up_helper/__init__.py": "def double(n):\n    return 2 * n\n",
    "conftest.py": ("import pytest\n\n\n@pytest.fixture\ndef number():\n    return 3\n"),
    "tests/test_treesearch_warm_up.py": (
        "import pytest\n"
        "from treesearch_warm_up_helper import double\n\n\n"
        "def test_pass(number):\n"
        "    assert double(number) == 6\n\n\n"
        "def test_fail():\n"
        "    left = {'a': [1, 2], 'b': 'text'}\n"
        "    assert left == {'a': [1, 3], 'b': 'other'}\n\n\n"
        "def test_raise():\n"
        "    raise ValueError('warm-up')\n\n\n"
        "def test_skip():\n"
        "    pytest.skip('warm-up')\n\n\n"
        "@pytest.mark.xfail(reason='warm-up')\n"
        "def test_xfail():\n"
        "    assert 0\n\n\n"
        "@pytest.mark.parametrize('n', [1, 2])\n"
        "def test_param(n):\n"
        "    assert n == 1\n\n\n"
        "class TestClass:\n"
        "    def test_method(self):\n"
        "        with pytest.raises(KeyError):\n"
        "            {}['x']\n"
    ),
}
_SUITE_MODULES = ("conftest", "test_treesearch_warm_up", "treesearch_warm_up_helper")
_HOOKS = ("excepthook", "unraisablehook", "displayhook", "breakpointhook")
_LAST = ("last_type", "last_value", "last_traceback", "last_exc")


def _fds():
    try:
        return sorted(int(n) for n in os.listdir("/proc/self/fd"))
    except OSError:
        return None


def _threads():
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None


def _snapshot():
    threading = sys.modules.get("threading")
    root = logging.getLogger()
    return {
        "environ": dict(os.environ),
        "cwd": os.getcwd(),
        "path": list(sys.path),
        "meta_path": list(sys.meta_path),
        "path_hooks": list(sys.path_hooks),
        "modules": set(sys.modules),
        "warnings": list(warnings.filters),
        "showwarning": warnings.showwarning,
        "handlers": list(root.handlers),
        "level": root.level,
        "disable": logging.root.manager.disable,
        "loggers": set(logging.root.manager.loggerDict),
        "faulthandler": _faulthandler_enabled(),
        "atexit": _atexit_count(),
        "hooks": [getattr(sys, name, None) for name in _HOOKS],
        "thread_hook": getattr(threading, "excepthook", None) if threading else None,
        "last": [name for name in _LAST if hasattr(sys, name)],
        "streams": (sys.stdin, sys.stdout, sys.stderr),
        "trace": (sys.gettrace(), sys.getprofile()),
        "recursion": sys.getrecursionlimit(),
        "gc": (gc.isenabled(), gc.get_threshold()),
        "linecache": dict(linecache.cache),
        "fds": _fds(),
        "threads": _threads(),  # a fork of a process with threads may deadlock
        "dont_write_bytecode": sys.dont_write_bytecode,
    }


def _faulthandler_enabled():
    module = sys.modules.get("faulthandler")
    return bool(module and module.is_enabled())


def _atexit_count():
    import atexit

    return atexit._ncallbacks()


def _restore(before, site_dirs):
    """Put back what a session may have changed; the differences that could not be put back."""
    os.chdir(before["cwd"])
    os.environ.clear()
    os.environ.update(before["environ"])
    sys.path[:] = before["path"]
    sys.meta_path[:] = before["meta_path"]
    sys.path_hooks[:] = before["path_hooks"]
    sys.path_importer_cache.clear()
    for name in set(sys.modules) - before["modules"]:
        module = sys.modules[name]
        path = getattr(module, "__file__", None)
        installed = isinstance(path, str) and _installed(path, site_dirs)
        if name in _SUITE_MODULES or not installed:
            del sys.modules[name]
    warnings.filters[:] = before["warnings"]
    warnings._filters_mutated()
    warnings.showwarning = before["showwarning"]
    for name in _LAST:
        if name not in before["last"] and hasattr(sys, name):
            delattr(sys, name)
    linecache.cache.clear()
    linecache.cache.update(before["linecache"])
    prime_inspect(site_dirs)
    util = sys.modules.get("_pytest.assertion.util")
    if util is not None:  # the last test's config and hooks, kept by pytest for the next
        for name in ("_reprcompare", "_assertion_pass", "_config"):
            if hasattr(util, name):
                setattr(util, name, None)
    after = _snapshot()
    left = []
    for key, value in before.items():
        if key in ("modules", "linecache", "environ"):
            continue
        if after[key] != value:
            left.append(key)
    if after["environ"] != before["environ"]:
        left.append("environ")
    return left


def _installed(path, site_dirs):
    real = os.path.realpath(path)
    return any(real.startswith(d + os.sep) for d in site_dirs)


# Kept for its gain: 1.14x-1.20x on the demo, whose failures pytest shows (see above).
def prime_inspect(site_dirs):
    """Fill ``inspect.getmodule``'s tables of module files for the installed modules imported
    here, as its first call in a child would (it walks every module of ``sys.modules``: a few
    hundred ``realpath`` calls in every run whose failure pytest shows with its source).
    Nothing else stays in them: not the scratch suite's, not this server's ``__main__``."""
    names = getattr(inspect, "_filesbymodname", None)
    files = getattr(inspect, "modulesbyfile", None)
    if not isinstance(names, dict) or not isinstance(files, dict):
        return
    names.clear()
    files.clear()
    try:
        for modname, module in list(sys.modules.items()):
            path = getattr(module, "__file__", None) if inspect.ismodule(module) else None
            if modname == "__main__" or not isinstance(path, str):
                continue
            if not _installed(path, site_dirs):
                continue
            names[modname] = path
            absolute = inspect.getabsfile(module)
            files[absolute] = files[os.path.realpath(absolute)] = module.__name__
    except Exception:  # noqa: BLE001 - as if never primed: a child fills them itself
        names.clear()
        files.clear()


def warm_up(folder, site_dirs):
    """Run the scratch suite once in this process; '' or what it left behind, and the top-level
    names of the (installed) modules it imported."""
    import pytest

    for name, text in _SUITE.items():
        path = os.path.join(folder, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    before = _snapshot()
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.chdir(folder)
        os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # no third-party plugin in here
        for name in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"):
            os.environ.pop(name, None)
        args = [
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "junit_family=xunit1",
            "--junitxml=" + os.path.join(folder, "junit.xml"),
        ]
        try:
            pytest.main(args)
        except BaseException as exc:  # noqa: BLE001 - said to the client
            return "the warm-up session raised %s" % (type(exc).__name__,), []
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except BaseException:  # noqa: BLE001
                    pass
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved + [null]:
            os.close(fd)
        left = _restore(before, site_dirs)
    added = sorted({name.split(".")[0] for name in set(sys.modules) - before["modules"]})
    if left:
        return "the warm-up session left changes in: " + ", ".join(left), added
    return "", added


# --- the cache of rewritten test modules ----------------------------------------------------------

# The exact texts of pytest's ``_rewrite_test`` this cache stands in for, and what their first
# returned value is: the stat of the file (before reading it) or ``importlib.util.source_hash``.
_KNOWN = {
    "\n".join(
        (
            "def _rewrite_test(fn: Path, config: Config) -> tuple[os.stat_result, types.CodeType]:",
            '    """Read and rewrite *fn* and return the code object."""',
            "    stat = os.stat(fn)",
            "    source = fn.read_bytes()",
            "    strfn = str(fn)",
            "    tree = ast.parse(source, filename=strfn)",
            "    rewrite_asserts(tree, source, strfn, config)",
            '    co = compile(tree, strfn, "exec", dont_inherit=True)',
            "    return stat, co",
            "",
        )
    ): "stat",
    "\n".join(
        (
            "def _rewrite_test(fn: Path, config: Config) -> tuple[bytes, types.CodeType]:",
            '    """Read and rewrite *fn* and return its source hash and code object."""',
            "    source = fn.read_bytes()",
            "    source_hash = importlib.util.source_hash(source)",
            "    strfn = str(fn)",
            "    tree = ast.parse(source, filename=strfn)",
            "    rewrite_asserts(tree, source, strfn, config)",
            '    co = compile(tree, strfn, "exec", dont_inherit=True)',
            "    return source_hash, co",
            "",
        )
    ): "hash",
}
# The one use of the config in the rewriter these versions make (its option is in the key): the
# class must name ``config`` nowhere else.
_INIT = (
    "        if config is not None:\n"
    "            self.enable_assertion_pass_hook = config.getini(\n"
    '                "enable_assertion_pass_hook"\n'
    "            )\n"
    "        else:\n"
    "            self.enable_assertion_pass_hook = False\n"
)
_MAX_ENTRIES = 4000


# Kept for its gain: a warm run takes 1.08x-1.23x as long without it (pytest 9.2; see above).
class RewriteCache:
    """Rewritten test modules by their bytes, shared by the children of the runner's servers."""

    def __init__(self, folder):
        self.folder = folder
        self.why_not = ""
        self.original = None
        try:
            from _pytest.assertion import rewrite

            text = inspect.getsource(rewrite._rewrite_test)
            init = inspect.getsource(rewrite.AssertionRewriter.__init__)
            whole = inspect.getsource(rewrite.AssertionRewriter)
        except BaseException as exc:  # noqa: BLE001
            self.why_not = "cannot read pytest's rewrite (%s)" % (type(exc).__name__,)
            return
        self.kind = _KNOWN.get(text)
        if self.kind is None:
            self.why_not = "pytest's _rewrite_test is not one this cache knows"
            return
        if _INIT not in init or whole.count("config") != init.count("config"):
            self.why_not = "pytest's AssertionRewriter reads its config in an unknown way"
            return
        import ast
        import importlib.util

        import _pytest

        self.rewrite = rewrite
        self.original = rewrite._rewrite_test
        self.salt = repr(
            (
                sys.version,
                sys.implementation.cache_tag,
                importlib.util.MAGIC_NUMBER,
                sys.flags.optimize,
                getattr(_pytest, "__version__", None),
                rewrite.__file__,
                text,
            )
        ).encode("utf-8")
        # Everything the rewrite reads: replaced by a plugin or a test, and the cache steps aside.
        self.parts = [
            (space, dict(vars(space)))
            for space in (rewrite, rewrite.AssertionRewriter, ast.NodeVisitor, importlib.util)
        ]
        # ast's functions (not its node classes: a few hundred objects a check would touch)
        self.ast = ast
        self.ast_functions = {
            name: value for name, value in vars(ast).items() if not isinstance(value, type)
        }
        self.builtin_compile = compile
        os.makedirs(folder, exist_ok=True)

    def _unchanged(self):
        import builtins

        if builtins.compile is not self.builtin_compile or "compile" in vars(self.rewrite):
            return False
        current = vars(self.ast)
        for name, value in self.ast_functions.items():
            if current.get(name, self) is not value:
                return False
        for space, saved in self.parts:
            current = vars(space)
            if len(current) != len(saved):
                return False
            for name, value in saved.items():
                if current.get(name, self) is not value:
                    return False
        return True

    def install(self):
        """Put the cached ``_rewrite_test`` in pytest's place (in this process and its forks)."""
        if self.original is None:
            return False
        cache = self

        def _rewrite_test(fn, config):
            __tracebackhide__ = True  # noqa: F841 - pytest leaves this frame out of tracebacks
            if cache._unchanged():
                try:
                    return cache.rewrite_test(fn, config)
                except Exception:  # noqa: BLE001, S110 - the original says it, as a cold run does
                    pass
            return cache.original(fn, config)

        _rewrite_test.__name__ = self.original.__name__
        _rewrite_test.__qualname__ = self.original.__qualname__
        _rewrite_test.__doc__ = self.original.__doc__
        _rewrite_test.__module__ = self.original.__module__
        self.wrapper = _rewrite_test
        self.rewrite._rewrite_test = _rewrite_test
        self.parts[0][1]["_rewrite_test"] = _rewrite_test
        return True

    def rewrite_test(self, fn, config):
        """``_rewrite_test`` with the code taken from the cache when these bytes were seen.

        The key leaves the path out (a plugin copied to a new folder per run is the same
        module): a cached code object gets the file's name put in (as the import system does
        for a moved ``.pyc``). A source whose rewrite or compilation warns (a ``SyntaxWarning``,
        pytest's "assertion is always true") is never served from the cache: a cold run would
        warn again."""
        __tracebackhide__ = True  # noqa: F841
        rewrite = self.rewrite
        first = os.stat(fn) if self.kind == "stat" else None
        source = fn.read_bytes()
        if self.kind == "hash":
            first = rewrite.importlib.util.source_hash(source)
        strfn = str(fn)
        option = config.getini("enable_assertion_pass_hook") if config is not None else False
        digest = hashlib.sha256(self.salt)
        for part in (repr(option).encode(), source):
            digest.update(len(part).to_bytes(8, "big"))
            digest.update(part)
        entry = os.path.join(self.folder, digest.hexdigest())
        code = self._load(entry)
        if code is not None:
            if code.co_filename != strfn:
                _fix_co_filename(code, strfn)
            return first, code
        # What the original does, with these bytes (never read again: they could change).
        tree = rewrite.ast.parse(source, filename=strfn)
        rewrite.rewrite_asserts(tree, source, strfn, config)
        code = compile(tree, strfn, "exec", dont_inherit=True)
        if not os.path.exists(entry + ".warns"):
            self._store(entry, source, strfn, config)
        return first, code

    def _load(self, entry):
        try:
            with open(entry, "rb") as handle:
                data = handle.read()
        except OSError:
            return None
        try:
            code = marshal.loads(data)
        except (EOFError, ValueError, TypeError):
            return None
        return code if isinstance(code, type(self.rewrite_test.__code__)) else None

    def _store(self, entry, source, strfn, config):
        """Rewrite again with every warning recorded (nothing shown, nothing raised); keep the
        code only if there was none, else a marker that spares this check next time."""
        rewrite = self.rewrite
        try:
            if len(os.listdir(self.folder)) >= _MAX_ENTRIES:
                return
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                tree = rewrite.ast.parse(source, filename=strfn)
                rewrite.rewrite_asserts(tree, source, strfn, config)
                code = compile(tree, strfn, "exec", dont_inherit=True)
            if seen:
                data, entry = b"", entry + ".warns"
            else:
                data = marshal.dumps(code)
            part = "%s.%d.part" % (entry, os.getpid())
            with io.open(part, "wb") as handle:
                handle.write(data)
            os.replace(part, entry)
        except Exception:  # noqa: BLE001 - a cache only: the run goes on with its own code
            pass


# --- pytest's configuration, made in the server ---------------------------------------------------

_EVERY = "\0every variable"


# Kept for its gain: with the other kept parts and without it, a warm run of the demo took 127.0 ms
# against 115.0 ms with it (1.10x; CPU 1.14x), and 1.12x the 113.8 ms of every patch of 750ef54
# (past the 10% the issue allows); alone, marshmallow 1.05x and 1.08x (pytest 7.4, 9.2). See above.
class PremadeConfig:
    """``_pytest.config.get_config(args)`` made once in the server, taken by its children.

    ``get_config`` depends only on the ``-p no:NAME`` options among the arguments (it blocks
    those plugins before registering the rest), on the environment variables it reads
    (recorded while it runs: ``PYTEST_DEBUG``, the locale's for argparse's messages, ...) and
    on the current folder (``invocation_params``). A child takes the premade configuration in
    place of its first ``get_config`` call only when that call has the same ``-p no:`` options
    in the same order and no ``plugins``, and every variable read holds the value it had;
    ``invocation_params`` then gets the run's arguments and folder as ``get_config`` would have
    made them. Keyword arguments of the call (pytest 9.1's ``prog``) must be the ones it was
    made with: a child tells the server those of its call (``seen``), which makes the next
    one with them. Any other call goes to pytest's own ``get_config`` (and every later call does:
    pytester's runs, ``pytest.main`` in a test). What comes after (``PYTEST_ADDOPTS``, ini
    files and their ``addopts``, ``-p`` plugins, ``PYTEST_PLUGINS``, conftests) runs in the
    child as in a cold run. Made only when it warns nothing, reads the environment only by
    name, and leaves the server as the warm-up session's checks see it."""

    def __init__(self, site_dirs):
        self.site_dirs = site_dirs
        self.key = None
        self.kwargs = {}
        self.config = None
        self.reads = {}
        self.seen = None
        self.why_not = "not made yet"
        self.used = False

    @staticmethod
    def key_of(args):
        """The ``consider_pluginarg`` calls ``get_config`` makes for ``args`` (pytest's code)."""
        from _pytest.config import PytestPluginManager

        calls = []

        class Recorder:
            consider_pluginarg = staticmethod(calls.append)

        if args:
            PytestPluginManager.consider_preparse(Recorder(), tuple(args), exclude_only=True)
        return tuple(calls)

    def make(self, args, kwargs=None):
        """Make the configuration of a run with ``args`` and the keyword arguments ``kwargs``
        of its call (unless the one held fits them)."""
        kwargs = dict(kwargs or {})
        try:
            key = self.key_of(args)
        except Exception as exc:  # noqa: BLE001 - a usage error: the child's own call says it
            self.config, self.key = None, None
            self.why_not = "its arguments do not parse (%s)" % (type(exc).__name__,)
            return
        if self.config is not None and key == self.key and kwargs == self.kwargs:
            return
        self.config, self.key, self.kwargs, self.why_not = None, key, kwargs, ""
        before = _snapshot()
        reads = {}
        config, seen = self._call(list(args), kwargs, reads)
        changed = self._changes(before)
        if config is None:
            return
        if seen:
            self.why_not = "get_config warned: %s" % (seen[0].message,)
        elif _EVERY in reads:
            self.why_not = "get_config read every environment variable"
        elif changed:
            self.why_not = "get_config changed " + ", ".join(sorted(set(changed)))
        else:
            self.config, self.reads = config, reads

    def _call(self, args, kwargs, reads):
        """``get_config(args)`` as ``pytest.main`` calls it, with the variables it reads; the
        config (None if it raised) and the warnings it gave."""
        import pytest
        from _pytest import config as module

        environ = os.environ
        plain = type(environ)

        class Recording(plain):
            def __getitem__(self, name):
                try:
                    value = plain.__getitem__(self, name)
                except KeyError:
                    reads.setdefault(name, None)
                    raise
                reads.setdefault(name, value)
                return value

            def __iter__(self):
                reads[_EVERY] = True
                return plain.__iter__(self)

        version = environ.get("PYTEST_VERSION")
        environ["PYTEST_VERSION"] = pytest.__version__  # as pytest.main sets it
        seen = []
        try:
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                environ.__class__ = Recording
                try:
                    return module.get_config(args, **kwargs), seen
                finally:
                    environ.__class__ = plain
        except BaseException as exc:  # noqa: BLE001 - the child makes its own
            self.why_not = "get_config raised %s" % (type(exc).__name__,)
            return None, seen
        finally:
            if version is None:
                environ.pop("PYTEST_VERSION", None)
            else:
                environ["PYTEST_VERSION"] = version

    def _changes(self, before):
        after = _snapshot()
        changed = [k for k in before if k not in ("modules", "linecache") and after[k] != before[k]]
        for name in set(sys.modules) - before["modules"]:
            path = getattr(sys.modules[name], "__file__", None)
            if path is None and name in sys.builtin_module_names:
                continue
            if not isinstance(path, str) or not _installed(path, self.site_dirs):
                changed.append("sys.modules")
        return changed

    def fits(self, args, plugins, kwargs):
        if plugins is not None or not isinstance(args, list) or kwargs != self.kwargs:
            return False
        try:
            if not all(isinstance(arg, str) for arg in args) or self.key_of(args) != self.key:
                return False
        except Exception:  # noqa: BLE001 - pytest's own get_config says what is wrong
            return False
        return all(os.environ.get(name) == value for name, value in self.reads.items())

    def arm(self):
        """In a child, before pytest starts: its first ``get_config`` call takes the premade
        configuration when it fits, and pytest's own ``get_config`` is back in place."""
        module = sys.modules.get("_pytest.config")
        if self.config is None or module is None:
            return
        original = module.get_config
        premade = self

        def get_config(*positional, **kwargs):
            if module.get_config is get_config:
                module.get_config = original
            config, premade.config = premade.config, None
            known = dict(zip(("args", "plugins"), positional))  # noqa: B905 - Python 3.9
            extra = {k: v for k, v in kwargs.items() if k not in known}
            for name in ("args", "plugins"):
                if name in extra:
                    known[name] = extra.pop(name)
            if all(isinstance(v, (str, int, float, bool, type(None))) for v in extra.values()):
                premade.seen = extra
            args, plugins = known.get("args"), known.get("plugins")
            if (
                config is None
                or len(positional) > 2
                or len(known) + len(extra) != len(positional) + len(kwargs)
                or not premade.fits(args, plugins, extra)
            ):
                return original(*positional, **kwargs)
            import pathlib

            params = module.Config.InvocationParams(
                args=args or (), plugins=plugins, dir=pathlib.Path.cwd()
            )
            config.invocation_params = params
            premade.used = True
            return config

        for name in ("__name__", "__qualname__", "__doc__", "__module__"):
            setattr(get_config, name, getattr(original, name))
        module.get_config = get_config
