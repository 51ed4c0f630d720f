"""What makes warm runs quick gives the results of cold runs (issue 15, part 2): the server's
warm-up session leaves nothing a test can see, the cache of rewritten test modules never serves
code of other bytes (even of the same size and time stamp), keeps pytest's warnings and steps
aside for a patched rewriter, pytest's configuration made in the server is taken only where a
cold run would make the same one, and the kept environment of ``/bin/sh`` is the one the shell
gives.

Real servers, real pytest, real child processes; every comparison is against a real cold run of
the same state."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_scoring_warm import QUICK_ENV, SERVER_SCRIPT, both, project, server_pids, spec, view

from treesearch import sandbox
from treesearch.scoring import Scorer, TestRun, run_tests
from treesearch.scoring.warm import WarmRunner
from treesearch.scoring.warm_plan import shell_execs
from treesearch.types import ProcessResult


def _mask_run_files(text: str) -> str:
    """A run's files (report, probe) are named after the run, in a scratch folder."""
    return re.sub(r"/score-[^/\"]*/(junit|probe)-\d+-\d+\.", r"/score-X/\1-N.", text)


def outcomes(run: TestRun) -> dict[str, str]:
    return {t.id.rsplit("::", 1)[-1]: t.outcome.value for t in run.tests}


def cached_entries(runner: WarmRunner) -> list[str]:
    assert runner._scratch is not None
    folder = runner._scratch / "rewritten"
    return sorted(os.listdir(folder)) if folder.is_dir() else []


@pytest.fixture
def runner() -> Iterator[WarmRunner]:
    with WarmRunner("on") as r:
        yield r


# --- the cache of rewritten test modules ----------------------------------------------------------


@pytest.mark.parametrize("interpreter", ["this", "python of PATH"])
def test_rewrite_cache_serves_no_code_of_other_bytes_of_the_same_size_and_time_stamp(
    tmp_path: Path, runner: WarmRunner, interpreter: str
) -> None:
    """Regression: a cache keyed by time stamp and size (pytest's own pyc check) would run the
    old code of a test file that a restore gave other bytes of the same size in the same second.
    Both interpreters: their pytest versions may differ (a stat or a source hash with the code)."""
    one = "def test_value():\n    assert 1 + 1 == 2\n"
    two = "def test_value():\n    assert 1 + 1 == 3\n"
    assert len(one) == len(two)
    ws = project(tmp_path / "ws", {"test_a.py": one})
    test_file = ws / "test_a.py"
    stamp = test_file.stat().st_mtime_ns
    if interpreter == "this":
        s = spec()
    else:
        s = spec(command="python -m pytest -q", env={**QUICK_ENV, "PATH": os.environ["PATH"]})
    seen = []
    for text in (one, one, two, two, one):
        test_file.write_text(text)
        os.utime(test_file, ns=(stamp, stamp))
        cold = run_tests(s, ws)
        warm = run_tests(s, ws, warm=runner)
        assert view(warm) == view(cold)
        seen.append(outcomes(warm)["test_value"])
    assert seen == ["passed", "passed", "failed", "failed", "passed"]
    assert runner.warm_runs == 5 and not runner.notes
    assert cached_entries(runner)  # the cache was there to be wrong


def test_rewrite_cache_gives_each_path_its_own_file_name_for_the_same_bytes(
    tmp_path: Path, runner: WarmRunner
) -> None:
    """The cache leaves the path out of its key (the probe plugin is copied to a new folder per
    run): a module served from it must still carry its own file name."""
    text = """
        import inspect
        def test_where():
            assert inspect.currentframe().f_code.co_filename == __file__
            assert 0, __file__
    """
    for name in ("a", "b"):
        ws = project(tmp_path / name, {"test_where.py": text})
        cold = run_tests(spec(), ws)
        warm = run_tests(spec(), ws, warm=runner)
        assert view(warm) == view(cold)
        (case,) = warm.tests
        assert case.outcome.value == "failed"
        assert str(ws / "test_where.py") in warm.output
        assert str(tmp_path / ("b" if name == "a" else "a")) not in warm.output
    assert cached_entries(runner)


