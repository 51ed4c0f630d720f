"""The Ray executor against the local pool: the same instances give the same per-instance results.

Runs a real local Ray (``ray.init(num_cpus=2)``); skipped when Ray is not installed
(``pip install -e '.[ray]'``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from eval_fixtures import ROOT, rows_without_timing

from treesearch.eval import run_eval

pytestmark = [
    pytest.mark.slow,
    # Ray's own modules warn at import and shutdown (deprecations, unclosed sockets).
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]
BUGS = "compare_count,arith_celsius,swap_elapsed"
# Full runs (no failing-first screens): the subset of bugs was chosen so that this budget both
# resolves and leaves unresolved instances; what is compared is the two executors.
OVERRIDES = ["search.budget.test_runs=12", "search.budget.expansions=40", "scoring.order=all"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("built")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "experiments/instances/build.py"), "--out", str(out)]
        + ["--bugs", BUGS],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return out


def test_eval_on_local_ray_matches_local_pool(built: Path, tmp_path: Path) -> None:
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]'")
    common = dict(
        config=ROOT / "configs/eval-mutation.yaml",
        instances=built / "instances.jsonl",
        repos=built / "repos",
        workers=2,
        overrides=OVERRIDES,
    )
    pool = run_eval(**common, out=tmp_path / "pool", executor="local")  # type: ignore[arg-type]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        on_ray = run_eval(**common, out=tmp_path / "ray", executor="ray")  # type: ignore[arg-type]
    finally:
        ray.shutdown()
    assert [r["status"] for r in pool.rows] == [r["status"] for r in on_ray.rows]
    assert {r["status"] for r in pool.rows} >= {"resolved", "unresolved"}  # both kinds covered
    assert rows_without_timing(tmp_path / "ray" / "results.jsonl") == rows_without_timing(
        tmp_path / "pool" / "results.jsonl"
    )
    assert (tmp_path / "ray" / "predictions.jsonl").read_text() == (
        tmp_path / "pool" / "predictions.jsonl"
    ).read_text()
    for row in on_ray.rows:  # the run directories came back to the driver's eval directory
        graph = json.loads((tmp_path / "ray" / row["run_dir"] / "graph.json").read_text())
        assert graph["nodes"]
    assert json.loads((tmp_path / "ray" / "summary.json").read_text())["executor"] == "ray"


def test_eval_ray_executor_without_ray_says_how_to_install(tmp_path: Path, built: Path) -> None:
    # A `ray` that cannot be imported stands in for a missing Ray, installed or not.
    blocker = tmp_path / "block" / "ray"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('no Ray here')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker.parent), str(ROOT)])}
    proc = subprocess.run(
        [sys.executable, "-m", "treesearch", "eval", str(ROOT / "configs/eval-mutation.yaml")]
        + ["--instances", str(built / "instances.jsonl"), "--repos", str(built / "repos")]
        + ["--executor", "ray", "--out", str(tmp_path / "ev")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert proc.returncode == 1, proc.stderr
    assert "--executor ray needs Ray: install it with `pip install -e '.[ray]'`" in proc.stderr
