"""The score cache: hits by tree hash, misses after any change, sharing between processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from treesearch.errors import ScoringError
from treesearch.scoring import (
    Outcome,
    RunStatus,
    ScoreCache,
    Scorer,
    TestCase,
    TestRun,
    TestSpec,
    score_workspace,
)
from treesearch.store import ShadowStore

QUICK_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTEST_ADDOPTS": ""}


def pytest_spec(**kwargs: object) -> TestSpec:
    fields: dict[str, object] = {
        "command": (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
        "timeout": 60,
        "env": QUICK_ENV,
    }
    fields.update(kwargs)
    return TestSpec(**fields)  # type: ignore[arg-type]


def counting_project(root: Path, counter: Path) -> Path:
    """A project whose test run appends a line to ``counter`` (outside the workspace)."""
    root.mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_calc.py").write_text(
        textwrap.dedent(
            f"""
            from calc import add
            def test_add():
                with open({str(counter)!r}, "a") as f:
                    f.write("run\\n")
                assert add(1, 2) == 3
            """
        )
    )
    return root


def runs_made(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def sample_run(n: int = 1) -> TestRun:
    return TestRun(
        status=RunStatus.OK,
        tests=tuple(TestCase(id=f"t.py::test_{i}", outcome=Outcome.PASSED) for i in range(n)),
        exit_code=0,
        command="pytest",
    )


def test_cache_hit_on_second_scoring_of_same_tree(tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    ws = counting_project(tmp_path / "ws", counter)
    store = ShadowStore.open(ws, home=tmp_path / "home")
    cache = ScoreCache(store.path / "scores.sqlite")
    scorer = Scorer(pytest_spec(), cache=cache)
    tree = store.capture().tree
    first = scorer.score(ws, tree)
    second = scorer.score(ws, tree)
    assert not first.cached and second.cached
    assert runs_made(counter) == 1
    assert scorer.test_runs == 1 and scorer.cache_hits == 1
    assert second.rows() == first.rows() == [("tests/test_calc.py::test_add", "passed")]
    assert second.score == first.score == 1.0 and second.tree == tree
    # Another process's view of the same file (a later run) hits too.
    again = Scorer(pytest_spec(), cache=ScoreCache(store.path / "scores.sqlite")).score(ws, tree)
    assert again.cached and runs_made(counter) == 1


def test_cache_miss_after_one_byte_of_a_file_changes(tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    ws = counting_project(tmp_path / "ws", counter)
    store = ShadowStore.open(ws, home=tmp_path / "home")
    scorer = Scorer(pytest_spec(), cache=ScoreCache(store.path / "scores.sqlite"))
    before = store.capture().tree
    scorer.score(ws, before)
    calc = ws / "calc.py"
    calc.write_bytes(calc.read_bytes().replace(b"a + b", b"a + b "))
    after = store.capture().tree
    assert after != before
    result = scorer.score(ws, after)
    assert not result.cached and runs_made(counter) == 2
    calc.write_bytes(calc.read_bytes().replace(b"a + b ", b"a + b"))
    assert store.capture().tree == before
    assert scorer.score(ws, before).cached and runs_made(counter) == 2


def test_cache_miss_for_a_different_spec_on_the_same_tree(tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    ws = counting_project(tmp_path / "ws", counter)
    cache = ScoreCache(tmp_path / "cache" / "scores.sqlite")
    tree = "ab" * 20
    Scorer(pytest_spec(), cache=cache).score(ws, tree)
    other = Scorer(pytest_spec(timeout=61), cache=cache).score(ws, tree)
    assert not other.cached and runs_made(counter) == 2
    assert len(cache) == 2


def test_cache_is_used_by_score_workspace_for_a_snapshot_ref(tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    ws = counting_project(tmp_path / "ws", counter)
    store = ShadowStore.open(ws, home=tmp_path / "home")
    cache = ScoreCache(store.path / "scores.sqlite")
    snap = store.capture()
    first = score_workspace(ws, pytest_spec(), cache=cache, ref=snap.commit, store=store)
    second = score_workspace(ws, pytest_spec(), cache=cache, store=store)  # live, same state
    assert not first.cached and second.cached and second.tree == snap.tree
    assert runs_made(counter) == 1


def test_cache_does_not_keep_runs_that_could_not_start(tmp_path: Path) -> None:
    cache = ScoreCache(tmp_path / "scores.sqlite")
    spec = TestSpec(command=(str(tmp_path / "no-such-program"),), timeout=30)
    result = Scorer(spec, cache=cache).score(tmp_path, "cd" * 20)
    assert result.status is RunStatus.CRASHED
    assert len(cache) == 0


def test_cache_lists_and_clears_entries_by_tree_prefix_and_spec(tmp_path: Path) -> None:
    cache = ScoreCache(tmp_path / "scores.sqlite")
    spec_a, spec_b = TestSpec(command="a"), TestSpec(command="b")
    cache.put("aaaa" + "0" * 36, spec_a.fingerprint(), sample_run(2))
    cache.put("aaaa" + "0" * 36, spec_b.fingerprint(), sample_run(1))
    cache.put("bbbb" + "0" * 36, spec_a.fingerprint(), sample_run(1))
    assert len(cache.entries()) == 3
    listed = cache.entries("aaaa", spec=spec_a)
    assert [(e.tree[:4], e.fingerprint, e.status) for e in listed] == [
        ("aaaa", spec_a.fingerprint(), "ok")
    ]
    assert "2 passed" in listed[0].summary and listed[0].command == "pytest"
    assert cache.clear("aaaa") == 2
    assert [e.tree[:4] for e in cache.entries()] == ["bbbb"]
    assert cache.clear() == 1 and len(cache) == 0
    with pytest.raises(ScoringError, match="prefix"):
        cache.entries("zz")


def test_cache_get_returns_the_run_that_was_put(tmp_path: Path) -> None:
    cache = ScoreCache(tmp_path / "deep" / "folder" / "scores.sqlite")
    run = sample_run(3)
    assert cache.get("ab" * 20, "f" * 64) is None
    cache.put("ab" * 20, "f" * 64, run)
    assert cache.get("ab" * 20, "f" * 64) == run


def test_cache_on_a_file_that_is_not_sqlite_raises_scoring_error(tmp_path: Path) -> None:
    path = tmp_path / "scores.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ScoringError, match="scores.sqlite"):
        ScoreCache(path).get("ab" * 20, "f" * 64)


WORKER = """
import sys, time
from pathlib import Path
from treesearch.scoring import Outcome, RunStatus, ScoreCache, TestCase, TestRun