def test_rewrite_cache_keeps_the_warnings_of_the_rewrite_and_of_the_compiler(
    tmp_path: Path, runner: WarmRunner
) -> None:
    """A rewrite that warns ("assertion is always true", an invalid escape) warns on every run,
    as a cold run does, and makes a ``-W error`` run fail the same way."""
    ws = project(
        tmp_path / "ws",
        {"test_w.py": 'import re\ndef test_tuple():\n    assert (re.match("\\d", "1"), "x")\n'},
    )
    for args in ((), ("-W", "error::pytest.PytestAssertRewriteWarning")):
        for _ in range(3):
            cold = run_tests(spec(*args), ws)
            warm = run_tests(spec(*args), ws, warm=runner)
            assert view(warm) == view(cold)
            assert "assertion is always true" in cold.output
            assert "assertion is always true" in warm.output
            assert ("invalid escape sequence" in warm.output) == (
                "invalid escape sequence" in cold.output
            )
    assert any(name.endswith(".warns") for name in cached_entries(runner))


@pytest.mark.parametrize("style", ["auto", "native", "long"])
def test_rewrite_cache_shows_a_test_module_that_does_not_compile_as_a_cold_run_does(
    tmp_path: Path, runner: WarmRunner, style: str
) -> None:
    """Regression: pytest's own ``_rewrite_test`` frame was missing from the traceback of a
    collection error when the cache compiled the module itself."""
    ws = project(
        tmp_path / "ws",
        {"test_ok.py": "def test_ok():\n    pass\n", "test_bad.py": "def test_bad(:\n    pass\n"},
    )
    s = spec(f"--tb={style}")
    for _ in range(2):
        cold = run_tests(s, ws)
        warm = run_tests(s, ws, warm=runner)
        assert view(warm) == view(cold)
        assert "in _rewrite_test" in cold.output
        assert re.sub(r"[\d.]+s", "", warm.output) == re.sub(r"[\d.]+s", "", cold.output)
    assert runner.warm_runs == 2


def test_rewrite_cache_steps_aside_for_a_conftest_that_patches_the_rewriter(
    tmp_path: Path, runner: WarmRunner
) -> None:
    ws = project(tmp_path / "ws", {"test_a.py": "def test_a():\n    assert 0\n"})
    cold = run_tests(spec(), ws)
    warm = run_tests(spec(), ws, warm=runner)
    assert view(warm) == view(cold) and outcomes(warm) == {"test_a": "failed"}
    (ws / "conftest.py").write_text(
        "import ast\n"
        "from _pytest.assertion import rewrite\n"
        "def visit_assert(self, node):\n"
        "    return [ast.copy_location(ast.Pass(), node)]\n"
        "rewrite.AssertionRewriter.visit_Assert = visit_assert\n"
    )
    cold = run_tests(spec(), ws)
    warm = run_tests(spec(), ws, warm=runner)
    assert outcomes(cold) == {"test_a": "passed"}  # its asserts are gone
    assert view(warm) == view(cold)


def test_warm_runs_without_the_cache_or_the_warm_up_give_the_same_results(
    tmp_path: Path,
) -> None:
    ws = project(tmp_path / "ws", {"test_a.py": "def test_a():\n    assert 0\n"})
    cold = run_tests(spec(), ws)
    with WarmRunner("on", warm_up=False, rewrite_cache=False) as plain:
        warm = run_tests(spec(), ws, warm=plain)
        assert view(warm) == view(cold) and plain.warm_runs == 1
        assert cached_entries(plain) == []


# --- the warm-up session --------------------------------------------------------------------------

