"""`workspace.copy` runs and `treesearch clean` (issue #11, item 9).

Real searches through the CLI in subprocesses, with TREESEARCH_HOME and TMPDIR inside the test's
own folder: nothing here touches the real cache or temp folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import tree_digest

from treesearch import lifecycle
from treesearch.errors import RunError
from treesearch.runs import cleanup
from treesearch.store import ShadowStore, store_dir_for

CALC = "def add(a, b):\n    return a - b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
OLD = time.time() - 30 * 86400


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "tmp").mkdir()
    (tmp_path / "home").mkdir()
    return {
        **os.environ,
        "TREESEARCH_HOME": str(tmp_path / "home"),
        "TMPDIR": str(tmp_path / "tmp"),
    }


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "treesearch", *args],
        env=env,
        text=True,
        capture_output=True,
        timeout=300,
        check=False,
    )


def copy_run(
    tmp_path: Path, env: dict[str, str], name: str = "calc", runs: str = "runs"
) -> tuple[Path, Path]:
    """A finished `workspace.copy: true` run of a one-fix project; (source folder, run dir)."""
    src = tmp_path / name
    if not src.exists():
        src.mkdir()
        (src / "calc.py").write_text(CALC)
        (src / "test_calc.py").write_text(TESTS)
        (src / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    config: dict[str, Any] = {
        "workspace": {"path": str(src), "copy": True},
        "task": "make the tests pass",
        "strategies": {
            "fix": {
                "kind": "scripted",
                "steps": [{"replace": "calc.py", "old": "a - b", "new": "a + b"}],
            }
        },
        "scoring": {
            "search_tests": {
                "command": f"{sys.executable} -m pytest -q -p no:cacheprovider",
                "timeout": 60,
                "env": {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"},
            }
        },
        "search": {"seed": 1, "budget": {"expansions": 2}},
        "output": {"runs_dir": str(tmp_path / runs), "instance_id": name},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    done = cli(env, "run", str(path), "--quiet", "--no-patch")
    assert done.returncode == 0, done.stderr
    run_dir = Path(done.stdout.split("run directory: ")[1].split("\n")[0])
    # The search's watchdog removes its registry record once the search has ended: wait for
    # it, or a test that compares the temp folder before and after a command sees it go.
    procs = tmp_path / "tmp" / f"treesearch-{os.getuid()}" / "procs"
    deadline = time.monotonic() + 30
    while procs.is_dir() and any(procs.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return src, run_dir


def age(*paths: Path, when: float = OLD) -> None:
    """Make files and folders look last used at ``when`` (every file below a folder too)."""
    for path in paths:
        for folder, _dirs, files in os.walk(path):
            for f in files:
                os.utime(os.path.join(folder, f), (when, when))
            os.utime(folder, (when, when))
        os.utime(path, (when, when))


def test_copy_run_keeps_its_copy_under_the_store_home_and_says_where_and_how_long(
    tmp_path: Path, env: dict[str, str]
) -> None:
    src, run_dir = copy_run(tmp_path, env)
    assert (src / "calc.py").read_text() == CALC  # the user's folder is never searched
    summary = json.loads((run_dir / "summary.json").read_text())
    copy = summary["workspace_copy"]
    workspace = Path(summary["workspace"])
    assert copy["path"] == str(workspace) and copy["source"] == str(src)
    assert "treesearch clean" in copy["kept"] and "7 days" in copy["kept"]
    home = tmp_path / "home"
    assert workspace.parent.parent == (home / "copies").resolve()
    assert "a + b" in (workspace / "calc.py").read_text()  # at the best node, to look at
    marker = json.loads((workspace.parent / cleanup.COPY_MARKER).read_text())
    assert marker["run_id"] == run_dir.name and marker["source"] == str(src)
    assert marker["run_dir"] == str(run_dir) and marker["workspace"] == str(workspace)
    assert not list((tmp_path / "tmp").glob("treesearch-*/score-*"))  # no scratch left


def test_clean_removes_an_old_copy_run_copy_and_its_store_and_nothing_else(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """Regression (#11.9): every copy run left its copy and its store for ever."""
    src, run_dir = copy_run(tmp_path, env)
    home = tmp_path / "home"
    workspace = Path(json.loads((run_dir / "summary.json").read_text())["workspace"])
    copy_store = store_dir_for(workspace, home.resolve())
    assert copy_store.is_dir()
    # The user's own workspace has a store too: never a candidate, however old.
    with ShadowStore.open(src, home=home) as own:
        own.capture()
    own_store = store_dir_for(src.resolve(), home.resolve())
    age(workspace.parent, copy_store, own_store, run_dir)

    listed = cli(env, "clean", "--dry-run", "--json")
    assert listed.returncode == 0, listed.stderr
    plan = json.loads(listed.stdout)
    assert [(i["kind"], i["path"]) for i in plan["items"]] == [
        ("copy", str(workspace.parent)),
        ("store", str(copy_store)),
    ]
    assert workspace.is_dir() and copy_store.is_dir()

    done = cli(env, "clean", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [(i["kind"], i["path"], i["removed"]) for i in result["items"]] == [
        ("copy", str(workspace.parent), True),
        ("store", str(copy_store), True),
    ]
    assert not workspace.parent.exists() and not copy_store.exists()
    assert own_store.is_dir() and (src / "calc.py").read_text() == CALC
    assert (run_dir / "summary.json").is_file()  # the run's record stays
    assert (home / "copies").is_dir() and list((home / "copies").iterdir()) == []


def test_clean_dry_run_lists_and_deletes_nothing(tmp_path: Path, env: dict[str, str]) -> None:
    _src, run_dir = copy_run(tmp_path, env)
    age(tmp_path / "home", run_dir)
    # A scratch folder of a process that is gone, as a SIGKILL leaves it.
    dead = lifecycle.Owner(pid=os.getpid(), start=1, boot=lifecycle.process_owner().boot)
    scratch = tmp_path / "tmp" / f"treesearch-{os.getuid()}" / f"score-{dead.token}-abcd"
    scratch.mkdir(parents=True)
    before = tree_digest(tmp_path, include_mtime=True)
    done = cli(env, "clean", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert tree_digest(tmp_path, include_mtime=True) == before
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines[:-1]] == ["copy", "store", "scratch"]
    assert lines[-1].startswith("would remove 3 item(s)")
    done = cli(env, "clean")
    assert done.returncode == 0, done.stderr
    assert [line.split()[:2] for line in done.stdout.splitlines()[:-1]] == [
        ["removed", "copy"],
        ["removed", "store"],
        ["removed", "scratch"],
    ]
    assert not scratch.exists()


def test_clean_keeps_recent_copies_and_those_of_a_running_search(
    tmp_path: Path, env: dict[str, str]
) -> None:
    _src, _run_dir = copy_run(tmp_path, env)
    home = tmp_path / "home"
    # A copy whose run is still going: its marker names this (live) test process.
    live_src = tmp_path / "live"
    live_src.mkdir()
    (live_src / "f.txt").write_text("x")
    live = cleanup.make_workspace_copy(
        live_src, home, run_id="live-run", run_dir=tmp_path / "runs" / "live-run"
    )
    age(live.parent)
    plan = cleanup.plan_clean(home, older_than=7 * 86400, temp_base=tmp_path)
    assert plan.items == []
    reasons = {Path(k.path).name.split("-")[0]: k.reason for k in plan.kept}
    assert reasons["live"].endswith("a search on it is running")
    assert reasons["calc"].endswith("last used 0.0 hours ago")
    assert live.is_dir()


def test_clean_never_removes_a_folder_without_its_marker_or_a_store_of_a_live_workspace(
    tmp_path: Path, home: Path, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("mine")
    with ShadowStore.open(workspace, home=home) as store:
        store.capture()
    mine = home / "copies" / "my-own-folder"  # the user's folder, no marker
    (mine / "project").mkdir(parents=True)
    forged = home / "copies" / "forged"  # a marker that describes another folder
    forged.mkdir()
    (forged / cleanup.COPY_MARKER).write_text(
        json.dumps({"kind": "treesearch-workspace-copy", "workspace": str(workspace)})
    )
    stranger = home / "not-a-store"
    stranger.mkdir()
    (stranger / "workspace").write_text("/nonexistent/folder")
    age(home)
    before = tree_digest(tmp_path)
    plan = cleanup.plan_clean(home, older_than=0, temp_base=tmp_path)
    assert plan.items == []
    cleanup.apply_clean(plan, temp_base=tmp_path)
    assert tree_digest(tmp_path) == before


def test_clean_removes_an_orphan_store_once_old_and_keeps_a_recent_one(
    tmp_path: Path, home: Path
) -> None:
    gone, recent = tmp_path / "gone", tmp_path / "recent"
    for ws in (gone, recent):
        ws.mkdir()
        (ws / "f.txt").write_text(ws.name)
        with ShadowStore.open(ws, home=home) as store:
            store.capture()
        (ws / "f.txt").unlink()
        ws.rmdir()
    old_store = store_dir_for(gone, home.resolve())
    age(old_store)
    plan = cleanup.plan_clean(home, older_than=7 * 86400, temp_base=tmp_path)
    assert [(i.kind, i.path) for i in plan.items] == [("store", str(old_store))]
    assert "no longer exists" in plan.items[0].reason
    assert [k.path for k in plan.kept] == [str(store_dir_for(recent, home.resolve()))]
    cleanup.apply_clean(plan, temp_base=tmp_path)
    assert not old_store.exists()
    assert store_dir_for(recent, home.resolve()).is_dir()
    assert [p.name for p in home.iterdir()] == [store_dir_for(recent, home.resolve()).name]


def test_clean_with_runs_dir_prunes_only_those_runs_copies(
    tmp_path: Path, env: dict[str, str]
) -> None:
    _a, run_a = copy_run(tmp_path, env, "one")
    _b, run_b = copy_run(tmp_path, env, "two", runs="other-runs")
    age(tmp_path / "home", run_a, run_b)
    plan = cleanup.plan_clean(
        tmp_path / "home", older_than=86400, runs_dir=run_b.parent, temp_base=tmp_path
    )
    assert [i.kind for i in plan.items] == ["copy", "store"]
    marker = json.loads((Path(plan.items[0].path) / cleanup.COPY_MARKER).read_text())
    assert marker["run_id"] == run_b.name


def test_a_search_reaps_what_a_killed_search_left_in_the_temp_folder(
    tmp_path: Path, env: dict[str, str]
) -> None:
    dead = lifecycle.Owner(pid=os.getpid(), start=1, boot=lifecycle.process_owner().boot)
    root = tmp_path / "tmp" / f"treesearch-{os.getuid()}"
    left = [root / f"score-{dead.token}-abcd", root / f"fl-{dead.token}-efgh"]
    for folder in left:
        (folder / "sub").mkdir(parents=True)
    _src, run_dir = copy_run(tmp_path, env)
    assert not any(folder.exists() for folder in left)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    reaped = [e for e in events if e["event"] == "reaped"]
    assert len(reaped) == 1 and sorted(reaped[0]["folders"]) == sorted(map(str, left))


def test_clean_rejects_a_bad_age_with_one_line(env: dict[str, str]) -> None:
    done = cli(env, "clean", "--older-than", "soon")
    assert done.returncode == 2
    assert "invalid duration 'soon'" in done.stderr


def test_a_resume_claims_its_copy_so_clean_keeps_it_while_it_runs(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """The process that made a copy is gone once its run ends; a resume of that run searches the
    copy again and must not lose it to a `clean --older-than 0` meanwhile."""
    _src, run_dir = copy_run(tmp_path, env)
    workspace = Path(json.loads((run_dir / "summary.json").read_text())["workspace"])
    home = tmp_path / "home"
    before = cleanup.plan_clean(home, older_than=0, temp_base=tmp_path)
    assert [i.kind for i in before.items] == ["copy", "store"]
    assert cleanup.claim_copy(workspace)  # what the resume's search does first (app._search)
    after = cleanup.plan_clean(home, older_than=0, temp_base=tmp_path)
    assert after.items == []
    assert after.kept[0].reason.endswith("a search on it is running")
    assert not cleanup.claim_copy(tmp_path / "calc")  # the user's folder is no copy
    resume = subprocess.Popen(
        [sys.executable, "-m", "treesearch", "resume", str(run_dir), "--quiet"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    _out, err = resume.communicate(timeout=300)
    assert resume.returncode == 0, err
    marker = json.loads((workspace.parent / cleanup.COPY_MARKER).read_text())
    assert marker["owner"]["pid"] == resume.pid


def test_a_copy_that_fails_leaves_nothing_and_says_why_in_one_line(
    tmp_path: Path, home: Path
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("a")
    os.mkfifo(src / "pipe")  # copytree refuses named pipes
    with pytest.raises(
        RunError, match=r"cannot copy the workspace .*src \(workspace.copy\): .*named pipe"
    ):
        cleanup.make_workspace_copy(src, home, run_id="r", run_dir=tmp_path / "runs" / "r")
    assert list((home / "copies").iterdir()) == []