path, name, count, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
while not go.exists():
    time.sleep(0.005)
cache = ScoreCache(path)
for i in range(count):
    run = TestRun(status=RunStatus.OK, exit_code=0, command=name,
                  tests=(TestCase(id=f"{name}::{i}", outcome=Outcome.PASSED),))
    cache.put(f"{name}{i:036x}", "f" * 64, run)
    cache.put("ee" * 20, "f" * 64, run)  # both processes also fight over one key
    got = cache.get(f"{name}{i:036x}", "f" * 64)
    assert got is not None and got.tests[0].id == f"{name}::{i}", got
    cache.entries()
print("done")
"""


def test_cache_shared_by_two_processes_writing_at_once(tmp_path: Path) -> None:
    path = tmp_path / "scores.sqlite"
    go = tmp_path / "go"
    count = 40
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(path), name, str(count), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("aaaa", "bbbb")
    ]
    go.touch()
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert out.strip() == "done"
    cache = ScoreCache(path)
    assert len(cache) == 2 * count + 1
    assert cache.get("aaaa" + f"{count - 1:036x}", "f" * 64) is not None
    shared = cache.get("ee" * 20, "f" * 64)
    assert shared is not None and shared.command in ("aaaa", "bbbb")


# --- the environment is part of the key (issue 12, item 5) -------------------------------------

ENV_PROJECT_TEST = """
import os, sys
def test_runs_in_the_first_environment():
    assert "venv-b" not in sys.prefix
