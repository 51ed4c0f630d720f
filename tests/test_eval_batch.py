"""``treesearch eval`` end to end on a real local process pool: real repositories, real searches,
real grading copies, real environments."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from eval_fixtures import (
    F2P,
    P2P,
    PYTEST,
    ROOT,
    calc_repo,
    eval_config,
    rows_without_timing,
    write_jsonl,
)

from treesearch.eval import run_eval


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "treesearch", "eval", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def test_eval_resolves_instance_and_writes_every_output(tmp_path: Path) -> None:
    inst = calc_repo(tmp_path)
    instances = write_jsonl(tmp_path / "inst.jsonl", [inst])
    out = run_eval(
        eval_config(tmp_path),
        instances,
        repos=tmp_path / "repos",
        out=tmp_path / "ev",
        workers=1,
    )
    assert not out.interrupted
    (row,) = out.rows
    assert row["status"] == "resolved", row
    assert row["tests"]["FAIL_TO_PASS"]["success"] == F2P
    assert row["tests"]["PASS_TO_PASS"]["success"] == P2P
    assert row["steer"] == {"search_tests": f"{PYTEST} tests", "oracle": False}
    ev = tmp_path / "ev"
    run_dir = ev / row["run_dir"]
    assert (run_dir / "graph.json").is_file() and (run_dir / "grade" / "report.json").is_file()
    preds = [json.loads(x) for x in (ev / "predictions.jsonl").read_text().splitlines()]
    assert preds[0]["instance_id"] == inst["instance_id"]
    assert preds[0]["model_name_or_path"] == "calc-model"
    assert "+    return a + b" in preds[0]["model_patch"]
    assert "heldout" not in preds[0]["model_patch"]  # the held-out tests are not in the answer
    summary = json.loads((ev / "summary.json").read_text())
    assert summary["resolved"] == 1 and summary["status"] == "finished"
    assert summary["steer"]["search_tests"] == f"{PYTEST} tests"
    assert (ev / "eval.yaml").is_file() and (ev / "instances.jsonl").is_file()
    # The repository was only read.
    assert not (tmp_path / "repos" / "acme__calc" / "index").exists()


def test_eval_held_out_test_is_absent_from_workspace_during_search(tmp_path: Path) -> None:
    listing = tmp_path / "listing.txt"
    steps = [
        {
            "run": f"find . -type f -not -path './.*' | sort > {listing}; cat heldout/test_more.py || true"
        },
        {"replace": "calc.py", "old": "a - b", "new": "a + b"},
    ]
    inst = calc_repo(tmp_path)
    out = run_eval(
        eval_config(tmp_path, steps=steps),
        write_jsonl(tmp_path / "inst.jsonl", [inst]),
        repos=tmp_path / "repos",
        out=tmp_path / "ev",
        workers=1,
    )
    seen = listing.read_text().split()
    assert "./calc.py" in seen and "./tests/test_calc.py" in seen  # the agent did look
    assert not any("heldout" in p for p in seen)
    # ... and the grade did run the held-out test, in the grading copy.
    (row,) = out.rows
    assert "heldout/test_more.py::test_add_two_two" in row["tests"]["FAIL_TO_PASS"]["success"]
    report = json.loads((tmp_path / "ev" / row["run_dir"] / "grade" / "report.json").read_text())
    assert report["treesearch"]["outcomes"]["heldout/test_more.py::test_add_two_two"] == "passed"
    assert report[row["instance_id"]]["resolved"] is True  # the harness's own shape


def test_eval_oracle_shows_grading_tests_and_labels_every_output(tmp_path: Path) -> None:
    listing = tmp_path / "listing.txt"
    steps = [
        {"run": f"find . -type f -not -path './.*' | sort > {listing}"},
        {"replace": "calc.py", "old": "a - b", "new": "a + b"},
    ]
    inst = calc_repo(tmp_path)
    out = run_eval(
        eval_config(tmp_path, steps=steps, oracle=True),
        write_jsonl(tmp_path / "inst.jsonl", [inst]),
        repos=tmp_path / "repos",
        out=tmp_path / "ev",
        workers=1,
    )
    assert "./heldout/test_more.py" in listing.read_text().split()
    assert out.rows[0]["oracle"] is True and out.rows[0]["status"] == "resolved"
    assert out.summary["oracle"] is True and out.summary["steer"]["oracle"] is True
    pred = json.loads((tmp_path / "ev" / "predictions.jsonl").read_text())
    assert pred["oracle"] is True


def test_eval_explicit_null_search_tests_is_like_absent_regression(tmp_path: Path) -> None:
    """`scoring.search_tests: null` with a row's own search command: the search config of the
    instance was built with `setdefault`, which kept the null and failed on it."""
    inst = dict(calc_repo(tmp_path), search_tests=f"{PYTEST} tests")
    out = run_eval(
        eval_config(tmp_path),
        write_jsonl(tmp_path / "inst.jsonl", [inst]),
        repos=tmp_path / "repos",
        out=tmp_path / "ev",
        workers=1,
        overrides=["scoring.search_tests=null"],
    )
    (row,) = out.rows
    assert row["status"] == "resolved", row
    assert row["steer"]["search_tests"] == f"{PYTEST} tests"


def test_eval_missing_repository_and_commit_are_error_rows_while_others_go_on(
    tmp_path: Path,
) -> None:
    good = calc_repo(tmp_path)
    no_repo = dict(good, instance_id="nobody__nothing-1", repo="nobody/nothing")
    no_commit = dict(good, instance_id="acme__calc-2", base_commit="0" * 40)
    out = run_eval(
        eval_config(tmp_path),
        write_jsonl(tmp_path / "inst.jsonl", [no_repo, good, no_commit]),
        repos=tmp_path / "repos",
        out=tmp_path / "ev",
        workers=2,
    )
    by_id = {r["instance_id"]: r for r in out.rows}
    assert by_id["acme__calc-1"]["status"] == "resolved"
    assert by_id["nobody__nothing-1"]["status"] == "error"
    assert "repository nobody/nothing not found under" in by_id["nobody__nothing-1"]["reason"]
    assert by_id["acme__calc-2"]["status"] == "error"
    assert f"base_commit {'0' * 40}" in by_id["acme__calc-2"]["reason"]
    assert [r["instance_id"] for r in out.rows] == [
        "nobody__nothing-1",
        "acme__calc-1",
        "acme__calc-2",
    ]
    preds = (tmp_path / "ev" / "predictions.jsonl").read_text().splitlines()
    assert len(preds) == 3 and json.loads(preds[0])["model_patch"] == ""
    assert out.summary["error"] == 2 and out.summary["resolved"] == 1


def test_eval_finds_repository_in_each_layout(tmp_path: Path) -> None:
    rows = [
        calc_repo(tmp_path, "flat/calc", layout="flat"),  # repos/flat__calc
        calc_repo(tmp_path, "nested/calc", layout="nested"),  # repos/nested/calc
        calc_repo(tmp_path, "dotgit/calc", layout="dotgit"),  # repos/dotgit/calc.git
    ]
    out = run_eval(
        eval_config(tmp_path, steps=[]),
        write_jsonl(tmp_path / "inst.jsonl", rows),
        repos=tmp_path / "repos",
        out=tmp_path / "ev",
        workers=2,
    )
    # Found, searched (no change) and graded: unresolved, not an error.
    assert [r["status"] for r in out.rows] == ["unresolved"] * 3, out.rows


def test_eval_local_workspace_form_is_copied_never_touched(tmp_path: Path) -> None:
    from conftest import tree_digest
    from eval_fixtures import make_calc

    ws = make_calc(tmp_path / "proj")
    inst = calc_repo(tmp_path)
    local = {k: v for k, v in inst.items() if k not in ("repo", "base_commit")}
    local.update(instance_id="local-1", workspace="proj")  # relative to the instances file
    before = tree_digest(ws)
    out = run_eval(
        eval_config(tmp_path),
        write_jsonl(tmp_path / "inst.jsonl", [local]),
        out=tmp_path / "ev",
        workers=1,
    )
    assert out.rows[0]["status"] == "resolved", out.rows[0]
    assert tree_digest(ws) == before


def test_eval_setup_runs_once_per_environment_and_tests_use_it(tmp_path: Path) -> None:
    counter = tmp_path / "setups.txt"
    # The set-up installs a module into the venv; the held-out test imports it.
    install = (
        f'echo run >> {counter} && python -c "import sysconfig, pathlib; '
        "pathlib.Path(sysconfig.get_paths()['purelib'], 'envmark.py').write_text('OK = 1')\""
    )
    inst = calc_repo(tmp_path)
    inst["test_patch"] = (
        inst["test_patch"]
        .replace("+from calc import add", "+import envmark\n+from calc import add")
        .replace("@@ -0,0 +1,5 @@", "@@ -0,0 +1,6 @@")
    )
    a = dict(inst, install=install)
    b = dict(inst, instance_id="acme__calc-2", install=install)
    # `python` on PATH: the environment's interpreter (as SWE-bench's `pytest` in its image).
    grade = {"command": "python -m pytest -q -p no:cacheprovider", "timeout": 60}
    cfg = eval_config(tmp_path, env_dir=str(tmp_path / "envs"), grade_tests=grade)
    out = run_eval(
        cfg,
        write_jsonl(tmp_path / "inst.jsonl", [a, b]),
        repos=tmp_path / "repos",
        out=tmp_path / "ev",
        workers=2,
    )
    assert [r["status"] for r in out.rows] == ["resolved", "resolved"], out.rows
    assert counter.read_text().split() == ["run"]  # once for the two instances
    log = Path(out.rows[0]["env_log"])
    assert log.is_file() and "envmark" in log.read_text()


def test_eval_failed_setup_is_an_error_row_with_its_log(tmp_path: Path) -> None:
    inst = dict(calc_repo(tmp_path), pre_install="echo preparing; exit 3")
    out = run_eval(
        eval_config(tmp_path, setup_timeout=60),
        write_jsonl(tmp_path / "inst.jsonl", [inst]),
        repos=tmp_path / "repos",
        out=tmp_path / "ev",
        workers=1,
    )
    (row,) = out.rows
    assert row["status"] == "error" and row["run_dir"] is None
    assert "environment set-up failed: `echo preparing; exit 3` exited 3" in row["reason"]
    assert "preparing" in Path(row["env_log"]).read_text()


def test_eval_setup_timeout_is_an_error_row(tmp_path: Path) -> None:
    inst = dict(calc_repo(tmp_path), install="sleep 30")
    out = run_eval(
        eval_config(tmp_path, setup_timeout=1),
        write_jsonl(tmp_path / "inst.jsonl", [inst]),
        repos=tmp_path / "repos",
        out=tmp_path / "ev",
        workers=1,
    )
    assert out.rows[0]["status"] == "error"
    assert "timed out after 1s" in out.rows[0]["reason"]


def test_eval_test_patch_that_does_not_apply_is_an_error_row(tmp_path: Path) -> None:
    inst = calc_repo(tmp_path)
    inst["test_patch"] = "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n" + (
        "@@ -1,2 +1,2 @@\n-def nothing_like_this():\n+def x():\n     return a - b\n"
    )
    out = run_eval(
        eval_config(tmp_path),
        write_jsonl(tmp_path / "inst.jsonl", [inst]),
        repos=tmp_path / "repos",
        out=tmp_path / "ev",
        workers=1,
    )
    assert out.rows[0]["status"] == "error"
    assert out.rows[0]["reason"].startswith("test_patch: the patch does not apply")


def test_eval_grading_run_that_cannot_start_is_an_error_not_a_score(tmp_path: Path) -> None:
    inst = calc_repo(tmp_path)
    cfg = eval_config(tmp_path, grade_tests={"command": "no-such-test-runner-xyz", "timeout": 30})
    out = run_eval(
        cfg,
        write_jsonl(tmp_path / "inst.jsonl", [inst]),
        repos=tmp_path / "repos",
        out=tmp_path / "ev",
        workers=1,
    )
    assert out.rows[0]["status"] == "error"
    assert out.rows[0]["reason"].startswith("grading run")


def test_eval_skipped_test_is_not_a_pass(tmp_path: Path) -> None:
    inst = calc_repo(tmp_path)
    inst["test_patch"] = (
        inst["test_patch"]
        .replace(
            "+def test_add_two_two():",
            "+import pytest\n+@pytest.mark.skip\n+def test_add_two_two():",
        )
        .replace("@@ -0,0 +1,5 @@", "@@ -0,0 +1,7 @@")
    )
    out = run_eval(
        eval_config(tmp_path),
        write_jsonl(tmp_path / "inst.jsonl", [inst]),
        repos=tmp_path / "repos",
        out=tmp_path / "ev",
        workers=1,
    )
    row = out.rows[0]
    assert row["status"] == "unresolved", row
    assert row["tests"]["FAIL_TO_PASS"]["failure"] == ["heldout/test_more.py::test_add_two_two"]


def test_eval_cli_progress_table_and_exit_code(tmp_path: Path) -> None:
    inst = calc_repo(tmp_path)
    proc = _cli(
        str(eval_config(tmp_path)),
        "--instances",
        str(write_jsonl(tmp_path / "inst.jsonl", [inst])),
        "--repos",
        str(tmp_path / "repos"),
        "--out",
        str(tmp_path / "ev"),
        "--workers",
        "1",
    )
    assert proc.returncode == 0, proc.stderr
    assert "[1/1] acme__calc-1  resolved" in proc.stderr
    assert "resolved 1, done 1/1, ETA" in proc.stderr
    assert "resolved 1/1 (100.0%)" in proc.stdout
    assert f"search steered by: {PYTEST} tests" in proc.stdout
    # Running into the same folder again is refused; --resume has nothing left to do.
    again = _cli(
        str(eval_config(tmp_path)),
        "--instances",
        str(tmp_path / "inst.jsonl"),
        "--out",
        str(tmp_path / "ev"),
    )
    assert again.returncode == 1 and "--resume" in again.stderr
    resumed = _cli("--resume", str(tmp_path / "ev"))
    assert resumed.returncode == 0 and "0 of 1 instances to run" in resumed.stderr


def test_eval_predictions_load_with_swebench(tmp_path: Path) -> None:
    utils = pytest.importorskip(
        "swebench.harness.utils", reason="the optional extra `swebench` is not installed"
    )
    inst = calc_repo(tmp_path)
    no_repo = dict(inst, instance_id="nobody__nothing-1", repo="nobody/nothing")
    run_eval(
        eval_config(tmp_path),
        write_jsonl(tmp_path / "inst.jsonl", [inst, no_repo]),
        repos=tmp_path / "repos",
        out=tmp_path / "ev",
        workers=1,
    )
    preds = utils.get_predictions_from_file(
        str(tmp_path / "ev" / "predictions.jsonl"), "unused", "test"
    )
    assert [p["instance_id"] for p in preds] == ["acme__calc-1", "nobody__nothing-1"]
    assert preds[0]["model_patch"].startswith("diff --git a/calc.py b/calc.py")
    assert preds[1]["model_patch"] == ""
    assert all(p["model_name_or_path"] == "calc-model" for p in preds)


# ------------------------------------------------------------------------------ resume


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
def test_eval_sigkill_of_driver_then_resume_gives_same_results(tmp_path: Path) -> None:
    build = _built_in(tmp_path, "compare_count,arith_celsius,swap_elapsed")
    common = [
        str(ROOT / "configs/eval-mutation.yaml"),
        "--instances",
        str(build / "instances.jsonl"),
        "--repos",
        str(build / "repos"),
        "--workers",
        "1",
        "-c",
        "search.budget.test_runs=12",
        "-c",
        "search.budget.expansions=40",
    ]
    whole = _cli(*common, "--out", str(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr
    # The same batch, its driver killed once the first instance is committed.
    victim = subprocess.Popen(
        [sys.executable, "-m", "treesearch", "eval", *common, "--out", str(tmp_path / "cut")],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    results = tmp_path / "cut" / "results.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and victim.poll() is None:
        if results.is_file() and results.read_text().count("\n") >= 1:
            break
        time.sleep(0.05)
    assert victim.poll() is None, "the batch ended before it could be killed"
    workers = _children(victim.pid)
    assert workers
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    # The orphaned pool workers stop their search and leave (no process left behind).
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and any(_alive(p) for p in workers):
        time.sleep(0.1)
    assert not [p for p in workers if _alive(p)]
    done_before = results.read_text().count("\n")
    assert 1 <= done_before < 3
    assert not (tmp_path / "cut" / "summary.json").exists()
    resumed = _cli("--resume", str(tmp_path / "cut"))
    assert resumed.returncode == 0, resumed.stderr
    assert f"{3 - done_before} of 3 instances to run, {done_before} already finished" in (
        resumed.stderr
    )
    assert rows_without_timing(results) == rows_without_timing(tmp_path / "whole" / "results.jsonl")
    for name in ("predictions.jsonl",):
        assert (tmp_path / "cut" / name).read_text() == (tmp_path / "whole" / name).read_text()
    assert sorted(p.name for p in (tmp_path / "cut" / "instances").iterdir()) == sorted(
        p.name for p in (tmp_path / "whole" / "instances").iterdir()
    )


@pytest.mark.slow
def test_eval_ctrl_c_stops_cleanly_and_resume_finishes(tmp_path: Path) -> None:
    inst = calc_repo(tmp_path)
    rows = [dict(inst, instance_id=f"acme__calc-{i}") for i in range(1, 5)]
    steps = [{"run": "sleep 0.5"}] * 4 + [{"replace": "calc.py", "old": "a - b", "new": "a + b"}]
    common = [
        str(eval_config(tmp_path, steps=steps)),
        "--instances",
        str(write_jsonl(tmp_path / "inst.jsonl", rows)),
        "--repos",
        str(tmp_path / "repos"),
        "--workers",
        "1",
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "treesearch", "eval", *common, "--out", str(tmp_path / "ev")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    results = tmp_path / "ev" / "results.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if results.is_file() and results.read_text().count("\n") >= 1:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted: continue with `treesearch eval --resume" in out
    summary = json.loads((tmp_path / "ev" / "summary.json").read_text())
    assert summary["status"] == "interrupted" and 1 <= summary["done"] < 4
    done = [json.loads(x)["status"] for x in results.read_text().splitlines()]
    assert done == ["resolved"] * summary["done"]  # an interrupted search is not a row
    resumed = _cli("--resume", str(tmp_path / "ev"))
    assert resumed.returncode == 0, resumed.stderr
    final = [json.loads(x) for x in results.read_text().splitlines()]
    assert [r["instance_id"] for r in final] == [r["instance_id"] for r in rows]
    assert {r["status"] for r in final} == {"resolved"}
