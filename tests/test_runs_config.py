"""Run directories keep their promises: the store home is recorded and used, the same seed gives
the same files byte for byte, config.yaml holds every default, bad configs get one line before any
run folder exists, resume says why it has nothing to do, and wall_seconds is a wall-clock cap.

Real store, real scripted agents, real pytest runs, real CLI subprocesses."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_search import CALC, config, make_project

from treesearch.app import checkout, load_run_graph, resume, run_from_config
from treesearch.config import Config, load_config
from treesearch.errors import StoreLocationError
from treesearch.search import render
from treesearch.store import ShadowStore, store_dir_for


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "treesearch", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=300,
        check=False,
    )


def write_yaml(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# ------------------------------------------------------------------ #11 item 10: the store home


def test_checkout_and_resume_use_the_store_home_recorded_by_the_run_not_the_environment(
    tmp_path: Path,
) -> None:
    """Regression (#11 item 10): without the same TREESEARCH_HOME, checkout and resume said "no
    snapshot matches" and made an empty store in the cache folder."""
    proj = make_project(tmp_path)
    cfg = config(tmp_path, proj, policy="best_first")
    del cfg["store"]  # the home comes from the environment
    cfg["output"]["run_id"] = "r1"
    home_a, home_b = tmp_path / "home-a", tmp_path / "home-b"
    path = write_yaml(tmp_path / "cfg.yaml", cfg)
    first = cli("run", str(path), "-q", "--no-patch", env={"TREESEARCH_HOME": str(home_a)})
    assert first.returncode == 0, first.stderr
    run_dir = tmp_path / "runs" / "r1"
    recorded = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert recorded["store"]["home"] == str(home_a)
    assert recorded["workspace"]["path"] == str(proj.resolve())

    other = {"TREESEARCH_HOME": str(home_b)}
    co = cli("checkout", str(run_dir), "#0", env=other)
    assert co.returncode == 0, co.stderr
    assert (proj / "calc.py").read_text() == CALC
    res = cli("resume", str(run_dir), "-q", "--no-patch", env=other)
    assert res.returncode == 0, res.stderr
    assert not home_b.exists(), "no store may be created under the environment's home"


def test_checkout_of_a_run_whose_store_is_missing_names_the_path_and_creates_nothing(
    tmp_path: Path,
) -> None:
    proj = make_project(tmp_path)
    out = run_from_config(config(tmp_path, proj, policy="best_first"), base_dir=tmp_path)
    raw = yaml.safe_load((out.run_dir / "config.yaml").read_text())
    wrong = tmp_path / "moved-home"
    raw["store"]["home"] = str(wrong)
    (out.run_dir / "config.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(StoreLocationError, match="moved-home") as err:
        checkout(out.run_dir, "#0")
    assert str(store_dir_for(proj.resolve(), wrong)) in str(err.value)
    with pytest.raises(StoreLocationError, match="looked for"):
        resume(out.run_dir)
    assert not wrong.exists()
    r = cli("checkout", str(out.run_dir), "#0")
    assert r.returncode == 1 and "looked for" in r.stderr and len(r.stderr.splitlines()) == 1


def test_store_open_without_create_refuses_a_missing_store(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with pytest.raises(StoreLocationError, match="no store of workspace"):
        ShadowStore.open(ws, home=tmp_path / "home", create=False)
    assert not (tmp_path / "home").exists()
    ShadowStore.open(ws, home=tmp_path / "home").capture()
    assert ShadowStore.open(ws, home=tmp_path / "home", create=False).log()


# ------------------------------------------------------------------ #12 item 12: byte for byte


def _run_twice(tmp_path: Path, **search: Any) -> list[Any]:
    outs = []
    for i in range(2):
        root = tmp_path / f"p{i}"
        proj = make_project(root)
        outs.append(run_from_config(config(root, proj, **search), base_dir=tmp_path))
    return outs


def test_two_identical_runs_write_byte_identical_graph_json_graphml_and_dot(tmp_path: Path) -> None:
    """Regression (#12 item 12): graph.json and the exports differed in edge seconds and in the
    nodes' commit ids (snapshot commits were dated by the clock)."""
    a, b = _run_twice(tmp_path, policy="bfs", stop_on_perfect=False, budget={"expansions": 8})
    assert (a.run_dir / "graph.json").read_bytes() == (b.run_dir / "graph.json").read_bytes()
    g = json.loads((a.run_dir / "graph.json").read_text())
    assert all(n["commit"] for n in g["nodes"])  # commit ids are kept, and are the same
    assert '"seconds"' not in (a.run_dir / "graph.json").read_text()
    for fmt in ("graphml", "dot", "json"):
        ea = render.export(load_run_graph(a.run_dir)[1], fmt)
        eb = render.export(load_run_graph(b.run_dir)[1], fmt)
        assert ea == eb, fmt
    exported = cli("export", str(a.run_dir), "--format", "graphml")
    assert exported.stdout == render.export(load_run_graph(b.run_dir)[1], "graphml")
    # The timings live beside the graph, one record per expansion.
    timings = (a.run_dir / "timings.jsonl").read_text().splitlines()
    assert len(timings) == a.usage.expansions
    assert {"k", "agent_seconds", "score_seconds", "elapsed"} <= set(json.loads(timings[0]))


def test_snapshot_dates_are_fixed_only_when_asked(tmp_path: Path) -> None:
    commits = []
    for i in range(2):
        ws = tmp_path / f"ws{i}"
        ws.mkdir()
        (ws / "f.txt").write_text("one\n")
        store = ShadowStore.open(ws, home=tmp_path / f"home{i}", fixed_dates=True)
        first = store.capture(meta={"purpose": "x"})
        (ws / "f.txt").write_text("two\n")
        second = store.capture()
        assert second.created_at == first.created_at + 0.001
        assert first.created_iso.startswith("2000-01-01")
        commits.append((first.commit, second.commit))
    assert commits[0] == commits[1]
    # A user's own captures keep the clock's date.
    ws = tmp_path / "ws0"
    (ws / "f.txt").write_text("three\n")
    before = time.time()
    snap = ShadowStore.open(ws, home=tmp_path / "home0").capture(label="mine")
    # Taken between the two readings of the clock (a second each side: dates are rounded).
    assert before - 1 <= snap.created_at <= time.time() + 1
    # In a store with dated snapshots, fixed dates follow the last one closely.
    (ws / "f.txt").write_text("four\n")
    after = ShadowStore.open(ws, home=tmp_path / "home0", fixed_dates=True).capture()
    assert after.created_at == round(snap.created_at + 0.001, 3)


# ------------------------------------------------------------------ #12 item 13: config.yaml


def test_run_config_yaml_holds_every_default_and_the_store_home_and_loads_again(
    tmp_path: Path,
) -> None:
    """Regression (#12 item 13): config.yaml held neither the store home nor the defaults."""
    proj = make_project(tmp_path)
    cfg = config(tmp_path, proj, policy="best_first")
    cfg["store"] = {"home": "home"}  # relative: from the config file's folder
    path = write_yaml(tmp_path / "cfg.yaml", cfg)
    out = run_from_config(load_config(path))
    recorded = yaml.safe_load((out.run_dir / "config.yaml").read_text())
    assert recorded["store"]["home"] == str(tmp_path / "home")
    assert recorded["store"]["excludes"] and recorded["store"]["respect_gitignore"] is True
    assert recorded["search"]["agent_timeout"] == 600.0
    assert set(recorded["search"]["budget"]) == {
        "expansions",
        "test_runs",
        "wall_seconds",
        "tokens",
        "max_depth",
    }
    assert recorded["output"]["model_name"] == "treesearch"
    assert recorded["output"]["run_id"] == out.run_dir.name
    assert recorded["scoring"]["search_tests"]["cwd"] == "."
    assert recorded["scoring"]["score"] == "pass_fraction"
    # Every key of every section is there: dumping the loaded file again gives the same mapping.
    again = load_config(out.run_dir / "config.yaml")
    assert again.config.model_dump(mode="json", by_alias=True) == {
        k: v for k, v in recorded.items()
    }
    assert Config.model_validate(recorded).search == load_config(path).config.search


# ------------------------------------------------------------------ #12 item 14: bad input


def _bad_cases(tmp_path: Path, proj: Path) -> dict[str, tuple[dict[str, Any], list[str], str]]:
    base = config(tmp_path, proj)
    base["output"]["runs_dir"] = str(tmp_path / "runs")

    def with_(path: list[str], value: Any) -> dict[str, Any]:
        data = json.loads(json.dumps(base))
        node = data
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
        return data

    (tmp_path / "a-file").write_text("not a folder\n")
    return {
        "huge-test-timeout": (
            with_(["scoring", "search_tests", "timeout"], 1e300),
            [],
            r"cfg\.yaml: scoring\.search_tests\.timeout: .*up to",
        ),
        "root-workspace-copied": (
            with_(["workspace"], {"path": "/", "copy": True}),
            [],
            r"cfg\.yaml: workspace\.path: / is the filesystem root",
        ),
        "runs-dir-is-a-file": (
            with_(["output", "runs_dir"], str(tmp_path / "a-file")),
            [],
            r"cfg\.yaml: output\.runs_dir: .*a-file is not a folder",
        ),
        "huge-steps": (
            with_(["search", "steps"], 10**40),
            [],
            r"cfg\.yaml: search\.steps: must be at most",
        ),
        "infinite-wall-seconds": (
            with_(["search", "budget", "wall_seconds"], float("inf")),
            [],
            r"cfg\.yaml: search\.budget\.wall_seconds: must be a finite number",
        ),
        "override-blamed": (
            base,
            ["search.steps=0"],
            r"^treesearch: error: -c search\.steps=0: search\.steps: must be at least 1",
        ),
        "override-replaces-a-section": (
            base,
            ["search.budget=5"],
            r"-c search\.budget=5: search\.budget: must be a mapping, got 5 \(keys: expansions",
        ),
        "override-exponent-test-timeout": (
            base,
            ["scoring.search_tests.timeout=1e300"],
            r"^treesearch: error: -c scoring\.search_tests\.timeout=1e300: "
            r"scoring\.search_tests\.timeout: must be a positive number of seconds up to",
        ),
        "override-huge-agent-timeout": (
            base,
            ["strategies.fix-add.timeout=1.0e+300"],
            r"-c strategies\.fix-add\.timeout=1\.0e\+300: strategies\.fix-add\.timeout",
        ),
    }


CASES = [
    "huge-test-timeout",
    "root-workspace-copied",
    "runs-dir-is-a-file",
    "huge-steps",
    "infinite-wall-seconds",
    "override-blamed",
    "override-replaces-a-section",
    "override-exponent-test-timeout",
    "override-huge-agent-timeout",
]


@pytest.mark.parametrize("case", CASES)
def test_bad_config_gets_one_line_exit_2_and_leaves_no_run_folder(
    tmp_path: Path, case: str
) -> None:
    """Regression (#12 item 14): tracebacks (OverflowError, FileExistsError, ...), values
    accepted silently, errors of -c blamed on the file, pydantic's `instance of BudgetConfig`."""
    proj = make_project(tmp_path)
    data, overrides, pattern = _bad_cases(tmp_path, proj)[case]
    path = write_yaml(tmp_path / "cfg.yaml", data)
    args = ["run", str(path), "-q"]
    for o in overrides:
        args += ["-c", o]
    r = cli(*args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr and "instance of" not in r.stderr
    assert re.search(pattern, r.stderr.strip()), r.stderr
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_yaml_syntax_error_is_one_line_naming_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("workspace:\n  path: .\nsearch: {seed: 1\n")
    r = cli("run", str(path))
    assert r.returncode == 2
    line = r.stderr.strip()
    assert len(line.splitlines()) == 1 and "<unicode string>" not in line, line
    assert str(path) in line and "line " in line and "not valid YAML" in line


def test_export_into_a_missing_folder_is_one_line(tmp_path: Path) -> None:
    proj = make_project(tmp_path)
    out = run_from_config(config(tmp_path, proj, policy="best_first"), base_dir=tmp_path)
    target = tmp_path / "no" / "such" / "graph.dot"
    r = cli("export", str(out.run_dir), "--format", "dot", "-o", str(target))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert str(target.parent) in r.stderr and "Traceback" not in r.stderr
    ok = cli("export", str(out.run_dir), "--format", "dot", "-o", str(tmp_path / "g.dot"))
    assert ok.returncode == 0 and (tmp_path / "g.dot").read_text().startswith("digraph")


def test_resume_with_a_bad_override_keeps_the_recorded_config(tmp_path: Path) -> None:
    proj = make_project(tmp_path)
    out = run_from_config(config(tmp_path, proj, policy="best_first"), base_dir=tmp_path)
    before = (out.run_dir / "config.yaml").read_bytes()
    r = cli("resume", str(out.run_dir), "-c", "search.budget=5")
    assert r.returncode == 2 and "-c search.budget=5" in r.stderr, r.stderr
    assert (out.run_dir / "config.yaml").read_bytes() == before


# ------------------------------------------------------------------ #12 item 15: resume


def test_resume_of_a_finished_run_says_at_once_why_it_has_nothing_to_do(tmp_path: Path) -> None:
    """Regression (#12 item 15): `resume RUN -c search.budget.expansions=100` on a run that
    stopped on a perfect score did nothing and said nothing; --no-patch was refused."""
    proj = make_project(tmp_path)
    cfg = config(tmp_path, proj, policy="best_first")
    out = run_from_config(cfg, base_dir=tmp_path)
    assert out.stop_reason == "perfect_score"
    r = cli("resume", str(out.run_dir), "-c", "search.budget.expansions=100", "--no-patch", "-q")
    assert r.returncode == 0, r.stderr
    note = [line for line in r.stderr.splitlines() if "nothing to do" in line]
    assert note and "search.stop_on_perfect=false" in note[0], r.stderr
    assert "winning patch" not in r.stdout
    # Following the advice searches on, until the expansions budget; resume then names it.
    more = cli(
        "resume",
        str(out.run_dir),
        "-c",
        "search.stop_on_perfect=false",
        "-c",
        f"search.budget.expansions={out.usage.expansions + 2}",
        "--json",
    )
    assert more.returncode == 0, more.stderr
    assert "nothing to do" not in more.stderr
    summary = json.loads(more.stdout)
    assert summary["usage"]["expansions"] == out.usage.expansions + 2
    assert summary["stop_reason"] == "expansions"
    again = cli("resume", str(out.run_dir), "-q", "--no-patch")
    assert "nothing to do: search.budget.expansions" in again.stderr, again.stderr


# ------------------------------------------------------------------ #12 item 16: wall clock


def test_wall_seconds_budget_stops_a_slow_agent_near_the_budget(tmp_path: Path) -> None:
    """Regression (#12 item 16): wall_seconds summed expansion times, left out the root's test
    run and was checked only between expansions: a 30 s agent overran a 3 s budget by 27 s."""
    proj = make_project(tmp_path)
    cfg = config(tmp_path, proj, policy="bfs", stop_on_perfect=False)
    cfg["search"]["budget"] = {"expansions": 50, "wall_seconds": 4}
    cfg["search"]["agent_timeout"] = 120
    # The agent would leave ``agent-slept`` after its 60 s: the search ending without it shows
    # the budget cut the agent short (its own timeout, 120 s, could not have).
    slept = tmp_path / "agent-slept"
    cfg["strategies"] = {
        "slow": {"kind": "scripted", "steps": [{"run": f"sleep 60 && touch {slept}"}]},
    }
    out = run_from_config(cfg, base_dir=tmp_path)
    assert out.stop_reason == "wall_seconds"
    assert not slept.exists()
    assert out.usage.wall_seconds >= 4
    summary = json.loads((out.run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "wall_seconds"
    # The expansion cut by the budget is not recorded: a resume with more time does it again.
    assert out.usage.expansions == 0
    resumed = resume(out.run_dir, ["search.budget.wall_seconds=6"])
    assert resumed.stop_reason == "wall_seconds" and resumed.usage.wall_seconds >= 6
    # The time of the dropped expansions counts across resumes: 6 s are spent already.
    notes: list[str] = []
    again = resume(out.run_dir, ["search.budget.wall_seconds=5.5"], on_note=notes.append)
    assert again.usage.expansions == 0 and again.stop_reason == "wall_seconds"
    assert notes and "search.budget.wall_seconds 5.5 s spent" in notes[0], notes


def test_wall_seconds_budget_counts_the_root_test_run(tmp_path: Path) -> None:
    proj = make_project(tmp_path)
    cfg = config(tmp_path, proj, policy="bfs", stop_on_perfect=False)
    cfg["search"]["budget"] = {"expansions": 50, "wall_seconds": 3}
    # The root's test run would leave ``root-slept`` after its 60 s (its timeout is 120 s): the
    # run ending without it shows the budget, counting the root's test run, cut it short.
    slept = tmp_path / "root-slept"
    cfg["scoring"]["search_tests"]["command"] = f"sleep 60 && touch {slept}; python -m pytest -q"
    cfg["scoring"]["search_tests"]["timeout"] = 120
    path = write_yaml(tmp_path / "cfg.yaml", cfg)
    r = cli("run", str(path), "-q")
    assert r.returncode == 1 and "ran out while the root was being tested" in r.stderr, r.stderr
    lines = [x for x in r.stderr.strip().splitlines() if "note: warm runner" not in x]
    assert len(lines) == 2  # "run ...: searching" and the error (and the warm runner's note)
    assert not slept.exists()


def test_run_id_taken_is_refused_before_the_workspace_is_copied(tmp_path: Path) -> None:
    proj = make_project(tmp_path)
    cfg = config(tmp_path, proj)
    cfg["workspace"]["copy"] = True
    cfg["output"]["run_id"] = "taken"
    (tmp_path / "runs" / "taken").mkdir(parents=True)
    path = write_yaml(tmp_path / "cfg.yaml", cfg)
    r = cli("run", str(path), "-c", f"store.home={tmp_path / 'home'}")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "cfg.yaml: output.run_id:" in r.stderr and "already exists" in r.stderr
    assert not (tmp_path / "home").exists()  # nothing was copied or opened