"""


def make_venv_with_our_packages(dest: Path) -> Path:
    """A second, real virtual environment that sees this interpreter's packages through a .pth
    file (so pytest runs in it), whose ``sys.prefix`` is ``dest``."""
    import sysconfig

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(dest)], check=True)
    site = next(dest.glob("lib/python*/site-packages"))
    (site / "outer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return dest


def test_cache_misses_for_the_same_tree_in_another_virtual_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Regression (issue 12): the key was (tree, spec) only, so a run made with one venv's
    # python was returned for another venv's.
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "pytest.ini").write_text("[pytest]\n")
    (ws / "test_env.py").write_text(ENV_PROJECT_TEST)
    store = ShadowStore.open(ws, home=tmp_path / "home")
    cache = ScoreCache(store.path / "scores.sqlite")
    spec = TestSpec(command="python -m pytest -q -p no:cacheprovider", timeout=60, env=QUICK_ENV)
    venv_a = Path(sys.executable).parent
    monkeypatch.setenv("PATH", f"{venv_a}:{__import__('os').environ['PATH']}")
    first = score_workspace(ws, spec, cache=cache, store=store)
    assert first.status is RunStatus.OK and first.score == 1.0 and not first.cached
    again = score_workspace(ws, spec, cache=cache, store=store)
    assert again.cached and again.tree == first.tree  # same environment: a hit

    venv_b = make_venv_with_our_packages(tmp_path / "venv-b")
    monkeypatch.setenv("PATH", f"{venv_b / 'bin'}:{__import__('os').environ['PATH']}")
    monkeypatch.setenv("VIRTUAL_ENV", str(venv_b))
    other = score_workspace(ws, spec, cache=cache, store=store)
    assert other.tree == first.tree
    assert not other.cached
    assert other.status is RunStatus.OK and other.score == 0.0


def test_cache_inputs_make_a_changed_ignored_data_file_a_miss(tmp_path: Path) -> None:
    # Regression (issue 12): an ignored fixture the tests read is not in the tree, so a changed
    # fixture returned the old result. Declared in cache_inputs, its content is in the key.
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "pytest.ini").write_text("[pytest]\n")
    (ws / ".gitignore").write_text("data/\n")
    (ws / "data").mkdir()
    (ws / "data" / "expected.txt").write_text("3\n")
    (ws / "test_data.py").write_text(
        "def test_sum():\n    assert open('data/expected.txt').read().strip() == '3'\n"
    )
    store = ShadowStore.open(ws, home=tmp_path / "home")
    cache = ScoreCache(store.path / "scores.sqlite")
    spec = pytest_spec()
    first = score_workspace(ws, spec, cache=cache, store=store, cache_inputs=["data/**"])
    assert first.score == 1.0 and not first.cached
    same = score_workspace(ws, spec, cache=cache, store=store, cache_inputs=["data/**"])
    assert same.cached
    (ws / "data" / "expected.txt").write_text("4\n")
    changed = score_workspace(ws, spec, cache=cache, store=store, cache_inputs=["data/**"])
    assert changed.tree == first.tree  # the snapshot does not hold the ignored file ...
    assert not changed.cached and changed.score == 0.0  # ... but the key does


def test_environment_key_follows_interpreter_venv_and_variables(tmp_path: Path) -> None:
    from treesearch.scoring.envkey import environment_key

    base = {"PATH": str(Path(sys.executable).parent), "HOME": str(tmp_path)}
    key = environment_key("python -m pytest", {}, tmp_path, environ=base)
    assert key == environment_key("python -m pytest", {}, tmp_path, environ=dict(base))
    assert key != environment_key(
        "python -m pytest", {}, tmp_path, environ={**base, "VIRTUAL_ENV": str(tmp_path)}
    )
    assert key != environment_key(
        "python -m pytest", {}, tmp_path, environ={**base, "PYTEST_ADDOPTS": "-x"}
    )
    # A variable the spec sets wins over the inherited one.
    assert environment_key(
        "python -m pytest", {"PYTEST_ADDOPTS": "-x"}, tmp_path, environ=base
    ) == environment_key("python -m pytest", {}, tmp_path, environ={**base, "PYTEST_ADDOPTS": "-x"})
    # Variables that steer nothing the key knows of are left out.
    assert key == environment_key(
        "python -m pytest", {}, tmp_path, environ={**base, "UNRELATED": "1"}
    )


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("data/*", "must be a list of glob paths"),
        (["../outside/*"], "relative to the workspace"),
        (["/etc/*"], "relative to the workspace"),
        ([""], "non-empty glob path"),
        ([3], "non-empty glob path"),
    ],
)
def test_scorer_from_config_rejects_bad_cache_inputs(value: object, needle: str) -> None:
    from treesearch.errors import ConfigError

    with pytest.raises(ConfigError, match="cfg.yaml: scoring.cache_inputs") as err:
        Scorer.from_config({"cache_inputs": value}, "cfg.yaml")
    assert needle in str(err.value)


def test_scorer_from_config_reads_cache_inputs() -> None:
    scorer = Scorer.from_config({"cache_inputs": ["data/**", "fixtures/*.json"]}, "cfg.yaml")
    assert scorer.cache_inputs == ("data/**", "fixtures/*.json")


def test_cache_file_of_schema_1_is_emptied_not_refused(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "scores.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE runs (tree TEXT, fingerprint TEXT, created_at REAL, status TEXT, "
        "summary TEXT, command TEXT, seconds REAL, format INTEGER, run TEXT, "
        "PRIMARY KEY (tree, fingerprint));"
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "INSERT INTO meta VALUES ('schema', '1');"
        "INSERT INTO runs VALUES ('ab', 'cd', 0, 'ok', '', '', 0, 1, '{}');"
    )
    conn.commit()
    conn.close()
    cache = ScoreCache(path)
    assert len(cache) == 0
    cache.put("a" * 40, "f" * 64, sample_run(), "e" * 64)
    assert cache.get("a" * 40, "f" * 64, "e" * 64) is not None
    assert cache.get("a" * 40, "f" * 64, "0" * 64) is None


def test_config_file_with_bad_cache_inputs_names_file_and_key(tmp_path: Path) -> None:
    from treesearch.config import validate
    from treesearch.errors import ConfigError

    raw = {
        "workspace": {"path": str(tmp_path)},
        "strategies": {"a": {"kind": "scripted", "steps": []}},
        "scoring": {"cache_inputs": ["data/*", "/abs/*"]},
    }
    with pytest.raises(ConfigError) as err:
        validate(raw, source="run.yaml", base_dir=tmp_path)
    assert str(err.value).startswith("run.yaml: scoring.cache_inputs: '/abs/*' must be a path")
    raw["scoring"] = {"cache_inputs": ["data/*"]}
    loaded = validate(raw, source="run.yaml", base_dir=tmp_path)
    assert loaded.config.scoring.model_dump()["cache_inputs"] == ["data/*"]
