"""The order a batch starts its instances in (``--durations-from``: longest first) and what the
driver hands its workers (swebench's specs, looked up once): real batches on a real local pool."""

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

from treesearch.eval import run_eval
from treesearch.eval.instances import load_instances
from treesearch.eval.schedule import DurationsError, longest_first, read_durations


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "treesearch", "eval", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def _calc_set(tmp: Path, n: int) -> Path:
    inst = calc_repo(tmp)
    rows = [dict(inst, instance_id=f"acme__calc-{i}") for i in range(1, n + 1)]
    return write_jsonl(tmp / "inst.jsonl", rows)


def _earlier_results(tmp: Path, seconds: dict[str, Any]) -> Path:
    """The results file of an earlier eval of the same instances (only ``seconds`` matters)."""
    folder = tmp / "earlier"
    folder.mkdir()
    rows = [{"instance_id": iid, "status": "resolved", "seconds": s} for iid, s in seconds.items()]
    write_jsonl(folder / "results.jsonl", rows)
    return folder


# ------------------------------------------------------------------------------ the order


def test_longest_first_puts_unrecorded_first_then_longest_ties_in_input_order(
    tmp_path: Path,
) -> None:
    items = load_instances(_calc_set(tmp_path, 5))
    durations = {"acme__calc-1": 2.0, "acme__calc-2": 9.0, "acme__calc-4": 2.0, "acme__calc-5": 4}
    order = [i.instance_id[-1] for i in longest_first(items, durations)]
    assert order == ["3", "2", "5", "1", "4"]
    assert [i.instance_id[-1] for i in longest_first(items, {})] == ["1", "2", "3", "4", "5"]


def test_read_durations_keeps_usable_seconds_and_skips_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text(
        '{"instance_id": "a", "seconds": 3.5}\n'
        '{"instance_id": "b", "seconds": null}\n'
        '{"instance_id": "c", "seconds": true}\n'
        '{"instance_id": "d", "seconds": -1}\n'
        '{"instance_id": "e", "seconds": 7}\n'
        '{"instance_id": "f", "seco'
    )
    assert read_durations(tmp_path) == {"a": 3.5, "e": 7.0}  # the eval directory or the file
    assert read_durations(path) == {"a": 3.5, "e": 7.0}


def test_read_durations_bad_row_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text('{"instance_id": "a", "seconds": 1}\nnot json\n{"instance_id": "b"}\n')
    with pytest.raises(DurationsError, match=r"results\.jsonl:2: not a JSON row"):
        read_durations(path)
    path.write_text('{"seconds": 1}\n')
    with pytest.raises(DurationsError, match=r"results\.jsonl:1: instance_id: missing"):
        read_durations(path)


def test_eval_durations_from_runs_longest_first_and_writes_results_in_input_order(
    tmp_path: Path,
) -> None:
    instances = _calc_set(tmp_path, 4)
    earlier = _earlier_results(
        tmp_path, {"acme__calc-1": 1.0, "acme__calc-2": 5.0, "acme__calc-4": 3}
    )
    events: list[dict[str, Any]] = []
    out = run_eval(
        eval_config(tmp_path),
        instances,
        repos=tmp_path / "repos",
        out=tmp_path / "ev",
        workers=1,  # one worker: instances finish in the order they start
        durations_from=earlier,
        on_event=events.append,
    )
    started = [e for e in events if e["event"] == "eval_started"]
    assert started[0]["order"] == "longest_first"
    finished = [e["row"]["instance_id"][-1] for e in events if e["event"] == "instance_finished"]
    assert finished == ["3", "2", "4", "1"]  # not recorded first, then 5 s, 3 s, 1 s
    ids = [f"acme__calc-{i}" for i in range(1, 5)]
    assert [r["instance_id"] for r in out.rows] == ids
    results = [json.loads(x) for x in (tmp_path / "ev" / "results.jsonl").read_text().splitlines()]
    assert [r["instance_id"] for r in results] == ids
    assert {r["status"] for r in results} == {"resolved"}
    preds = (tmp_path / "ev" / "predictions.jsonl").read_text().splitlines()
    assert [json.loads(p)["instance_id"] for p in preds] == ids
    meta = yaml.safe_load((tmp_path / "ev" / "eval.yaml").read_text())
    assert meta["durations_from"] == str((earlier / "results.jsonl").resolve())
    # Each progress event says where its instance's time went.
    timing = next(e for e in events if e["event"] == "instance_finished")["timing"]
    assert {"workspace", "env", "search", "grade", "pack", "cleanup"} <= set(timing["phases"])
    assert timing["pid"] != os.getpid() and timing["end"] >= timing["start"]
    assert timing["cpu"] > 0  # the search ran its tests in that worker's children


def test_eval_same_results_in_input_order_and_longest_first(tmp_path: Path) -> None:
    instances = _calc_set(tmp_path, 3)
    earlier = _earlier_results(tmp_path, {"acme__calc-1": 1.0, "acme__calc-3": 9.0})
    common = dict(config=eval_config(tmp_path), instances=instances, repos=tmp_path / "repos")
    run_eval(**common, out=tmp_path / "plain", workers=2)  # type: ignore[arg-type]
    run_eval(**common, out=tmp_path / "lpt", workers=2, durations_from=earlier)  # type: ignore[arg-type]
    assert rows_without_timing(tmp_path / "lpt" / "results.jsonl") == rows_without_timing(
        tmp_path / "plain" / "results.jsonl"
    )
    for name in ("predictions.jsonl",):
        assert (tmp_path / "lpt" / name).read_text() == (tmp_path / "plain" / name).read_text()


