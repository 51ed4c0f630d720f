"""`treesearch compare` end to end: real eval batches (real git, real pytest runs, real process
pools), resume after an interruption and after a SIGKILL, and the same per-instance outcomes as
separate `treesearch eval` runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from eval_fixtures import ROOT, calc_repo, eval_config, rows_without_timing, write_jsonl

from treesearch.compare import resume_compare, run_compare

BREAK = [{"replace": "calc.py", "old": "a - b", "new": "a * b"}]


def _calc_spec(tmp: Path, seeds: list[int] | None = None) -> Path:
    rows = [calc_repo(tmp, "acme/calc"), calc_repo(tmp, "other/calc")]
    write_jsonl(tmp / "instances.jsonl", rows)
    config = eval_config(tmp)
    spec = {
        "instances": "instances.jsonl",
        "repos": "repos",
        "contenders": [
            {"name": "fixer", "config": config.name},
            {
                "name": "breaker",
                "config": config.name,
                "overrides": {"strategies.fix.steps": BREAK},
            },
        ],
        "seeds": seeds or [0],
        "budget": {"expansions": 2},
    }
    path = tmp / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "treesearch", "compare", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )


def _mtimes(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")}


def test_compare_runs_matrix_writes_json_csv_and_table(tmp_path: Path) -> None:
    spec = _calc_spec(tmp_path)
    out = tmp_path / "cmp"
    proc = _cli(str(spec), "--out", str(out), "--workers", "1")
    assert proc.returncode == 0, proc.stderr
    data = json.loads((out / "compare.json").read_text())
    assert data["status"] == "finished"
    assert data["instances"] == ["acme__calc-1", "other__calc-1"]
    assert data["budget"] == {"expansions": 2}
    fixer, breaker = data["contenders"]
    assert (fixer["name"], fixer["resolved"], fixer["plausible"], fixer["errors"]) == (
        "fixer",
        2,
        2,
        0,
    )
    assert fixer["resolved_ci"] == [1.0, 1.0]
    assert (breaker["resolved"], breaker["plausible"]) == (0, 0)
    # The root's run, then the fix's run: its failing-first screen passes and the rest of the
    # suite runs in the same pytest run (a repair search).
    assert fixer["mean_test_runs_to_first_plausible"] == 2.0
    (pair,) = data["pairs"]
    assert (pair["a"], pair["b"], pair["wins"], pair["losses"], pair["ties"]) == (
        "fixer",
        "breaker",
        2,
        0,
        0,
    )
    assert pair["p_value"] == 0.5
    # The breaker's edit fixes nothing and breaks nothing: its screen goes on to the rest of
    # the suite (it may tie its parent), so it is a full node and the second expansion needs
    # no completing run: 2 test runs per instance, the curves' last point.
    assert data["curves"]["test_runs"]["fixer"] == [[0, 0.0], [2, 1.0]]
    assert data["curves"]["test_runs"]["breaker"] == [[0, 0.0], [2, 0.0]]
    assert {o["test_runs"] for o in data["outcomes"]} == {2}
    assert len(data["outcomes"]) == 4
    for o in data["outcomes"]:
        assert (out / o["run_dir"] / "graph.json").is_file()
        assert not Path(o["run_dir"]).is_absolute()
    csv_lines = (out / "compare.csv").read_text().splitlines()
    assert csv_lines[0].startswith("contender,n,cells,resolved,resolved_rate")
    assert csv_lines[1].startswith("fixer,2,2,2,1.0,1.0,1.0,2,")
    assert "fixer" in proc.stdout and "breaker" in proc.stdout
    assert "fixer vs breaker     2       0     0         0  0.5" in proc.stdout
    assert "[breaker seed 0 (2/2)] starting" in proc.stderr
    # Resuming a finished comparison runs nothing again and says the same.
    before = _mtimes(out / "cells")
    again = _cli("--resume", str(out))
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("already finished: not run again") == 2
    assert _mtimes(out / "cells") == before
    assert again.stdout.replace(" ", "") == proc.stdout.replace(" ", "")


def test_compare_interrupted_between_cells_resumes_without_rerunning_the_finished_cell(
    tmp_path: Path,
) -> None:
    spec = _calc_spec(tmp_path)
    out = tmp_path / "cmp"

    def stop_after_first_cell(ev: dict[str, Any]) -> None:
        if ev["event"] == "eval_finished" and ev["contender"] == "fixer":
            raise KeyboardInterrupt

    cut = run_compare(spec, out=out, workers=1, on_event=stop_after_first_cell)
    assert cut.interrupted
    assert cut.data["status"] == "interrupted"
    assert [c["name"] for c in cut.data["contenders"]] == ["fixer", "breaker"]
    assert cut.data["contenders"][1]["cells"] == 0
    first = out / "cells" / "fixer" / "seed-0"
    before = _mtimes(first)
    events: list[dict[str, Any]] = []
    done = resume_compare(out, on_event=events.append)
    assert not done.interrupted and done.data["status"] == "finished"
    assert done.skipped_cells == ["fixer/seed-0"]
    assert _mtimes(first) == before  # the finished cell was not run again
    started = [e for e in events if e["event"] == "cell_started"]
    assert [(e["contender"], e["resume"]) for e in started] == [("breaker", False)]
    assert len(done.data["outcomes"]) == 4


def test_compare_resume_refuses_a_changed_contender_config(tmp_path: Path) -> None:
    spec = _calc_spec(tmp_path)
    out = tmp_path / "cmp"

    def stop(ev: dict[str, Any]) -> None:
        if ev["event"] == "cell_started":
            raise KeyboardInterrupt

    assert run_compare(spec, out=out, workers=1, on_event=stop).interrupted
    config = tmp_path / "eval.yaml"
    config.write_text(config.read_text() + "\n# edited\n")
    proc = _cli("--resume", str(out))
    assert proc.returncode == 1
    assert "contender fixer: its config" in proc.stderr and "changed since" in proc.stderr


def test_compare_two_seeds_makes_a_cell_per_seed(tmp_path: Path) -> None:
    spec = _calc_spec(tmp_path, seeds=[0, 1])
    out = tmp_path / "cmp"
    result = run_compare(spec, out=out, workers=1)
    assert sorted(str(p.relative_to(out)) for p in (out / "cells").glob("*/*")) == [
        "cells/breaker/seed-0",
        "cells/breaker/seed-1",
        "cells/fixer/seed-0",
        "cells/fixer/seed-1",
    ]
    for seed in (0, 1):
        cfg = yaml.safe_load((out / f"cells/fixer/seed-{seed}/eval.yaml").read_text())
        assert cfg["config"]["search"]["seed"] == seed
        assert cfg["config"]["search"]["budget"] == {"expansions": 2}
    fixer = result.data["contenders"][0]
    assert (fixer["n"], fixer["cells"], fixer["resolved"]) == (2, 4, 4)
    assert "2 seeds" in result.data["pairs"][0]["test"]


# ------------------------------------------------------------------------------ built-in set


def _built_in(tmp: Path, bugs: str) -> Path:
    build = tmp / "build"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "experiments/instances/build.py"), "--out", str(build)]
        + ["--bugs", bugs],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return build


def _built_in_spec(tmp: Path, build: Path, policies: list[str]) -> Path:
    spec = {
        "instances": str(build / "instances.jsonl"),
        "repos": str(build / "repos"),
        "contenders": [
            {
                "name": p,
                "config": str(ROOT / "configs/eval-mutation.yaml"),
                "overrides": [f"search.policy={p}"],
            }
            for p in policies
        ],
        "seeds": [0],
        "budget": {"test_runs": 12, "expansions": 40},
    }
    path = tmp / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.slow
def test_compare_of_two_contenders_matches_two_separate_evals_on_built_in_set(
    tmp_path: Path,
) -> None:
    build = _built_in(tmp_path, "compare_count,arith_celsius,swap_elapsed")
    spec = _built_in_spec(tmp_path, build, ["best_first", "random"])
    out = tmp_path / "cmp"
    proc = _cli(str(spec), "--out", str(out), "--workers", "2")
    assert proc.returncode == 0, proc.stderr
    data = json.loads((out / "compare.json").read_text())
    for policy in ("best_first", "random"):
        ev = subprocess.run(
            [sys.executable, "-m", "treesearch", "eval", str(ROOT / "configs/eval-mutation.yaml")]
            + ["--instances", str(build / "instances.jsonl"), "--repos", str(build / "repos")]
            + ["--out", str(tmp_path / f"eval-{policy}"), "--workers", "2"]
            + ["-c", f"search.policy={policy}", "-c", "search.seed=0"]
            + ["-c", "search.budget.test_runs=12", "-c", "search.budget.expansions=40"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=900,
            check=False,
        )
        assert ev.returncode == 0, ev.stderr
        alone = rows_without_timing(tmp_path / f"eval-{policy}" / "results.jsonl")
        inside = rows_without_timing(out / "cells" / policy / "seed-0" / "results.jsonl")
        assert inside == alone
        outcomes = {
            o["instance_id"]: (o["status"], o["test_runs"])
            for o in data["outcomes"]
            if o["contender"] == policy
        }
        assert outcomes == {r["instance_id"]: (r["status"], r["test_runs"]) for r in alone}
        summary = next(c for c in data["contenders"] if c["name"] == policy)
        assert summary["resolved"] == sum(r["status"] == "resolved" for r in alone)


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
def test_compare_sigkill_mid_matrix_then_resume_skips_finished_cell(tmp_path: Path) -> None:
    build = _built_in(tmp_path, "compare_count,swap_elapsed")
    spec = _built_in_spec(tmp_path, build, ["best_first", "random"])
    out = tmp_path / "cmp"
    victim = subprocess.Popen(
        [sys.executable, "-m", "treesearch", "compare", str(spec), "--out", str(out)]
        + ["--workers", "1"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    second = out / "cells" / "random" / "seed-0" / "results.jsonl"
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline and victim.poll() is None:
        if second.is_file() and second.read_text().count("\n") >= 1:
            break
        time.sleep(0.05)
    assert victim.poll() is None, "the comparison ended before it could be killed"
    workers = _children(victim.pid)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and any(_alive(p) for p in workers):
        time.sleep(0.1)
    assert not (out / "compare.json").exists()
    first = out / "cells" / "best_first" / "seed-0"
    before = _mtimes(first)
    kept = second.read_text().splitlines()
    assert 1 <= len(kept) < 2
    resumed = _cli("--resume", str(out))
    assert resumed.returncode == 0, resumed.stderr
    assert "[best_first seed 0 (1/2)] already finished: not run again" in resumed.stderr
    assert "[random seed 0 (2/2)] resuming its eval batch" in resumed.stderr
    assert "1 of 2 instances to run, 1 already finished" in resumed.stderr
    assert _mtimes(first) == before
    final = second.read_text().splitlines()
    assert all(line in final for line in kept)  # the committed instance was kept as it was
    data = json.loads((out / "compare.json").read_text())
    assert data["status"] == "finished"
    assert len(data["outcomes"]) == 4


def test_compare_writes_its_report_page_with_one_curve_per_contender_in_chromium(
    tmp_path: Path,
) -> None:
    """The real `treesearch compare` ends with report.html (not only a page built by hand from
    compare.json): opened in headless Chromium it has one curve per contender and no errors."""
    from report_fixtures import browser, open_page

    spec = _calc_spec(tmp_path)
    out = tmp_path / "cmp"
    proc = _cli(str(spec), "--out", str(out), "--workers", "1", "-q")
    assert proc.returncode == 0, proc.stderr
    data = json.loads((out / "compare.json").read_text())
    assert "warnings" not in data
    page_file = out / "report.html"
    assert page_file.is_file()
    for o in data["outcomes"]:  # every run linked from the page has its own page
        assert (out / o["run_dir"] / "report.html").is_file()
    with browser() as b, open_page(b, page_file) as (page, problems):
        curves = page.locator('svg[data-x-label="test runs"] path[data-contender]')
        names = curves.evaluate_all("els => els.map(e => e.dataset.contender)")
        assert sorted(names) == ["breaker", "fixer"]
        assert page.locator("#table-contenders tbody tr").count() == 2
        assert problems == []
