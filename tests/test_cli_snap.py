"""`treesearch snap`: the real console entry point in a subprocess, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import tree_digest


def snap(ws: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.pop("TREESEARCH_HOME", None)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "treesearch",
            "snap",
            *args,
            "--workspace",
            str(ws),
            "--home",
            str(home),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_snap_capture_restore_undo_round_trip_with_json(workspace: Path, home: Path, write) -> None:
    write(workspace, "app.py", "x = 1\n")
    first = snap(workspace, home, "capture", "--label", "start", "--json")
    assert first.returncode == 0, first.stderr
    data = json.loads(first.stdout)
    assert data["label"] == "start" and len(data["tree"]) == 40
    original = tree_digest(workspace)
    write(workspace, "app.py", "x = 2\n")
    write(workspace, "new.py", "y = 1\n")
    edited = tree_digest(workspace)
    restored = snap(workspace, home, "restore", "start", "--json")
    assert restored.returncode == 0, restored.stderr
    result = json.loads(restored.stdout)
    assert result["written"] == ["app.py"] and result["deleted"] == ["new.py"]
    assert tree_digest(workspace) == original
    undone = snap(workspace, home, "undo")
    assert undone.returncode == 0 and "restored" in undone.stdout
    assert tree_digest(workspace) == edited


def test_snap_diff_formats_log_and_show(workspace: Path, home: Path, write) -> None:
    write(workspace, "a.txt", "one\n")
    assert snap(workspace, home, "capture", "-l", "a").returncode == 0
    write(workspace, "a.txt", "two\n")
    write(workspace, "b.txt", "bee\n")
    assert snap(workspace, home, "capture", "-l", "b").returncode == 0
    names = snap(workspace, home, "diff", "a", "b", "--name-status")
    assert names.stdout.splitlines() == ["M\ta.txt", "A\tb.txt"]
    stat = snap(workspace, home, "diff", "a", "--stat")
    assert "2 files changed, 2 insertions(+), 1 deletion(-)" in stat.stdout  # git's wording
    patch = snap(workspace, home, "diff", "a", "b")
    assert "-one\n+two\n" in patch.stdout
    log = json.loads(snap(workspace, home, "log", "--json").stdout)
    assert [s["label"] for s in log] == ["b", "a"]
    show = snap(workspace, home, "show", "b")
    assert "a.txt" in show.stdout and "b.txt" in show.stdout
    gc = snap(workspace, home, "gc", "--keep-last", "1", "--json")
    assert gc.returncode == 0 and json.loads(gc.stdout)["dry_run"] is False


def test_snap_capture_lists_each_change_with_its_kind(workspace: Path, home: Path, write) -> None:
    write(workspace, "a.txt", "one\n")
    write(workspace, "b.txt", "bee\n")
    first = snap(workspace, home, "capture")
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[2:] == ["  A a.txt", "  A b.txt"]
    write(workspace, "a.txt", "two\n")
    (workspace / "b.txt").unlink()
    write(workspace, "c.txt", "sea\n")
    second = snap(workspace, home, "capture")
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines()[2:] == ["  M a.txt", "  D b.txt", "  A c.txt"]
    one = snap(workspace, home, "diff", first.stdout.split()[1], "--stat")
    assert one.stdout.splitlines()[-1] == " 3 files changed, 2 insertions(+), 2 deletions(-)"


def test_capture_listing_without_the_previous_snapshot_says_so_and_keeps_the_capture(
    workspace: Path, home: Path, write, capsys
) -> None:
    # The previous snapshot is protected from `snap gc`; a store that lost it anyway (a damaged
    # one) must not turn a capture that succeeded into an error, nor list kinds it cannot know.
    from dataclasses import replace

    from treesearch._cli_snap import _changed_kinds
    from treesearch.store import ShadowStore

    store = ShadowStore.open(workspace, home=home)
    write(workspace, "a.txt", "one\n")
    store.capture()
    write(workspace, "a.txt", "two\n")
    snap = store.capture()
    assert _changed_kinds(store, snap) == [("M", "a.txt")]
    lost = replace(snap, parent="0" * 40)
    assert _changed_kinds(store, lost) == [("~", "a.txt")]
    assert "cannot tell the kinds of change" in capsys.readouterr().err


def test_snap_exit_codes_usage_2_failure_1_with_one_line_message(
    workspace: Path, home: Path
) -> None:
    usage = snap(workspace, home, "restore")
    assert usage.returncode == 2 and "usage" in usage.stderr
    failed = snap(workspace, home, "restore", "no-such-label")
    assert failed.returncode == 1
    assert failed.stderr.count("\n") == 1 and "treesearch snap log" in failed.stderr
    bad_meta = snap(workspace, home, "capture", "--meta", "{not json")
    assert bad_meta.returncode == 2 and "--meta" in bad_meta.stderr
    store_inside = snap(workspace, workspace / "cache", "capture")
    assert store_inside.returncode == 1 and "inside the workspace" in store_inside.stderr
    assert not (workspace / "cache").exists()


def snap_here(cwd: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`treesearch snap ...` run in ``cwd`` without ``--workspace``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["TREESEARCH_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "treesearch", "snap", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        check=False,
    )


def test_snap_in_a_subfolder_works_on_the_workspace_whose_store_is_above_it(
    workspace: Path, home: Path, write
) -> None:
    """Regression: `treesearch snap` run from a subfolder opened a new, separate store."""
    write(workspace, "src/pkg/mod.py", "x = 1\n")
    assert snap(workspace, home, "capture", "-l", "top").returncode == 0
    sub = workspace / "src" / "pkg"
    log = snap_here(sub, home, "log", "--json")
    assert log.returncode == 0, log.stderr
    assert [s["label"] for s in json.loads(log.stdout)] == ["top"]
    assert len(list(home.iterdir())) == 1  # no second store
    write(workspace, "README", "added later\n")
    restored = snap_here(sub, home, "restore", "top")
    assert restored.returncode == 0, restored.stderr
    assert not (workspace / "README").exists()
    # --workspace says otherwise: the subfolder is then a workspace of its own.
    own = snap_here(sub, home, "log", "--workspace", ".")
    assert own.returncode == 0 and "no snapshots yet" in own.stdout
    # A folder with no store above it is its own workspace, as before.
    elsewhere = workspace.parent / "other"
    elsewhere.mkdir()
    assert "no snapshots yet" in snap_here(elsewhere, home, "log").stdout


def test_the_store_home_comes_from_the_environment_through_the_command_line_only(
    tmp_path: Path, monkeypatch
) -> None:
    """#13: only cli.py reads environment variables; the library takes them as arguments."""
    from treesearch import _cli_common as cli
    from treesearch.store import default_home

    monkeypatch.setenv("TREESEARCH_HOME", str(tmp_path / "from-env"))
    assert default_home() == Path.home() / ".cache" / "treesearch"  # a library call
    assert cli._store_home(None) == tmp_path / "from-env"
    assert cli._store_home(str(tmp_path / "given")) == tmp_path / "given"
    assert default_home({"XDG_CACHE_HOME": str(tmp_path / "xdg")}) == tmp_path / "xdg/treesearch"
    assert default_home({"TREESEARCH_HOME": "~/ts"}) == Path.home() / "ts"