def test_eval_durations_from_unreadable_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    instances = _calc_set(tmp_path, 1)
    proc = _cli(
        str(eval_config(tmp_path)),
        "--instances",
        str(instances),
        "--repos",
        str(tmp_path / "repos"),
        "--out",
        str(tmp_path / "ev"),
        "--durations-from",
        str(tmp_path / "no-such-eval"),
    )
    assert proc.returncode == 1
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "--durations-from" in lines[0] and "no-such-eval" in lines[0]
    assert not (tmp_path / "ev").exists()


@pytest.mark.slow
def test_eval_sigkill_then_resume_skips_finished_and_keeps_longest_first(tmp_path: Path) -> None:
    inst = calc_repo(tmp_path)
    rows = [dict(inst, instance_id=f"acme__calc-{i}") for i in range(1, 5)]
    instances = write_jsonl(tmp_path / "inst.jsonl", rows)
    earlier = _earlier_results(
        tmp_path, {"acme__calc-1": 1.0, "acme__calc-2": 2.0, "acme__calc-3": 3.0, "acme__calc-4": 4}
    )
    # Each instance takes a second or two: the driver can be killed after the first is in.
    steps = [{"run": "sleep 0.5"}] * 2 + [{"replace": "calc.py", "old": "a - b", "new": "a + b"}]
    common = [
        str(eval_config(tmp_path, steps=steps)),
        "--instances",
        str(instances),
        "--repos",
        str(tmp_path / "repos"),
        "--workers",
        "1",
        "--durations-from",
        str(earlier),
    ]
    victim = subprocess.Popen(
        [sys.executable, "-m", "treesearch", "eval", *common, "--out", str(tmp_path / "ev")],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    results = tmp_path / "ev" / "results.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and victim.poll() is None:
        if results.is_file() and results.read_text().count("\n") >= 1:
            break
        time.sleep(0.05)
    assert victim.poll() is None, "the batch ended before it could be killed"
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    committed = [json.loads(x)["instance_id"] for x in results.read_text().splitlines()]
    assert 1 <= len(committed) < 4
    assert committed == ["acme__calc-4", "acme__calc-3", "acme__calc-2"][: len(committed)]
    resumed = _cli("--resume", str(tmp_path / "ev"))
    assert resumed.returncode == 0, resumed.stderr
    left = 4 - len(committed)
    assert f"{left} of 4 instances to run, {len(committed)} already finished" in resumed.stderr
    assert "longest first" in resumed.stderr  # the order recorded in eval.yaml is kept
    ran = [
        line.split()[1]
        for line in resumed.stderr.splitlines()
        if line.startswith("[") and "acme__calc-" in line
    ]
    expected = [f"acme__calc-{i}" for i in (4, 3, 2, 1) if f"acme__calc-{i}" not in committed]
    assert ran == expected  # the finished ones were skipped, the others ran longest first
    final = [json.loads(x) for x in results.read_text().splitlines()]
    assert [r["instance_id"] for r in final] == [r["instance_id"] for r in rows]
    assert {r["status"] for r in final} == {"resolved"}


# ------------------------------------------------------------------------------ the workers

RECORD = "test_eval_schedule:record_modules"


def record_modules(ctx: Any, out: str) -> None:
    """A ``python`` agent: writes whether its process (forked from the pool worker that runs
    the search, so with the worker's modules) has imported swebench, then fixes calc."""
    Path(out).write_text(json.dumps({"swebench": "swebench" in sys.modules, "pid": os.getppid()}))
    calc = ctx.session.workspace / "calc.py"
    calc.write_text(calc.read_text().replace("a - b", "a + b"))


def test_eval_pool_worker_does_not_import_swebench_for_an_instance_that_does_not_use_it(
    tmp_path: Path,
) -> None:
    instances = _calc_set(tmp_path, 1)
    seen = tmp_path / "seen.json"
    config = eval_config(tmp_path)
    cfg = yaml.safe_load(config.read_text())
    cfg["strategies"] = {
        "probe": {"kind": "python", "function": RECORD, "options": {"out": str(seen)}}
    }
    config.write_text(yaml.safe_dump(cfg))
    out = run_eval(config, instances, repos=tmp_path / "repos", out=tmp_path / "ev", workers=1)
    assert out.rows[0]["status"] == "resolved", out.rows[0]["reason"]
    probe = json.loads(seen.read_text())
    assert probe["pid"] != os.getpid()  # it ran in a pool worker, not in this process
    assert probe["swebench"] is False


_PROBE = """
import json, sys
from treesearch.eval.environment import swebench_specs
spec = swebench_specs(sys.argv[1], "4.3")
print(json.dumps({"spec": spec, "imported": "swebench" in sys.modules}))
"""


@pytest.mark.parametrize(
    ("has_specs", "repo"),
    [(False, "astropy/astropy"), (True, "astropy/astropy"), (True, "acme/calc")],
)
def test_swebench_lookup_imports_the_package_only_when_it_can_hold_specs(
    tmp_path: Path, has_specs: bool, repo: str
) -> None:
    # A swebench package on disk: a 5.x-like one (no per-version specs in harness/constants)
    # or a 4.x-like one that has them.
    pkg = tmp_path / "site" / "swebench"
    (pkg / "harness" / "constants").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "harness" / "__init__.py").write_text("")
    specs = '{"astropy/astropy": {"4.3": {"install": "pip install -e ."}}}'
    (pkg / "harness" / "constants" / "__init__.py").write_text(
        f"MAP_REPO_VERSION_TO_SPECS = {specs}\n" if has_specs else "MAP_REPO_TO_EXT = {}\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "site"), str(ROOT)]))
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, repo], capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    if has_specs and repo == "astropy/astropy":
        assert got == {"spec": {"install": "pip install -e ."}, "imported": True}
    else:  # nothing to find (no specs, or none of this repository): not imported
        assert got == {"spec": None, "imported": False}