_INSPECT = """
    import atexit, faulthandler, inspect, json, linecache, logging, os, sys, warnings
    import _pytest.assertion.util as util

    CONFIG_AT_IMPORT = repr(util._config)
    FILTERS_AT_IMPORT = len(warnings.filters)

    def _outside(path):
        return path is not None and "site-packages" not in path and "/lib/python" not in path

    def test_dump():
        root = logging.getLogger()
        modules = sorted(
            name for name, m in sys.modules.items()
            if _outside(getattr(m, "__file__", None)) and name != "__main__"
        )
        print("DUMP" + json.dumps({
            "modules": modules,
            "warm_up_modules": [n for n in sys.modules if "warm_up" in n or "warm_speed" in n],
            "handlers": [type(h).__name__ for h in root.handlers],
            "level": root.level,
            "disable": logging.root.manager.disable,
            "loggers": sorted(logging.root.manager.loggerDict),
            "filters_at_import": FILTERS_AT_IMPORT,
            "filters": [repr(f[:3]) for f in warnings.filters],
            "faulthandler": faulthandler.is_enabled(),
            "atexit": atexit._ncallbacks(),
            "last": [n for n in ("last_type", "last_value", "last_traceback") if hasattr(sys, n)],
            "config_at_import": CONFIG_AT_IMPORT,
            "linecache": sorted(k for k in linecache.cache if _outside(k)),
            "inspect": sorted(f for f in inspect.modulesbyfile if _outside(f)),
            "meta_path": [type(f).__name__ for f in sys.meta_path],
            "cwd": os.getcwd(),
            "env": sorted(k for k in os.environ if "PROBE" not in k),
            "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
        }))
"""


def dump(run: TestRun) -> dict[str, object]:
    line = next(x for x in run.output.splitlines() if x.startswith("DUMP"))
    data: dict[str, object] = json.loads(_mask_run_files(line[4:]))
    return data


def test_warm_up_session_leaves_nothing_a_test_can_see(tmp_path: Path, runner: WarmRunner) -> None:
    """Regression: the warm-up's test module and conftest left in ``sys.modules``, its last
    config in pytest's assertion helpers, its failures in ``sys.last_*``: a workspace would see
    them (and its own ``conftest`` would clash with the warm-up's)."""
    ws = project(
        tmp_path / "ws",
        {
            "conftest.py": "import pytest\n@pytest.fixture\ndef number():\n    return 4\n",
            "test_inspect.py": _INSPECT,
            "test_number.py": "def test_number(number):\n    assert number == 4\n",
        },
    )
    s = spec("-s")
    for _ in range(2):
        cold = run_tests(s, ws)
        warm = run_tests(s, ws, warm=runner)
        assert view(warm) == view(cold) and cold.exit_code == 0
        assert dump(warm) == dump(cold)
    assert dump(warm)["warm_up_modules"] == [] and dump(warm)["last"] == []
    assert runner.warm_runs == 2 and not runner.notes
    assert runner._scratch is not None and (runner._scratch / "warm-up").is_dir()  # it ran


def test_workspace_module_named_like_one_the_warm_up_imported_runs_warm_without_the_warm_up(
    tmp_path: Path, runner: WarmRunner
) -> None:
    """pytest's debugger plugin imports the standard library's ``code`` at every session, so the
    warm-up does too: a workspace's own ``code.py`` (which a cold run imports instead) gets a
    server started without the warm-up, not cold runs."""
    ws = project(
        tmp_path / "ws",
        {
            "code.py": "VALUE = 1\n",
            "test_a.py": "import code\ndef test_a():\n    assert code.VALUE\n",
        },
    )
    cold = run_tests(spec(), ws)
    warm = run_tests(spec(), ws, warm=runner)
    assert view(warm) == view(cold) and outcomes(cold) == {"test_a": "passed"}
    assert runner.warm_runs == 1 and not runner.notes


# --- the environment /bin/sh gives --------------------------------------------------------------


def test_kept_shell_environment_follows_the_folder_and_every_fixed_variable(
    tmp_path: Path, runner: WarmRunner
) -> None:
    test = """
        import json, os
        def test_env():
            print("DUMP" + json.dumps({k: v for k, v in os.environ.items()
                                       if "PROBE" not in k and k != "PYTEST_CURRENT_TEST"}))
    """
    bindir = os.path.dirname(sys.executable)
    seen = []
    for folder, mark in (("a", "1"), ("a", "1"), ("b", "1"), ("b", "2")):
        ws = project(tmp_path / folder, {"test_env.py": test})
        env = {**QUICK_ENV, "MARK": mark, "PATH": f"{bindir}:{os.environ.get('PATH', '')}"}
        s = spec("-s", command="python -m pytest -q -s", env=env)
        cold = run_tests(s, ws)
        warm = run_tests(s, ws, warm=runner)
        assert view(warm) == view(cold) and cold.exit_code == 0
        assert dump(warm) == dump(cold)
        seen.append((dump(warm)["PWD"], dump(warm)["MARK"]))
    assert seen == [
        (str(tmp_path / "a"), "1"),
        (str(tmp_path / "a"), "1"),
        (str(tmp_path / "b"), "1"),
        (str(tmp_path / "b"), "2"),
    ]
    assert runner.warm_runs == 4 and not runner.notes


