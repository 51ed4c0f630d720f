# ruff: noqa: SIM105, UP020, UP031 - it runs in the tests' interpreter: plain code, few imports
"""Parts of a child's pytest session that the warm server makes once (``_warm_server.py``).

Loaded by the server from a copy beside it, never put in ``sys.modules`` (a child does not see
it), like ``_warm_speed``, whose snapshot of the server's state it uses. Two things:

* ``PremadeConfig``: ``_pytest.config.get_config(args)`` (the plugin manager, the ``Config``,
  the registration of pytest's ~40 default plugins and their options) made in the server and
  taken by a child's first call when nothing it depends on differs.
* ``TreeMemo``: in a child, the syntax tree pytest parses from a source to show the statement
  of each traceback entry of a failure, kept for the next entry of the same source text
  (pytest parses the whole file again for every failure).

Standard library only, Python 3.9+: it runs in the interpreter of the tests. It never prints.
"""

import os
import sys
import warnings

# --- pytest's configuration, made in the server ---------------------------------------------------

_EVERY = "\0every variable"


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

    def __init__(self, site_dirs, snapshot, installed):
        self.site_dirs = site_dirs
        self.snapshot = snapshot
        self.installed = installed
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
        before = self.snapshot()
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
        after = self.snapshot()
        changed = [k for k in before if k not in ("modules", "linecache") and after[k] != before[k]]
        for name in set(sys.modules) - before["modules"]:
            path = getattr(sys.modules[name], "__file__", None)
            if path is None and name in sys.builtin_module_names:
                continue
            if not isinstance(path, str) or not self.installed(path, self.site_dirs):
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


# --- the syntax trees of failure reports ----------------------------------------------------------

# pytest's ``getstatementrange_ast`` (9.x, 8.x): the text this memo stands in front of.
_RANGE_HEAD = (
    "    if astnode is None:\n"
    "        content = str(source)\n"
    "        # See #4260:\n"
    "        # Don't produce duplicate warnings when compiling source to find AST.\n"
    "        with warnings.catch_warnings():\n"
    '            warnings.simplefilter("ignore")\n'
    '            astnode = ast.parse(content, "source", "exec")\n'
)
_MAX_TREES = 64


class TreeMemo:
    """``getstatementrange_ast`` given the tree of the same source text parsed before in this
    process: ``ast.parse`` of one text always gives the same tree, which pytest itself passes
    from one traceback entry to the next and never changes. A memo hit does what the parse
    would have done around it (a ``catch_warnings`` block that ignores warnings), so the
    warnings machinery sees the same changes. Installed only over the exact text it knows,
    used only while ``ast.parse`` is the one it saw. Its answer (a function of the line number
    and the source text, whose lines are the text's) is kept too, and
    ``get_statement_startend2``'s per tree of the memo (pytest 9.2 keeps its statements' line
    numbers on the tree itself)."""

    def __init__(self):
        self.trees = {}
        self.owned = {}  # id -> tree of ``trees`` (alive while there)
        self.ranges = {}
        self.results = {}  # (text, line number, assertion) -> the answer
        self.why_not = ""
        try:
            import ast
            import inspect

            from _pytest._code import code, source

            text = inspect.getsource(source.getstatementrange_ast)
        except BaseException as exc:  # noqa: BLE001
            self.why_not = "cannot read pytest's getstatementrange_ast (%s)" % (type(exc).__name__,)
            return
        if (
            _RANGE_HEAD not in text
            or code.getstatementrange_ast is not source.getstatementrange_ast
        ):
            self.why_not = "pytest's getstatementrange_ast is not one this memo knows"
            return
        self.modules = (source, code)
        self.source = source
        self.original = source.getstatementrange_ast
        self.startend = source.get_statement_startend2
        self.parse = ast.parse
        self.ast = ast

    def statement_range(self, lineno, source, assertion, astnode):
        """``getstatementrange_ast``'s answer, from the memo when it has this text."""
        __tracebackhide__ = True  # noqa: F841
        original = self.original
        if self.ast.parse is not self.parse:
            return original(lineno, source, assertion, astnode)
        content = str(source)
        tree = self.trees.get(content)
        if astnode is not None and astnode is not tree:
            return original(lineno, source, assertion, astnode)
        key = (content, lineno, assertion)
        found = self.results.get(key)
        if found is not None or tree is not None:
            if astnode is None:  # what the parse would have done around it
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
            if found is None:
                found = self.results[key] = original(lineno, source, assertion, tree)
            return found
        found = original(lineno, source, assertion, None)
        if len(self.trees) >= _MAX_TREES:
            for table in (self.trees, self.owned, self.ranges, self.results):
                table.clear()
        self.trees[content] = found[0]
        self.owned[id(found[0])] = found[0]
        self.results[key] = found
        return found

    def install(self):
        if self.why_not:
            return False
        memo, original = self, self.original

        def getstatementrange_ast(lineno, source, assertion=False, astnode=None):
            __tracebackhide__ = True  # noqa: F841 - pytest leaves this frame out of tracebacks
            return memo.statement_range(lineno, source, assertion, astnode)

        startend = self.startend

        def get_statement_startend2(lineno, node):
            if memo.owned.get(id(node)) is not node:
                return startend(lineno, node)
            key = (id(node), lineno)
            found = memo.ranges.get(key)
            if found is None:
                found = memo.ranges[key] = startend(lineno, node)
            return found

        for new, old in ((getstatementrange_ast, original), (get_statement_startend2, startend)):
            for name in ("__name__", "__qualname__", "__doc__", "__module__"):
                setattr(new, name, getattr(old, name))
        for module in self.modules:
            module.getstatementrange_ast = getstatementrange_ast
        self.source.get_statement_startend2 = get_statement_startend2
        return True
