"""The warm test runner (issue 15, part 2): pytest runs forked from a real warm server give the
results of cold runs, test by test, and no server or test process outlives its runner.

Real servers, real pytest, real child processes; every comparison is against a real cold run of
the same state."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from treesearch.config import validate
from treesearch.errors import ConfigError
from treesearch.scoring import RunStatus, Scorer, TestRun, TestSpec, run_tests
from treesearch.scoring.warm import WarmRunner, plan

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "experiments" / "demo" / "project"
BUGS = ROOT / "experiments" / "bugs"
QUICK_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTEST_ADDOPTS": ""}
SERVER_SCRIPT = "_treesearch_warm_server.py"


def spec(*args: str, command: str | None = None, **kwargs: object) -> TestSpec:
    fields: dict[str, object] = {
        "command": command or (sys.executable, "-m", "pytest", "-q", *args),
        "timeout": 60,
        "env": QUICK_ENV,
    }
    fields.update(kwargs)
    return TestSpec(**fields)  # type: ignore[arg-type]


def project(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if "pytest.ini" not in files:
        (root / "pytest.ini").write_text("[pytest]\n")
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def view(run: TestRun) -> tuple[object, ...]:
    """What a search sees of a run: status, exit code, outcome per test, problem."""
    return (
        run.status,
        run.exit_code,
        run.timed_out,
        sorted((t.id, t.outcome.value) for t in run.tests),
        run.problem,
    )


def both(s: TestSpec, ws: Path, runner: WarmRunner) -> tuple[TestRun, TestRun]:
    cold = run_tests(s, ws)
    warm = run_tests(s, ws, warm=runner)
    return cold, warm


@pytest.fixture
def runner() -> Iterator[WarmRunner]:
    with WarmRunner("on") as r:
        yield r


def server_pids(text: str) -> list[int]:
    """Live processes whose command line holds ``text`` (zombies are dead)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
            state = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if text.encode() in cmdline and state != b"Z":
            found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state != b"Z"


