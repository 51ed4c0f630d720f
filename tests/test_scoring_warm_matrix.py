"""The warm runner under every pytest major it accepts (issue 32): for each interpreter of
``TREESEARCH_WARM_MATRIX`` (paths joined by ``:``; ``.ci/run`` makes venvs with pytest 6.2,
7.4, 8.x and 9.x), every scenario of ``test_scoring_warm`` and the demo project run warm give
the cold run's result test by test, or, for a pytest the runner does not accept, every run is
cold and one note says why. Skipped, saying so, when the variable is unset (the suite needs no
network: the venvs are made beforehand).

Real servers, real pytest of each version, real child processes."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from test_scoring_warm import DEMO, SCENARIOS, both, project, spec, view

from treesearch.scoring import run_tests
from treesearch.scoring.warm import WarmRunner
from treesearch.scoring.warm_proc import untested_pytest

MATRIX_ENV = "TREESEARCH_WARM_MATRIX"
_PYTHONS = [p for p in os.environ.get(MATRIX_ENV, "").split(os.pathsep) if p]


def _pytest_version(python: str) -> str:
    done = subprocess.run(
        [python, "-c", "import pytest; print(pytest.__version__)"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{python} cannot import pytest: {done.stderr[-500:]}"
    return done.stdout.strip()


@pytest.mark.slow
@pytest.mark.parametrize("python", _PYTHONS or [None], ids=lambda p: str(p))
def test_warm_runs_under_each_pytest_version_give_the_cold_result_or_run_cold_with_a_note(
    python: str | None, tmp_path: Path
) -> None:
    if python is None:
        pytest.skip(f"{MATRIX_ENV} is unset: no interpreters with other pytest versions to run")
    version = _pytest_version(python)
    refused = untested_pytest(version)
    command = (python, "-m", "pytest", "-q", "-p", "no:cacheprovider")
    runs = 0
    with WarmRunner("on") as runner:
        for name in sorted(SCENARIOS):
            ws = project(tmp_path / name.replace(" ", "-"), SCENARIOS[name])
            cold, warm = both(spec(command=command), ws, runner)
            assert view(warm) == view(cold), (version, name)
            runs += 1
        demo = tmp_path / "demo"
        shutil.copytree(DEMO, demo)
        pricing = demo / "invoice" / "pricing.py"
        for edit in (None, ("BULK_DISCOUNT = 0.10", "BULK_DISCOUNT = 0.15")):
            if edit is not None:  # same size, same second: other bytes for the rewrite cache
                text = pricing.read_text()
                assert edit[0] in text
                pricing.write_text(text.replace(*edit))
            cold, warm = both(spec("-vv", command=command), demo, runner)
            assert view(warm) == view(cold), (version, "demo", edit)
            assert cold.totals["failed"] >= 1  # failure reports are compared too
            runs += 1
        if refused:
            assert runner.warm_runs == 0 and runner.cold_runs == runs
            assert runner.notes == [f"warm runner off: {refused}; running the tests cold"]
        else:
            assert runner.warm_runs == runs and runner.cold_runs == 0 and not runner.notes
            # pytest's configuration made in the server is taken (under 9.1+ from the second
            # run: the first tells the server the keyword arguments of its call, ``prog``)
            assert runner.premade_runs >= runs - 1, (version, runner.premade_runs, runs)
    with WarmRunner("auto") as auto:  # the first run's check, then warm runs
        first, again = (run_tests(spec(command=command), demo, warm=auto) for _ in range(2))
        assert view(first) == view(again)
        assert auto.checked is (not refused) and bool(auto.notes) is bool(refused)


def test_warm_runner_accepts_the_pytest_versions_of_its_matrix_and_no_other() -> None:
    for version in ("6.2.5", "7.4.4", "8.0.0.dev12", "8.4.2", "9.2.0"):
        assert untested_pytest(version) == "", version
    for version in ("5.4.3", "6.1.2", "10.0.0", "", "unknown"):
        assert "is not one the warm runner is tested with (6.2 to 9.x)" in untested_pytest(version)
