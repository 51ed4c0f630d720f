"""A run's nodes outlive ``snap gc``: every state a run directory names (its nodes, the step
snapshots its session files name, workers' ones too) stays in the store until the run directory is
removed or ``snap gc --release`` names the run (issue #30, item 3)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import clean_git_env

from treesearch.app import load_run_graph
from treesearch.session import commits_named
from treesearch.store import ShadowStore

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "configs" / "demo.yaml"


def ts(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = clean_git_env(TREESEARCH_HOME=str(home))
    return subprocess.run(
        [sys.executable, "-m", "treesearch", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=600,
    )


def demo_run(tmp_path: Path, *overrides: str) -> tuple[Path, Path, Path]:
    """Run the demo (a copy run); returns (run dir, workspace copy, store home)."""
    home = tmp_path / "home"
    args = ["run", str(DEMO), "--runs-dir", str(tmp_path / "runs")]
    for o in ("search.stop_on_perfect=false", "search.budget.expansions=12", *overrides):
        args += ["-c", o]
    r = ts(*args, home=home)
    assert r.returncode == 0, r.stderr
    (run,) = (tmp_path / "runs").iterdir()
    summary: dict[str, Any] = json.loads((run / "summary.json").read_text())
    return run, Path(summary["workspace"]), home


def session_commits(run: Path) -> set[str]:
    out: set[str] = set()
    for f in (run / "transcripts").glob("*.jsonl"):
        out.update(commits_named(f))
    return out


def has_commit(store: ShadowStore, commit: str) -> bool:
    r = subprocess.run(
        ["git", "--git-dir", str(store.git_dir), "cat-file", "-e", f"{commit}^{{commit}}"],
        capture_output=True,
        env=clean_git_env(),
        check=False,
    )
    return r.returncode == 0


@pytest.mark.parametrize("workers", [1, 2])
def test_every_node_and_step_snapshot_of_a_run_survives_gc_keep_last_1(
    tmp_path: Path, workers: int
) -> None:
    """Regression: only the best node was pinned; after `snap gc --keep-last 1` on the demo
    copy's store, `checkout` failed for 6 of the run's 7 nodes, and with workers the step
    snapshots the session files name were gone (no ref of the search's store named them)."""
    run, ws, home = demo_run(tmp_path, f"search.workers={workers}")
    _, g, _ = load_run_graph(run)
    steps = session_commits(run)
    assert g.number_of_nodes() >= 5 and steps
    before = ShadowStore.open(ws, home=home)
    snapshots = {s.commit for s in before.log()}
    if workers > 1:  # the workers' own step snapshots are no snapshot of the search's store
        assert steps - snapshots
    before.close()

    gc = ts("snap", "gc", "--keep-last", "1", "-w", str(ws), home=home)
    assert gc.returncode == 0, gc.stderr
    assert f"keeps run-{run.name}: " in gc.stdout

    store = ShadowStore.open(ws, home=home)
    try:
        missing = [c for c in steps if not has_commit(store, c)]
        assert not missing, f"{len(missing)} of {len(steps)} step snapshots were collected"
        for n, d in g.nodes(data=True):
            assert has_commit(store, d["commit"]), n
    finally:
        store.close()
    for order in range(g.number_of_nodes()):
        r = ts("checkout", str(run), f"#{order}", home=home)
        assert r.returncode == 0, (order, r.stderr)
    r = ts("report", str(run), home=home)
    assert r.returncode == 0, r.stderr


def test_a_removed_run_directory_or_gc_release_lets_the_run_go(tmp_path: Path) -> None:
    run, ws, home = demo_run(tmp_path)
    dry = ts("snap", "gc", "--keep-last", "1", "--dry-run", "-w", str(ws), home=home)
    assert dry.returncode == 0, dry.stderr
    line = next(x for x in dry.stdout.splitlines() if x.startswith("keeps run-"))
    count = int(line.split(": ")[1].split()[0])
    _, g, _ = load_run_graph(run)
    assert count >= g.number_of_nodes(), line
    assert f"while {run} exists" in line
    assert "would drop 0 snapshots" in dry.stdout, dry.stdout

    # A name that holds nothing is an error that changes nothing.
    bad = ts("snap", "gc", "--release", "no-such-run", "-w", str(ws), home=home)
    assert bad.returncode != 0 and "nothing is held under 'no-such-run'" in bad.stderr
    assert bad.stderr.count("\n") == 1, bad.stderr

    # Released by name: the run directory is still there, its nodes go.
    rel = ts("snap", "gc", "--keep-last", "1", "--release", run.name, "-w", str(ws), home=home)
    assert rel.returncode == 0, rel.stderr
    assert f"released run-{run.name} (released by name)" in rel.stdout
    dropped = int(rel.stdout.splitlines()[-1].split()[1])
    assert dropped >= g.number_of_nodes() - 2, rel.stdout


def test_gc_lets_a_run_go_once_its_directory_is_removed(tmp_path: Path) -> None:
    run, ws, home = demo_run(tmp_path)
    shutil.rmtree(run)
    dry = ts("snap", "gc", "--keep-last", "1", "--dry-run", "-w", str(ws), home=home)
    assert f"would release run-{run.name} (its folder {run} is gone)" in dry.stdout, dry.stdout
    gc = ts("snap", "gc", "--keep-last", "1", "-w", str(ws), home=home)
    assert gc.returncode == 0 and f"released run-{run.name}" in gc.stdout, gc.stdout
    again = ts("snap", "gc", "--dry-run", "-w", str(ws), home=home)
    assert "run-" not in again.stdout, again.stdout  # the hold itself is gone
    assert os.path.isdir(ws)


def test_the_nodes_of_a_run_killed_mid_search_survive_gc_and_the_run_resumes(
    tmp_path: Path,
) -> None:
    """Each state is held before the event that names it is written: a run killed with SIGKILL
    (no end of run, no final hold) loses nothing to `gc --keep-last 1`, and resumes."""
    from test_search import cli, make_project, slow_config, write_yaml

    from treesearch.app import resume
    from treesearch.config import DEFAULT_EXCLUDES

    proj = make_project(tmp_path / "p")
    cfg = slow_config(tmp_path / "p", proj)
    cfg["output"]["run_id"] = "killed"
    proc = cli("run", str(write_yaml(tmp_path / "k.yaml", cfg)))
    run_dir = tmp_path / "p" / "runs" / "killed"
    events = run_dir / "events.jsonl"
    while proc.poll() is None:  # until a few expansions are on record (each takes 0.3 s or more)
        if events.exists() and events.read_text().count('"expansion"') >= 3:
            break
        time.sleep(0.02)  # (polling only: the assert below says whether the kill was mid-run)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert not (run_dir / "summary.json").exists(), "the run ended before it was killed"
    _, g, _ = load_run_graph(run_dir)

    store = ShadowStore.open(proj, home=tmp_path / "p" / "home", excludes=DEFAULT_EXCLUDES)
    try:
        result = store.gc(keep_last=1)
        assert any(h.name == "run-killed" and h.released is None for h in result.held)
        for n, d in g.nodes(data=True):
            assert has_commit(store, d["commit"]), n
    finally:
        store.close()
    resumed = resume(run_dir)
    assert resumed.usage.expansions == 10


def test_keep_adds_to_a_held_set_skips_unknown_ids_and_holds_through_gc(tmp_path: Path) -> None:
    ws, home, holder = tmp_path / "ws", tmp_path / "home", tmp_path / "holder"
    ws.mkdir()
    holder.mkdir()
    store = ShadowStore.open(ws, home=home)
    try:
        snaps = []
        for i in range(6):
            (ws / "f.txt").write_text(f"{i}\n")
            snaps.append(store.capture())
        assert store.keep("r", [snaps[0].tree, "0" * 40, "nothex"], holder=holder) == 1
        assert store.keep("r", [snaps[1].commit, snaps[0].commit], holder=holder) == 2
        (held,) = store.held()
        assert held.name == "r" and held.holder == str(holder) and held.released is None
        assert set(held.commits) == {snaps[0].commit, snaps[1].commit} and held.snapshots == 2
        result = store.gc(keep_last=1)
        left = {s.commit for s in store.log()}
        assert {snaps[0].commit, snaps[1].commit, snaps[-1].commit} <= left
        assert not {s.commit for s in snaps[2:5]} & left, result
        holder.rmdir()
        result = store.gc(keep_last=1)
        assert [h.released for h in result.held] == [f"its folder {holder} is gone"]
        assert store.held() == []
        assert {s.commit for s in store.log()} == {snaps[-1].commit}
    finally:
        store.close()
