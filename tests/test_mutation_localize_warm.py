"""Fault localisation's coverage run on the search's warm test server: the same coverage, test
by test, and the same outcomes as a cold run, on every bug of ``experiments/bugs`` and on the
demo (real pytest under real coverage.py, in warm children of a real server)."""

from __future__ import annotations

import collections
import importlib
import shutil
import sys
from pathlib import Path

import pytest

from treesearch.agents.mutation import localize
from treesearch.agents.mutation._coverage_run import _BOOT, CoverageRun, run_with_coverage, wrap
from treesearch.scoring import TestSpec
from treesearch.scoring.warm import WarmRunner, plan

localize_module = importlib.import_module("treesearch.agents.mutation.localize")
ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "experiments" / "demo" / "project"
BUGS = ROOT / "experiments" / "bugs"
ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def spec() -> TestSpec:
    return TestSpec(command=f"{sys.executable} -m pytest -q", timeout=60, env=ENV)


def seen(cov: CoverageRun) -> tuple[object, ...]:
    """Everything localisation reads of a coverage run."""
    run = cov.run
    tests = sorted((t.id, t.outcome.value) for t in run.tests)
    return (
        run.status,
        run.exit_code,
        tests,
        cov.contexts,
        sorted(map(tuple, cov.log)),
        cov.problem,
    )


def coverage_both(ws: Path, runner: WarmRunner) -> tuple[CoverageRun, CoverageRun]:
    s = spec()
    wrapped = wrap(s)
    assert not isinstance(wrapped, str)
    cold = run_with_coverage(s, ws, wrapped, 60)
    before = runner.warm_runs
    warm = run_with_coverage(s, ws, wrapped, 60, warm=runner)
    assert runner.warm_runs == before + 1  # it did run warm
    return cold, warm


def test_python_c_runs_warm_only_for_treesearch_s_own_boot_program(tmp_path: Path) -> None:
    env = {"PATH": str(Path(sys.executable).parent)}
    assert isinstance(plan([sys.executable, "-c", "print(1)"], env, str(tmp_path)), str)
    launch = plan([sys.executable, "-c", _BOOT, "rc", "dir", "log", "-q"], env, str(tmp_path))
    assert not isinstance(launch, str)
    assert (launch.mode, launch.target, launch.args) == (
        "command",
        _BOOT,
        ("rc", "dir", "log", "-q"),
    )


def test_warm_coverage_run_of_the_demo_is_the_cold_one(tmp_path: Path) -> None:
    ws = tmp_path / "demo"
    shutil.copytree(DEMO, ws)
    with WarmRunner("on") as runner:
        cold, warm = coverage_both(ws, runner)
        assert cold.contexts and cold.log and not cold.problem
        assert seen(warm) == seen(cold)
        assert not runner.notes


def test_localize_with_a_ready_warm_runner_ranks_as_cold_and_an_unchecked_one_is_not_used(
    tmp_path: Path,
) -> None:
    """The coverage run goes warm only on a runner whose runs need no check of their own (``on``,
    or ``auto`` once checked): never as ``auto``'s first-run check, which would run the coverage
    run twice into the same data and log files."""
    ws = tmp_path / "demo"
    shutil.copytree(DEMO, ws)
    cold = localize(ws, spec())
    with WarmRunner("auto") as unchecked:
        assert localize(ws, spec(), warm=unchecked).lines == cold.lines
        assert (unchecked.warm_runs, unchecked.cold_runs) == (0, 0)  # not used at all
    with WarmRunner("on") as ready:
        warm = localize(ws, spec(), warm=ready)
        assert warm.method == cold.method == "coverage"
        assert warm.lines == cold.lines and warm.failing == cold.failing
        assert ready.warm_runs == 1


@pytest.mark.slow
def test_warm_coverage_runs_match_cold_ones_on_every_bug(tmp_path: Path) -> None:
    bugs = sorted(p for p in BUGS.iterdir() if (p / "bug.yaml").is_file())
    assert len(bugs) >= 30
    with WarmRunner("on") as runner:
        for bug in bugs:
            ws = tmp_path / bug.name
            shutil.copytree(bug, ws)
            cold, warm = coverage_both(ws, runner)
            assert seen(warm) == seen(cold), bug.name
        assert not runner.notes


def test_demo_search_with_warm_coverage_runs_builds_the_graph_of_a_cold_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo's mutation strategy localises on the search's warm server (its coverage runs
    are counted with the warm runs): the same graph, byte for byte, as with every run cold."""
    import yaml

    from treesearch.app import run_from_config
    from treesearch.search.graph import to_json

    cfg_path = ROOT / "configs" / "demo.yaml"
    graphs = {}
    for warm in ("off", "auto"):
        # Each search localises for itself (not from the other's rankings kept in memory).
        monkeypatch.setattr(localize_module, "_MEMORY", collections.OrderedDict())
        cfg = yaml.safe_load(cfg_path.read_text())
        cfg["workspace"]["path"] = str(DEMO)
        cfg["store"] = {"home": str(tmp_path / f"home-{warm}")}
        cfg["output"]["runs_dir"] = str(tmp_path / f"runs-{warm}")
        cfg["strategies"] = {"mutate": cfg["strategies"]["mutate"]}
        cfg["scoring"]["search_tests"]["command"] = f"{sys.executable} -m pytest -q"
        cfg["scoring"]["warm"] = warm
        cfg["search"].update(stop_on_perfect=False, budget={"expansions": 6})
        out = run_from_config(cfg, base_dir=cfg_path.parent)
        graphs[warm] = to_json(out.graph, stable=True)
        if warm == "auto":
            counted = out.summary["warm"]
            # Every search test run, and the coverage runs of the localisations, went warm.
            assert counted["warm_runs"] > out.usage.test_runs and counted["cold_runs"] == 1
    assert graphs["auto"] == graphs["off"]