# --- the spare child ----------------------------------------------------------------------------


def _wait_until(check: Callable[[], bool], seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


@pytest.mark.parametrize("how", ["argv", "shell line"])
def test_spare_child_forked_between_runs_ends_with_its_killed_server(
    tmp_path: Path, runner: WarmRunner, how: str
) -> None:
    """The server forks the next run's child ahead of time (for a shell line through dash, with
    the tests' process it forks ahead in turn); a server killed outright (no chance to end them)
    leaves none of them behind, and the runner goes on with a new server."""
    ws = project(tmp_path / "ws", {"test_a.py": "def test_a():\n    pass\n"})
    s = spec() if how == "argv" else spec(command=f"{sys.executable} -m pytest -q")
    cold = run_tests(s, ws)
    assert view(run_tests(s, ws, warm=runner)) == view(cold)
    assert runner._scratch is not None
    scratch = str(runner._scratch)
    (server,) = runner._servers.values()
    ahead = 3 if how == "shell line" and not shell_execs() else 2
    assert _wait_until(lambda: len(server_pids(scratch)) == ahead)  # the server, its spare(s)
    os.kill(server.proc.pid, signal.SIGKILL)
    server.proc.wait()
    assert _wait_until(lambda: not server_pids(scratch))
    assert view(run_tests(s, ws, warm=runner)) == view(cold)
    assert runner.warm_runs == 2


# --- pytest's configuration made in the server ----------------------------------------------------

_CONFIG_DUMP = """
    import json, os

    def pytest_configure(config):
        params = config.invocation_params
        with open(os.environ["CONFIG_DUMP"], "a") as out:
            out.write(json.dumps({
                "dir": str(params.dir), "args": list(params.args), "plugins": params.plugins,
                "rootpath": str(config.rootpath), "cwd": os.getcwd(),
                "skipping": config.pluginmanager.has_plugin("skipping"),
                "junitxml": config.pluginmanager.has_plugin("junitxml"),
                "runxfail": hasattr(config.option, "runxfail"),
                "registered": sorted(
                    name for name, plugin in config.pluginmanager.list_name_plugin()
                    if plugin is not None and name.startswith("_pytest")
                ),
            }) + "\\n")
"""
_XFAIL = """
    import pytest

    @pytest.mark.xfail(reason="known")
    def test_known():
        assert 0

    def test_plain():
        assert 1
"""


def config_dumps(path: Path) -> list[dict[str, object]]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    path.unlink()
    for row in rows:  # the run's report lives in its own scratch folder
        row["args"] = [_mask_run_files(str(a)) for a in row["args"]]
    return rows


def test_premade_config_is_taken_with_the_run_s_folder_arguments_and_plugins(
    tmp_path: Path, runner: WarmRunner
) -> None:
    """The server makes pytest's configuration ahead; a run that takes it sees the folder and
    arguments of its own call (not the server's), and the plugins of a cold run."""
    ws = project(tmp_path / "ws", {"conftest.py": _CONFIG_DUMP, "sub/test_a.py": _XFAIL})
    dumps = tmp_path / "dumps.jsonl"
    s = spec("sub", env={**QUICK_ENV, "CONFIG_DUMP": str(dumps)})
    for _ in range(3):
        cold = run_tests(s, ws)
        expected = config_dumps(dumps)
        warm = run_tests(s, ws, warm=runner)
        assert view(warm) == view(cold) and config_dumps(dumps) == expected
    assert expected[0]["dir"] == str(ws) and expected[0]["skipping"]
    assert runner.warm_runs == 3 and runner.premade_runs >= 2 and not runner.notes


@pytest.mark.parametrize("where", ["arguments", "ini addopts", "PYTEST_ADDOPTS"])
def test_premade_config_gives_the_cold_plugins_when_a_plugin_is_blocked(
    tmp_path: Path, runner: WarmRunner, where: str
) -> None:
    """``-p no:skipping`` in the arguments changes what ``get_config`` registers: the config
    made for other arguments must not be taken (the xfail test fails, as in a cold run). In an
    ini file's ``addopts`` or ``PYTEST_ADDOPTS`` it is read after ``get_config``, in the child,
    as in a cold run."""
    files = {"conftest.py": _CONFIG_DUMP, "test_a.py": _XFAIL}
    ws = project(tmp_path / "ws", files)
    dumps = tmp_path / "dumps.jsonl"
    env = {**QUICK_ENV, "CONFIG_DUMP": str(dumps)}
    plain = spec(env=env)
    run_tests(plain, ws, warm=runner)  # the server makes the config of these arguments
    run_tests(plain, ws, warm=runner)
    config_dumps(dumps)
    taken = runner.premade_runs
    assert taken >= 1
    if where == "arguments":
        blocked = spec("-p", "no:skipping", env=env)
    elif where == "ini addopts":
        (ws / "pytest.ini").write_text("[pytest]\naddopts = -p no:skipping\n")
        blocked = plain
    else:
        blocked = spec(env={**env, "PYTEST_ADDOPTS": "-p no:skipping"})
    for _ in range(3):
        cold = run_tests(blocked, ws)
        expected = config_dumps(dumps)
        warm = run_tests(blocked, ws, warm=runner)
        assert view(warm) == view(cold) and config_dumps(dumps) == expected
    assert outcomes(cold) == {"test_known": "failed", "test_plain": "passed"}
    assert not expected[0]["skipping"] and expected[0]["junitxml"]
    assert expected[0]["runxfail"] is (where != "arguments")  # options of a registered plugin
    assert runner.premade_runs > taken and not runner.notes


def test_premade_config_is_not_taken_when_pytest_debug_asks_for_its_trace(
    tmp_path: Path, runner: WarmRunner
) -> None:
    """``PYTEST_DEBUG`` (read by the plugin manager that ``get_config`` makes) traces every
    plugin's registration: a run with it makes its own configuration, as a cold run does."""
    conftest = _CONFIG_DUMP.replace(
        '"plugins": params.plugins,',
        '"plugins": params.plugins, "tracing": config.pluginmanager.trace.root._writer is not None,',
    )
    ws = project(
        tmp_path / "ws", {"conftest.py": conftest, "test_a.py": "def test_a():\n    assert 1\n"}
    )
    dumps = tmp_path / "dumps.jsonl"
    env = {**QUICK_ENV, "CONFIG_DUMP": str(dumps)}
    run_tests(spec(env=env), ws, warm=runner)
    run_tests(spec(env=env), ws, warm=runner)
    assert [row["tracing"] for row in config_dumps(dumps)] == [False, False]
    taken = runner.premade_runs
    assert taken >= 1
    s = spec(env={**env, "PYTEST_DEBUG": "1"})
    cold = run_tests(s, ws)
    expected = config_dumps(dumps)
    warm = run_tests(s, ws, warm=runner)
    assert view(warm) == view(cold) and config_dumps(dumps) == expected
    assert expected[0]["tracing"] and runner.premade_runs == taken


def test_conftest_that_registers_a_plugin_gives_the_cold_result_with_the_premade_config(
    tmp_path: Path, runner: WarmRunner
) -> None:
    ws = project(
        tmp_path / "ws",
        {
            "conftest.py": "pytest_plugins = ['helper_plugin']\n" + textwrap.dedent(_CONFIG_DUMP),
            "helper_plugin.py": """
                import pytest

                @pytest.fixture
                def answer():
                    return 42

                def pytest_configure(config):
                    config.pluginmanager.set_blocked("junitxml")
            """,
            "test_a.py": "def test_a(answer):\n    assert answer == 42\n",
        },
    )
    dumps = tmp_path / "dumps.jsonl"
    s = spec(env={**QUICK_ENV, "CONFIG_DUMP": str(dumps)})
    for _ in range(3):
        cold = run_tests(s, ws)
        expected = config_dumps(dumps)
        warm = run_tests(s, ws, warm=runner)
        assert view(warm) == view(cold) and config_dumps(dumps) == expected
    assert runner.premade_runs >= 2


# --- failure reports -----------------------------------------------------------------------------

_REWRITES_ITSELF = """
    import pathlib

    def check(value):
        assert value == [
            1, 2, 4,
        ]

    def test_first():
        check([1, 2, 3])

    def test_rewrite_this_file():
        path = pathlib.Path(__file__)
        path.write_text("# shifted\\n" * 3 + path.read_text())

    def test_after():
        check([1, 2, 5])

    def test_last():
        value = {"a": 1}
        assert value == {
            "a": 2,
        }
"""


def test_failure_reports_show_the_statements_of_the_source_as_it_is_at_each_failure(
    tmp_path: Path, runner: WarmRunner
) -> None:
    """A test that rewrites its own module between two failures at the same line gets the
    statement ranges of the new text in the later report, as in a cold run (the server's
    rewrite cache and warm-up must keep nothing of the old text)."""
    source = textwrap.dedent(_REWRITES_ITSELF)
    ws = project(tmp_path / "ws", {"test_a.py": source})
    s = spec("-vv")

    def text(run: TestRun) -> str:
        return re.sub(r"in \d+\.\d+s", "X", _mask_run_files(run.output))

    for _ in range(2):
        (ws / "test_a.py").write_text(source)
        cold = run_tests(s, ws)
        (ws / "test_a.py").write_text(source)
        warm = run_tests(s, ws, warm=runner)
        assert view(warm) == view(cold) and text(warm) == text(cold)
    assert "# shifted" in (ws / "test_a.py").read_text() and "AssertionError" in cold.output
    assert runner.warm_runs == 2 and not runner.notes


def test_unbuffered_output_of_a_warm_run_is_the_cold_run_s(
    tmp_path: Path, runner: WarmRunner
) -> None:
    """The client reads a run's output in gathers: every byte of many small unbuffered
    writes arrives, in order."""
    ws = project(
        tmp_path / "ws",
        {
            "test_a.py": """
                import sys, pytest

                @pytest.mark.parametrize("n", range(200))
                def test_n(n):
                    for i in range(15):
                        sys.stdout.write(f"{n}:{i} ")
                    assert n % 7
            """
        },
    )
    command = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider"]
    env = {**QUICK_ENV, "PYTHONUNBUFFERED": "1"}
    cold = sandbox.run(command, ws, timeout=60, extra_env=env)
    warm = runner.run(command, ws, timeout=60, extra_env=env, workspace=ws, cold=sandbox.run)
    clean = re.compile(r"in \d+\.\d+s")
    assert clean.sub("", warm.stdout) == clean.sub("", cold.stdout)
    assert (warm.stderr, warm.exit_code) == (cold.stderr, cold.exit_code)
    assert "199:14" in cold.stdout and "29 failed" in cold.stdout and runner.warm_runs == 1


# --- the tests' process forked ahead for a shell that does not exec -------------------------------

_FAMILY = """
    import os

    def test_family():
        leader = os.getpgrp()
        print("FAMILY", os.getpid() == leader, os.getppid() == leader, os.getsid(0) == leader)
"""


def test_spare_child_forked_for_a_shell_line_serves_argument_vectors_and_back(
    tmp_path: Path, runner: WarmRunner
) -> None:
    """A spare that expects a shell line (the last run's) has made its session and forked the
    tests' process ahead; an argument vector next makes it end that process and run the tests
    itself, and a shell line after an argument vector forks at the request: every run's process
    family is the cold run's (through dash: the shell leads the group and is the parent)."""
    ws = project(tmp_path / "ws", {"test_a.py": _FAMILY})
    env = {**QUICK_ENV, "PWD": str(ws)}  # what dash sets: one server for both kinds of run
    line = spec("-s", command=f"{sys.executable} -m pytest -q -s", env=env)
    vector = spec("-s", env=env)

    def family(run: TestRun) -> str:
        return next(x for x in run.output.splitlines() if x.startswith("FAMILY"))

    seen = []
    for s in (line, line, vector, vector, line, vector, line):
        cold, warm = both(s, ws, runner)
        assert view(warm) == view(cold) and family(warm) == family(cold)
        seen.append(family(cold))
    assert runner.warm_runs == 7 and not runner.notes and len(runner._servers) == 1
    assert seen[2] == "FAMILY True False True"  # an argument vector leads its group
    if not shell_execs():
        assert seen[0] == "FAMILY False True True"  # dash leads the group of a shell line


# --- the first run's check: the cold half beside the server's start ------------------------------


def test_auto_s_first_run_starts_the_server_before_its_cold_half_and_returns_that_cold_result(
    tmp_path: Path,
) -> None:
    """The check's cold run goes while a new server imports pytest (not after it): when the cold
    half starts, this runner's server process exists and has not been waited for. The result is
    the cold run's."""
    ws = project(tmp_path / "ws", {"test_a.py": "def test_a(): pass\ndef test_b(): assert 0\n"})
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    seen: list[tuple[list[int], list[bool]]] = []
    before = set(server_pids(SERVER_SCRIPT))  # (servers other tests of this process left)

    def cold(*args: object, **kw: object) -> ProcessResult:
        now = set(server_pids(SERVER_SCRIPT)) - before
        mine = [p for p in now if _parent(p) == os.getpid()]
        seen.append((mine, [s.greeted for s in auto._servers.values()]))
        return sandbox.run(*args, **kw)  # type: ignore[arg-type]

    with WarmRunner("auto") as auto:
        first = auto.run(command, ws, timeout=60, extra_env=QUICK_ENV, workspace=ws, cold=cold)
        # During the cold half: one server started, its greeting not yet waited for.
        assert len(seen) == 1 and len(seen[0][0]) == 1 and seen[0][1] == [False], seen
        assert (auto.cold_runs, auto.warm_runs, auto.notes) == (1, 1, [])
        second = auto.run(command, ws, timeout=60, extra_env=QUICK_ENV, workspace=ws, cold=cold)
        assert len(seen) == 1 and auto.warm_runs == 2  # checked: warm from now on
    assert first.exit_code == second.exit_code == 1 and "1 failed, 1 passed" in first.stdout


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return int(stat[1])


def test_a_run_that_asks_only_for_a_running_server_goes_cold_without_one_and_warm_with_one(
    tmp_path: Path,
) -> None:
    """The held-out grade at a search's end is one run: it takes a server already running (the
    search's), never starts one (a start costs more than a cold run)."""
    ws = project(tmp_path / "ws", {"test_a.py": "def test_a(): pass\ndef test_b(): assert 0\n"})
    before = set(server_pids(SERVER_SCRIPT))
    with WarmRunner("on") as runner:
        with runner.only_running():
            alone = run_tests(spec(), ws, warm=runner)
        assert (runner.cold_runs, runner.warm_runs) == (1, 0)
        assert not _started_here(before)  # no server was started for it
        run_tests(spec(), ws, warm=runner)  # an ordinary run starts the server
        with runner.only_running():
            shared = run_tests(spec(), ws, warm=runner)
        assert (runner.cold_runs, runner.warm_runs) == (1, 2)
    assert view(alone) == view(shared)


def test_scorer_grade_starts_no_warm_server_of_its_own(tmp_path: Path) -> None:
    ws = project(tmp_path / "ws", {"test_a.py": "def test_a(): pass\n"})
    before = set(server_pids(SERVER_SCRIPT))
    scorer = Scorer(spec(), warm="on")
    try:
        graded = scorer.grade(ws)
        assert graded.run.totals["passed"] == 1 and graded.resolved
        assert scorer.warm.cold_runs == 1 and scorer.warm.warm_runs == 0
        assert not _started_here(before)
    finally:
        scorer.close()


def _started_here(before: set[int]) -> list[int]:
    """Servers this process started since ``before`` (other processes' servers aside)."""
    return [p for p in set(server_pids(SERVER_SCRIPT)) - before if _parent(p) == os.getpid()]
