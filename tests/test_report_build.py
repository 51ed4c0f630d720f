"""Writing report pages (no browser): ``treesearch report``, the page written at the end of a
run, a page that cannot be written, a store that is gone, and texts too big for a page."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from report_fixtures import config, run_search, two_bug_project

from treesearch.app import run_from_config
from treesearch.config import validate
from treesearch.report import detect_kind, write_report
from treesearch.report.batch_page import curve
from treesearch.report.html import read_page_data
from treesearch.report.texts import MAX_DIFF, MAX_TRANSCRIPT

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "treesearch", "report", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_run_writes_self_contained_report_and_cli_rewrites_it(tmp_path: Path) -> None:
    out = run_search(tmp_path, "a")
    page = out.run_dir / "report.html"
    text = page.read_text()
    # Self-contained: no script or style fetched from anywhere, d3 and the data inlined.
    assert not re.search(r"<script[^>]*\bsrc=", text)
    assert "<link" not in text
    assert "d3js.org v7" in text
    data = read_page_data(page)
    assert data is not None and data["kind"] == "run"
    assert {n["id"] for n in data["nodes"]} == set(out.graph.nodes)
    assert data["best"] == out.best and data["diffs_available"] is True
    page.unlink()
    proc = _cli(str(out.run_dir))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"run report: {page}"
    assert read_page_data(page) == data  # the same page again (the store still exists)
    proc = _cli("--json", str(out.run_dir))
    assert json.loads(proc.stdout) == {"kind": "run", "notes": [], "path": str(page)}


def test_report_cli_on_a_folder_that_is_no_run_eval_or_compare_is_one_line_error(
    tmp_path: Path,
) -> None:
    proc = _cli(str(tmp_path))
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1
    assert str(tmp_path) in proc.stderr and "compare directory (compare.json)" in proc.stderr
    proc = _cli(str(tmp_path / "missing"))
    assert proc.returncode == 1 and "is not a folder" in proc.stderr


def test_detect_kind_by_the_files_a_folder_holds(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "compare.json").write_text("{}")
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "results.jsonl").write_text("")
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "events.jsonl").write_text("")
    (tmp_path / "r" / "config.yaml").write_text("")
    assert [detect_kind(tmp_path / k) for k in "cer"] == ["compare", "eval", "run"]


def test_run_whose_report_cannot_be_written_warns_on_terminal_and_in_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = two_bug_project(tmp_path / "ws")
    loaded = validate(config(tmp_path, ws), source="<test>", base_dir=tmp_path)

    def block_the_page(run: object, workspace: Path) -> None:  # a folder where the page goes
        (run.path / "report.html").mkdir()  # type: ignore[attr-defined]

    out = run_from_config(loaded, runs_dir=tmp_path / "runs", on_start=block_the_page)
    # The search's result stands: best node, patch, summary.
    assert out.best_score == 1.0 and "return a * b" in out.patch
    (warning,) = out.summary["warnings"]
    assert warning.startswith("report.html was not written: IsADirectoryError")
    recorded = json.loads((out.run_dir / "summary.json").read_text())
    assert recorded["warnings"] == [warning] and recorded["best"]["tree"] == out.best
    from treesearch._cli_search import _Progress, _report_search

    args = argparse.Namespace(json=False, no_patch=True)
    assert _report_search(args, out, _Progress()) == 0
    err = capsys.readouterr().err
    assert f"treesearch: warning: {warning}" in err


def test_rewritten_run_page_keeps_its_diffs_when_the_store_is_gone(tmp_path: Path) -> None:
    out = run_search(tmp_path, "a")
    page = out.run_dir / "report.html"
    before = read_page_data(page)
    assert before is not None
    shutil.rmtree(tmp_path / "a" / "home")  # the store (as an eval's scratch folder is removed)
    written = write_report(out.run_dir)
    assert written.notes == []
    after = read_page_data(page)
    assert after is not None
    assert [e["diff"] for e in after["edges"]] == [e["diff"] for e in before["edges"]]
    assert [n["diff_root"] for n in after["nodes"]] == [n["diff_root"] for n in before["nodes"]]
    assert any("return a * b" in (n["diff_root"] or {}).get("text", "") for n in after["nodes"])
    # With no earlier page either, the page says why it has no diffs (and so does the CLI).
    page.unlink()
    proc = _cli(str(out.run_dir))
    assert proc.returncode == 0
    assert "treesearch: note: diffs unavailable: no store of workspace" in proc.stderr
    data = read_page_data(page)
    assert data is not None and data["diffs_available"] is False
    assert data["notes"][0].startswith("diffs unavailable")


def test_huge_diff_and_transcript_are_cut_with_a_visible_note(tmp_path: Path) -> None:
    # ~550 KB, with markup that must stay text on the page (never end the data's <script>).
    big = "</script><script>alert(1)</script>\n" + "".join(
        f"line {i} of a generated file\n" for i in range(20_000)
    )
    ws = two_bug_project(tmp_path / "ws")
    cfg = config(tmp_path, ws)
    cfg["strategies"] = {
        "big": {"kind": "scripted", "steps": [{"write": "big.txt", "content": big}]}
    }
    cfg["search"]["budget"] = {"expansions": 1}
    out = run_from_config(
        validate(cfg, source="<test>", base_dir=tmp_path), runs_dir=tmp_path / "r"
    )
    data = read_page_data(out.run_dir / "report.html")
    assert data is not None
    (edge,) = data["edges"]
    assert edge["diff"]["note"] == f"cut at {MAX_DIFF:,} bytes"
    assert "+</script><script>alert(1)</script>" in edge["diff"]["text"]
    assert "<script>alert(1)" not in (out.run_dir / "report.html").read_text()
    assert MAX_DIFF // 2 < len(edge["diff"]["text"]) <= MAX_DIFF
    assert edge["transcript_text"]["note"].startswith("cut: the first")
    assert len(edge["transcript_text"]["text"]) == MAX_TRANSCRIPT
    assert (out.run_dir / "report.html").stat().st_size < 1_000_000


def test_report_of_a_run_that_never_wrote_its_summary_is_drawn_from_its_events(
    tmp_path: Path,
) -> None:
    out = run_search(tmp_path, "a")
    (out.run_dir / "summary.json").unlink()  # as after a SIGKILL: events.jsonl is the truth
    lines = (out.run_dir / "events.jsonl").read_text().splitlines()
    (out.run_dir / "events.jsonl").write_text("\n".join(lines[:-1]) + "\n")  # no `finished`
    write_report(out.run_dir)
    data = read_page_data(out.run_dir / "report.html")
    assert data is not None
    assert data["status"].startswith("incomplete")
    assert len(data["nodes"]) == out.graph.number_of_nodes()
    assert data["best"] == out.best


def test_anytime_curve_counts_instances_solved_by_each_budget() -> None:
    assert curve([3, None, 1, 3], 4, 10) == [
        [0.0, 0.0],
        [1.0, 0.25],
        [3.0, 0.5],
        [3.0, 0.75],
        [10.0, 0.75],
    ]
    assert curve([None], 1, 5) == [[0.0, 0.0], [5.0, 0.0]]
    assert curve([], 0, 0) == [[0.0, 0.0], [0.0, 0.0]]


def test_interrupted_run_writes_its_report_with_the_nodes_found_so_far(tmp_path: Path) -> None:
    ws = two_bug_project(tmp_path / "ws")
    cfg = config(tmp_path, ws)
    cfg["strategies"] = {
        "fix-add": cfg["strategies"]["fix-add"],
        "slow": {"kind": "command", "command": ["sleep", "120"]},
    }
    cfg["search"]["budget"] = {"expansions": 4}
    path = tmp_path / "cfg.yaml"
    path.write_text(json.dumps(cfg))  # JSON is YAML
    proc = subprocess.Popen(
        [sys.executable, "-m", "treesearch", "run", str(path), "--no-patch"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    runs = tmp_path / "runs"
    deadline = time.monotonic() + 120
    events: list[Path] = []
    while time.monotonic() < deadline:  # until the first expansion (fix-add) is recorded
        events = list(runs.glob("*/events.jsonl"))
        if events and '"event": "expansion"' in events[0].read_text():
            break
        time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("the search recorded no expansion")
    time.sleep(0.5)  # into the slow agent's run
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    run_dir = events[0].parent
    data = read_page_data(run_dir / "report.html")
    assert data is not None and data["status"] == "interrupted"
    graph = json.loads((run_dir / "graph.json").read_text())
    assert len(data["nodes"]) == len(graph["nodes"]) == 2
    assert f"report: {run_dir / 'report.html'}" in out
