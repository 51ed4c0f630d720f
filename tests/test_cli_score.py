"""`treesearch score` and `treesearch cache`: real pytest runs through the console entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def ts(ws: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "treesearch", *args, "--workspace", str(ws), "--home", str(home)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_score_prints_table_caches_and_scores_a_snapshot(
    workspace: Path, home: Path, write
) -> None:
    write(
        workspace, "test_x.py", "def test_ok():\n    assert True\n\ndef test_bad():\n    assert 0\n"
    )
    first = ts(workspace, home, "score")
    assert first.returncode == 0, first.stderr
    assert "passed    test_x.py::test_ok" in first.stdout
    assert "failed    test_x.py::test_bad" in first.stdout
    assert "score 0.500 (pass_fraction)" in first.stdout
    again = json.loads(ts(workspace, home, "score", "--json").stdout)
    assert again["cached"] is True and again["score"] == 0.5
    snap = json.loads(ts(workspace, home, "snap", "capture", "-l", "half", "--json").stdout)
    write(workspace, "test_x.py", "def test_ok():\n    assert True\n")
    fixed = json.loads(ts(workspace, home, "score", "--json").stdout)
    assert fixed["score"] == 1.0 and fixed["cached"] is False
    old = json.loads(ts(workspace, home, "score", "half", "--json").stdout)
    assert old["score"] == 0.5 and old["tree"] == snap["tree"]
    assert (workspace / "test_x.py").read_text() == "def test_ok():\n    assert True\n"
    listed = ts(workspace, home, "cache", "list")
    assert snap["tree"][:12] in listed.stdout
    cleared = json.loads(ts(workspace, home, "cache", "clear", "--json").stdout)
    assert cleared["cleared"] >= 2
    bad = ts(workspace, home, "score", "--score", "nonsense")
    assert bad.returncode == 1 and "nonsense" in bad.stderr