def wait_until(check: object, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return bool(check())  # type: ignore[operator]


# --- which commands run warm ----------------------------------------------------------------------


def test_plan_takes_python_m_pytest_and_refuses_shell_features_and_other_programs() -> None:
    env = dict(os.environ)
    ok = plan("python -m pytest -q 'tests/a b.py'", env, "/")
    assert not isinstance(ok, str) and ok.args == ("-q", "tests/a b.py") and ok.shell
    assert not isinstance(plan([sys.executable, "-m", "pytest"], env, "/"), str)
    for refused in (
        "python -m pytest | tee log",
        "python -m pytest $ARGS",
        "FOO=1 python -m pytest",
        "python -X dev -m pytest",
        "make test",
        "python -m unittest",
        "python -m pytest; rm -rf x",
    ):
        assert isinstance(plan(refused, env, "/"), str), refused


# --- same results as cold runs ------------------------------------------------------------------

SCENARIOS: dict[str, dict[str, str]] = {
    "passes and failures": {
        "test_a.py": """
            import pytest
            def test_ok(): assert 1
            def test_bad(): assert 0
            @pytest.mark.skip
            def test_skipped(): pass
            @pytest.mark.xfail
            def test_xfail(): assert 0
            @pytest.mark.xfail
            def test_xpass(): pass
            @pytest.mark.parametrize("n", [1, 2])
            def test_param(n): assert n == 1
        """,
    },
    "sys.exit in a test": {
        "test_a.py": "import sys\ndef test_x(): sys.exit(3)\ndef test_y(): pass\n"
    },
    "os._exit in a test": {
        "test_a.py": "import os\ndef test_x(): os._exit(3)\ndef test_y(): pass\n"
    },
    "segfault": {
        "test_a.py": "import ctypes\ndef test_x(): ctypes.string_at(0)\ndef test_y(): pass\n"
    },
    "collection error": {
        "test_a.py": "def test_ok(): pass\n",
        "test_b.py": "def test_broken(:\n",
    },
    "sys.exit at import": {
        "conftest.py": "import sys\nsys.exit(4)\n",
        "test_a.py": "def test_a(): pass\n",
    },
    "pytest.exit": {
        "test_a.py": "import pytest\ndef test_x(): pytest.exit('stop', 2)\ndef test_y(): pass\n"
    },
    "no tests": {"test_a.py": "x = 1\n"},
    "gc introspection": {
        "test_a.py": """
            import gc, _pytest.config
            def test_objects(): assert any(o is _pytest.config.main for o in gc.get_objects())
            def test_referrers(): assert gc.get_referrers(_pytest.config.main.__code__)
            def test_not_frozen(): assert gc.get_freeze_count() == 0
        """,
    },
    "a thread left running at the end": {
        "test_a.py": """
            import threading, time
            def test_x():
                threading.Thread(target=time.sleep, args=(0.5,)).start()
        """,
    },
    "atexit and output": {
        "test_a.py": """
            import atexit, sys
            atexit.register(lambda: print("bye from atexit"))
            def test_x():
                print("out " * 5000)
                print("err", file=sys.stderr)
                assert 0
        """,
    },
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_warm_run_gives_the_cold_result(name: str, tmp_path: Path, runner: WarmRunner) -> None:
    ws = project(tmp_path / "ws", SCENARIOS[name])
    cold, warm = both(spec(), ws, runner)
    assert view(warm) == view(cold)
    assert runner.warm_runs == 1 and runner.cold_runs == 0 and not runner.notes


def test_warm_run_through_the_shell_gives_the_cold_exit_status_of_a_segfault(
    tmp_path: Path, runner: WarmRunner
) -> None:
    ws = project(
        tmp_path / "ws", {"test_a.py": "import ctypes\ndef test_x(): ctypes.string_at(0)\n"}
    )
    s = spec(command=f"{sys.executable} -m pytest -q", env=QUICK_ENV)
    cold, warm = both(s, ws, runner)
    assert view(warm) == view(cold) and cold.status is not RunStatus.OK
    assert runner.warm_runs == 1


@pytest.mark.parametrize("how", ["argv", "shell line", "pytest script"])
def test_warm_child_sees_the_path_argv_environment_and_folder_of_a_cold_run(
    tmp_path: Path, runner: WarmRunner, how: str
) -> None:
    ws = project(
        tmp_path / "ws",
        {
            "sub/test_env.py": """
                import json, os, sys
                def test_dump():
                    main = sys.modules["__main__"]
                    print("DUMP" + json.dumps({
                        "path": sys.path, "argv": sys.argv, "orig_argv": sys.orig_argv,
                        "cwd": os.getcwd(), "executable": sys.executable,
                        "env": {k: v for k, v in os.environ.items()
                                if not k.startswith("PYTEST_CURRENT")},
                        "main": [main.__name__, getattr(main, "__file__", None)],
                        "flags": list(sys.flags), "bytecode": sys.dont_write_bytecode,
                        "stdout": [sys.stdout.encoding, sys.stdout.line_buffering],
                        "stdin": os.isatty(0), "pgrp": os.getpgrp() == os.getpid(),
                    }))
            """,
        },
    )
    extra = tmp_path / "extra"
    extra.mkdir()
    bindir = os.path.dirname(sys.executable)
    env = {**QUICK_ENV, "PYTHONPATH": f"{extra}:rel", "MARK": "1"}
    env["PATH"] = f"{bindir}:{os.environ.get('PATH', '')}"
    command = {
        "argv": None,
        "shell line": "python -m pytest -q -s sub",
        "pytest script": "pytest -q -s sub",
    }[how]
    s = spec("-s", "sub", command=command, env=env)
    cold, warm = both(s, ws, runner)
    assert view(warm) == view(cold) and cold.status is RunStatus.OK
    assert runner.warm_runs == 1 and not runner.notes

    def dump(run: TestRun) -> dict[str, Any]:
        line = next(x for x in run.output.splitlines() if x.startswith("DUMP"))
        # The run's files (report, probe) have names of their own in a scratch folder.
        data = json.loads(re.sub(r"-\d+-\d+\.(xml|json)", r"-N.\1", line[4:]))
        data["env"] = {k: v for k, v in data["env"].items() if "PROBE" not in k}
        return data

    assert dump(warm) == dump(cold)
    path = set(dump(warm)["path"])
    assert {str(extra), str(ws / "rel")} <= path and (str(ws) in path) == (how != "pytest script")


def test_warm_runs_see_modules_changed_between_runs_and_no_state_of_earlier_runs(
    tmp_path: Path, runner: WarmRunner
) -> None:
    ws = project(
        tmp_path / "ws",
        {
            "mod.py": "VALUE = 1\nSEEN = []\n",
            "test_a.py": """
                import sys, mod
                def test_value(): assert mod.VALUE == 2
                def test_fresh():
                    mod.SEEN.append(1)
                    assert mod.SEEN == [1]
                    assert "leaked_marker" not in sys.modules
                    sys.modules["leaked_marker"] = mod
            """,
        },
    )
    first = run_tests(spec(), ws, warm=runner)
    assert {t.id: t.outcome.value for t in first.tests} == {
        "test_a.py::test_value": "failed",
        "test_a.py::test_fresh": "passed",
    }
    (ws / "mod.py").write_text("VALUE = 2\nSEEN = []\n")
    second = run_tests(spec(), ws, warm=runner)
    assert {t.id: t.outcome.value for t in second.tests} == {
        "test_a.py::test_value": "passed",
        "test_a.py::test_fresh": "passed",
    }
    assert runner.warm_runs == 2 and not runner.notes


def test_installed_package_the_server_learned_is_dropped_for_a_workspace_that_shadows_it(
    tmp_path: Path, runner: WarmRunner
) -> None:
    # Run 1 imports the installed `yaml`: the server imports it for later runs. A workspace with
    # its own yaml.py must get its own module, as a cold run does, not the server's.
    first = project(tmp_path / "a", {"test_a.py": "import yaml\ndef test_a(): assert yaml.dump\n"})
    run_tests(spec(), first, warm=runner)
    run_tests(spec(), first, warm=runner)
    assert "yaml" in next(iter(runner._servers.values())).modules
    own = project(
        tmp_path / "b",
        {"yaml.py": "MINE = True\n", "test_b.py": "import yaml\ndef test_b(): assert yaml.MINE\n"},
    )
    cold, warm = both(spec(), own, runner)
    assert view(warm) == view(cold) and cold.status is RunStatus.OK
    assert runner.warm_runs == 3 and not runner.notes
    assert "yaml" not in next(iter(runner._servers.values())).modules


def test_per_run_plugin_variables_keep_one_server_and_reach_each_run(
    tmp_path: Path, runner: WarmRunner
) -> None:
    # Another part of treesearch may load a plugin with a per-run file (TREESEARCH_*, PYTEST_*).
    ws = project(
        tmp_path / "ws",
        {"test_a.py": "import os\ndef test_a(): assert os.environ['TREESEARCH_X'] == 'two'\n"},
    )
    pids = []
    for value in ("one", "two"):
        env = {**QUICK_ENV, "TREESEARCH_X": value, "PYTEST_ADDOPTS": f"-o junit_suite_name={value}"}
        run = run_tests(spec(env=env), ws, warm=runner)
        assert run.status is RunStatus.OK
        assert [t.outcome.value for t in run.tests] == ["failed" if value == "one" else "passed"]
        pids.append([s.proc.pid for s in runner._servers.values()])
    assert pids[0] == pids[1] and len(pids[0]) == 1


def test_warm_timeout_ends_the_whole_process_group_grandchild_included(
    tmp_path: Path, runner: WarmRunner
) -> None:
    pid_file = tmp_path / "grandchild.pid"
    ws = project(
        tmp_path / "ws",
        {
            "test_a.py": f"""
                import subprocess, time
                def test_hang():
                    p = subprocess.Popen(["sleep", "300"])
                    open({str(pid_file)!r}, "w").write(str(p.pid))
                    time.sleep(300)
            """,
        },
    )
    s = spec(timeout=5)
    warm = run_tests(s, ws, warm=runner)
    assert warm.status is RunStatus.TIMEOUT and warm.timed_out
    assert wait_until(lambda: not alive(int(pid_file.read_text())))
    pid_file.unlink()
    cold = run_tests(s, ws)
    assert view(warm)[:4] == view(cold)[:4] and warm.problem == cold.problem
    assert wait_until(lambda: not alive(int(pid_file.read_text())))


# --- when it is not used, it says so ------------------------------------------------------------


def test_shell_line_with_shell_features_runs_cold_with_a_note(
    tmp_path: Path, runner: WarmRunner
) -> None:
    ws = project(tmp_path / "ws", {"test_a.py": "def test_a(): pass\n"})
    s = spec(command=f"cd . && {sys.executable} -m pytest -q", runner="pytest")
    run = run_tests(s, ws, warm=runner)
    assert run.status is RunStatus.OK and runner.warm_runs == 0 and runner.cold_runs == 1
    assert len(runner.notes) == 1 and "shell features" in runner.notes[0]


def test_workspace_module_named_like_a_module_pytest_uses_runs_cold_with_a_note(
    tmp_path: Path, runner: WarmRunner
) -> None:
    ws = project(
        tmp_path / "ws",
        {"inspect.py": "from importlib import *\n", "test_a.py": "def test_a(): pass\n"},
    )
    cold, warm = both(spec(), ws, runner)
    assert view(warm) == view(cold)
    assert runner.warm_runs == 0 and runner.cold_runs == 1
    assert "inspect" in runner.notes[0]


def test_server_that_cannot_import_pytest_falls_back_to_cold_runs_with_a_note(
    tmp_path: Path, runner: WarmRunner
) -> None:
    venv = tmp_path / "venv"  # an interpreter without pytest
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    ws = project(tmp_path / "ws", {"test_a.py": "def test_a(): pass\n"})
    s = spec(
        command="python -m pytest -q",
        env={**QUICK_ENV, "PATH": f"{venv / 'bin'}:/usr/bin:/bin", "PYTHONNOUSERSITE": "1"},
    )
    cold, warm = both(s, ws, runner)
    assert view(warm) == view(cold) and cold.status is not RunStatus.OK
    assert runner.warm_runs == 0 and "warm runner off" in runner.notes[0]
    assert "pytest" in runner.notes[0]


def test_auto_checks_the_first_run_against_a_cold_one_and_turns_off_on_a_difference(
    tmp_path: Path,
) -> None:
    # A test that can tell a fork of the server from a cold interpreter: auto must notice.
    ws = project(
        tmp_path / "ws",
        {
            "test_a.py": f"""
                import os
                def test_parent():
                    cmd = open(f"/proc/{{os.getppid()}}/cmdline", "rb").read()
                    assert b"{SERVER_SCRIPT}" not in cmd
            """,
        },
    )
    with WarmRunner("auto") as auto:
        run = run_tests(spec(), ws, warm=auto)
        assert run.status is RunStatus.OK and run.totals["passed"] == 1  # the cold result
        assert auto.cold_runs == 1 and auto.warm_runs == 1
        assert "differed from a cold run" in auto.notes[0]
        run_tests(spec(), ws, warm=auto)
        assert auto.cold_runs == 2 and auto.warm_runs == 1


def test_auto_uses_the_server_after_a_first_run_that_agrees(tmp_path: Path) -> None:
    ws = project(tmp_path / "ws", {"test_a.py": "def test_a(): pass\ndef test_b(): assert 0\n"})
    with WarmRunner("auto") as auto:
        first = run_tests(spec(), ws, warm=auto)
        second = run_tests(spec(), ws, warm=auto)
        assert view(first) == view(second)
        assert (auto.cold_runs, auto.warm_runs, auto.notes) == (1, 2, [])


# --- configuration, scorer, CLI -----------------------------------------------------------------


def test_scoring_warm_config_reads_yaml_on_and_off_and_names_a_bad_value(tmp_path: Path) -> None:
    base = {
        "workspace": {"path": str(tmp_path)},
        "strategies": {"s": {"kind": "scripted", "steps": []}},
    }
    for text, want in (("off", "off"), ("on", "on"), ("auto", "auto")):
        raw = {**base, "scoring": yaml.safe_load(f"warm: {text}")}
        loaded = validate(raw, source="c.yaml", base_dir=tmp_path)
        assert loaded.config.scoring.warm == want
    with pytest.raises(ConfigError, match=r"c\.yaml: scoring\.warm: must be"):
        validate({**base, "scoring": {"warm": "sometimes"}}, source="c.yaml", base_dir=tmp_path)
    scorer = Scorer.from_config({"warm": False})
    assert scorer.warm.mode == "off"


def test_scorer_close_ends_its_server(tmp_path: Path) -> None:
    ws = project(tmp_path / "ws", {"test_a.py": "def test_a(): pass\n"})
    scorer = Scorer(spec(), warm="on")
    assert scorer.score(ws).run.totals["passed"] == 1 and scorer.warm.warm_runs == 1
    pids = [s.proc.pid for s in scorer.warm._servers.values()]
    assert pids and all(alive(p) for p in pids)
    scorer.close()
    assert not any(alive(p) for p in pids)


def test_cli_score_warm_on_gives_the_cold_result_and_leaves_no_server(tmp_path: Path) -> None:
    ws = project(tmp_path / "ws", {"test_a.py": "def test_a(): pass\ndef test_b(): assert 0\n"})
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, **QUICK_ENV, "TMPDIR": str(tmp), "TREESEARCH_HOME": str(tmp_path / "h")}
    outputs = []
    for mode in ("off", "on"):
        done = subprocess.run(
            [sys.executable, "-m", "treesearch", "score", "--no-cache", "--json", "--warm", mode,
             "--workspace", str(ws), "--tests", f"{sys.executable} -m pytest -q"],
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        data = json.loads(done.stdout)
        tests = sorted((t["id"], t["outcome"]) for t in data["run"]["tests"])
        outputs.append((data["score"], data["run"]["status"], tests))
    assert outputs[0] == outputs[1]
    # Nothing of the runs is left: the warm server ends with the command; the lifecycle
    # watchdog (its command line names a file under TMPDIR too) ends at its next look at its
    # dead parent, so it is given a few seconds.
    deadline = time.monotonic() + 10
    while server_pids(str(tmp)) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = server_pids(str(tmp))
    assert left == [], [Path(f"/proc/{p}/cmdline").read_bytes()[:200] for p in left]


def _search_config(tmp_path: Path, command: str, warm: str) -> dict[str, object]:
    proj = project(
        tmp_path / f"proj-{warm}",
        {
            "calc.py": "def add(a, b):\n    return a - b\n",
            "test_calc.py": "from calc import add\n"
            "def test_add(): assert add(2, 3) == 5\n"
            "def test_zero(): assert add(0, 0) == 0\n",
        },
    )
    fix = {"replace": "calc.py", "old": "a - b", "new": "a + b"}
    return {
        "workspace": {"path": str(proj)},
        "store": {"home": str(tmp_path / "home")},
        "strategies": {
            "fix": {"kind": "scripted", "steps": [fix]},
            "noise": {"kind": "scripted", "steps": [{"write": "notes.txt", "content": "x"}]},
        },
        "scoring": {"search_tests": {"command": command, "env": QUICK_ENV}, "warm": warm},
        "search": {"policy": "bfs", "budget": {"expansions": 4}, "stop_on_perfect": False},
        "output": {"runs_dir": str(tmp_path / "runs"), "instance_id": f"calc-{warm}"},
    }


def test_search_with_warm_auto_finds_the_graph_of_a_cold_search(tmp_path: Path) -> None:
    from treesearch.app import run_from_config

    graphs = {}
    servers: set[int] = set()

    def mine() -> set[int]:
        return {p for p in server_pids(SERVER_SCRIPT) if _ppid(p) == os.getpid()}

    # Servers of other tests' runners in this process (a fixture's) are not the search's.
    before = mine()

    def ours(progress: object) -> None:  # the servers the search started, seen mid-search
        servers.update(mine() - before)

    for warm in ("off", "auto"):
        out = run_from_config(
            _search_config(tmp_path, "python -m pytest -q", warm), on_progress=ours
        )
        graphs[warm] = sorted(
            (d["score"], json.dumps(d["tests"], sort_keys=True))
            for _, d in out.graph.nodes(data=True)
        )
        if warm == "auto":
            assert out.summary["warm"]["warm_runs"] >= 2 and not out.summary["warm"]["notes"]
            assert out.summary["warm"]["cold_runs"] == 1  # the first run's check
    assert graphs["auto"] == graphs["off"]
    # The search ended its servers (a server's last forked child, reparented to this process
    # when its server ends, is given a few seconds to finish exiting).
    deadline = time.monotonic() + 10
    while any(alive(p) for p in servers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert servers and not any(alive(p) for p in servers)


def _ppid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def test_search_says_why_the_warm_runner_is_not_used_in_events_summary_and_notes(
    tmp_path: Path,
) -> None:
    from treesearch.app import run_from_config

    notes: list[str] = []
    cfg = _search_config(tmp_path, "cd . && python -m pytest -q", "auto")
    out = run_from_config(cfg, on_note=notes.append)
    assert len(notes) == 1 and "warm runner not used" in notes[0] and "shell features" in notes[0]
    assert out.summary["warm"]["notes"] == [notes[0].removeprefix("note: ")]
    events = [json.loads(x) for x in (out.run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["note"] for e in events if e["event"] == "warm_runner"] == out.summary["warm"][
        "notes"
    ]
    assert out.summary["warm"]["warm_runs"] == 0


# --- no server or test process outlives its runner ----------------------------------------------

_PARENT = """
import sys
from pathlib import Path
from typing import Any
from treesearch.scoring import TestSpec, run_tests
from treesearch.scoring.warm import WarmRunner
ws = Path(sys.argv[1])
spec = TestSpec(command=(sys.executable, "-m", "pytest", "-q"), timeout=300,
                env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
runner = WarmRunner("on")
run_tests(spec, ws, warm=runner)
print("RUNNING", flush=True)
run_tests(spec, ws, warm=runner)
"""


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGKILL", "SIGINT"])
def test_killed_parent_leaves_no_server_and_no_test_process(tmp_path: Path, how: str) -> None:
    pid_file = tmp_path / "grandchild.pid"
    ws = project(
        tmp_path / "ws",
        {
            "test_a.py": f"""
                import os, subprocess, time
                def test_hang():
                    if os.path.exists({str(pid_file)!r}):
                        p = subprocess.Popen(["sleep", "300"])
                        open({str(pid_file)!r} + ".2", "w").write(str(p.pid))
                        time.sleep(300)
                    open({str(pid_file)!r}, "w").write("first")
            """,
        },
    )
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, str(ws)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "RUNNING"
        grandchild = Path(str(pid_file) + ".2")
        assert wait_until(grandchild.exists, 60)
        assert wait_until(lambda: grandchild.read_text().strip() != "")
        sleeper = int(grandchild.read_text())
        servers = server_pids(str(tmp))
        assert servers and alive(sleeper)  # the server, its child, the watchdog
        parent.send_signal(signal.SIGKILL if how == "SIGKILL" else signal.SIGINT)
        parent.wait(timeout=60)
        assert wait_until(lambda: not alive(sleeper) and not server_pids(str(tmp)), 30)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        assert parent.stdout is not None
        parent.stdout.close()


# --- every state of the demo and of experiments/bugs ---------------------------------------------

_DEMO_EDITS = {
    "invoice/parse.py": [
        None,
        ("    for line in text.splitlines()[1:]:", "    for line in text.splitlines():"),
        (
            "    for line in text.splitlines()[1:]:",
            "    for line in text.splitlines()[1:] + text.splitlines()[:1]:",
        ),
    ],
    "invoice/pricing.py#threshold": [
        None,
        ("if item.qty > BULK_THRESHOLD:", "if item.qty >= BULK_THRESHOLD:"),
    ],
    "invoice/pricing.py#discount": [None, ("BULK_DISCOUNT = 0.10", "BULK_DISCOUNT = 0.15")],
    "invoice/report.py": [
        None,
        (
            "    for item in sorted(items, key=line_total, reverse=False):",
            "    for item in sorted(items, key=line_total, reverse=True):",
        ),
    ],
}


@pytest.mark.slow
def test_warm_runs_match_cold_runs_on_every_state_of_the_demo(tmp_path: Path) -> None:
    ws = tmp_path / "demo"
    shutil.copytree(DEMO, ws)
    original = {p: (DEMO / p).read_text() for p in ("invoice/parse.py", "invoice/pricing.py")}
    original["invoice/report.py"] = (DEMO / "invoice/report.py").read_text()
    s = spec()
    states = 0
    with WarmRunner("on") as runner:
        for combo in itertools.product(*_DEMO_EDITS.values()):
            texts = dict(original)
            for key, edit in zip(_DEMO_EDITS, combo, strict=True):
                if edit is not None:
                    rel = key.split("#")[0]
                    assert edit[0] in texts[rel]
                    texts[rel] = texts[rel].replace(edit[0], edit[1], 1)
            for rel, text in texts.items():
                (ws / rel).write_text(text)
            cold, warm = both(s, ws, runner)
            assert view(warm) == view(cold), combo
            states += 1
        assert states == 24 and runner.warm_runs == 24 and not runner.notes


_FIX = re.compile(r"^(?P<file>\S+\.py) line (?P<line>\d+): `(?P<old>[^`]+)` -> `(?P<new>[^`]+)`$")


def bug_states(bug: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """The bug's buggy state, and its fixed state where ``bug.yaml`` says the fix exactly."""
    yield "buggy", {}
    meta = yaml.safe_load((bug / "bug.yaml").read_text())
    m = _FIX.match(str(meta.get("fix", "")))
    if m is None or "..." in m["old"] + m["new"]:
        return
    lines = (bug / m["file"]).read_text().splitlines(keepends=True)
    n = int(m["line"]) - 1
    if m["old"] not in lines[n]:
        return
    lines[n] = lines[n].replace(m["old"], m["new"], 1)
    yield "fixed", {m["file"]: "".join(lines)}


@pytest.mark.slow
def test_warm_runs_match_cold_runs_on_every_bug_and_its_fix(tmp_path: Path) -> None:
    bugs = sorted(p for p in BUGS.iterdir() if (p / "bug.yaml").is_file())
    assert len(bugs) >= 30
    fixed = 0
    with WarmRunner("on") as runner:
        for bug in bugs:
            for label, files in bug_states(bug):
                ws = tmp_path / f"{bug.name}-{label}"
                shutil.copytree(bug, ws)
                for rel, text in files.items():
                    (ws / rel).write_text(text)
                cold, warm = both(spec(), ws, runner)
                assert view(warm) == view(cold), (bug.name, label)
                fixed += label == "fixed"
        assert fixed >= 20 and not runner.notes
