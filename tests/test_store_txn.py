"""The store's transactions: the workspace hold, atomic store files and their repair on open,
restores that complete or roll back and say which, and gc's retention rules.

Real processes hold and fight over real workspaces; failures are real (a killed process, a file
size limit that git's index write runs into), never mocks of the store.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import tree_digest

from treesearch.errors import GcError, WorkspaceBusy
from treesearch.session import TransactionalSession
from treesearch.store import ShadowStore
from treesearch.store._restore import journal_pending

HOLDER = textwrap.dedent(
    """
    import sys
    from treesearch.store import ShadowStore
    from treesearch.session import TransactionalSession
    store = ShadowStore.open(sys.argv[1], home=sys.argv[2])
    session = TransactionalSession.create(store)
    print("ready", flush=True)
    sys.stdin.read()  # hold until the test closes our standard input
    session.close()
    print("released", flush=True)
    """
)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.pop("TREESEARCH_HOME", None)
    return env


def treesearch(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "treesearch", *args],
        capture_output=True,
        text=True,
        env=_env(),
        check=False,
        timeout=120,
        **kw,
    )


def snap(ws: Path, home: Path, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return treesearch("snap", *args, "--workspace", str(ws), "--home", str(home), **kw)


def start_holder(ws: Path, home: Path) -> subprocess.Popen[str]:
    """Another process with a live session on ``ws`` (it holds the workspace until released)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(ws), str(home)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line == "ready\n", proc.stderr.read() if proc.stderr else line
    return proc


def release(proc: subprocess.Popen[str]) -> None:
    out, err = proc.communicate(input="", timeout=60)
    assert proc.returncode == 0 and "released" in out, err


# ---------------------------------------------------------------------------- workspace hold


def test_restore_in_another_process_is_refused_at_once_while_a_session_holds_the_workspace(
    workspace: Path, home: Path, write
) -> None:
    write(workspace, "app.py", "v = 1\n")
    assert snap(workspace, home, "capture", "-l", "one").returncode == 0
    write(workspace, "app.py", "v = 2\n")
    holder = start_holder(workspace, home)
    try:
        before = tree_digest(workspace)
        for args in (("restore", "one"), ("undo",), ("gc", "--keep-last", "0")):
            refused = snap(workspace, home, *args)
            assert refused.returncode == 1, refused.stdout
            assert refused.stderr.count("\n") == 1, refused.stderr
            assert f"is in use by pid {holder.pid} " in refused.stderr
            assert "session" in refused.stderr and "since" in refused.stderr
            assert tree_digest(workspace) == before
        # Captures, reads and a gc that only lists are not held.
        assert snap(workspace, home, "capture").returncode == 0
        assert snap(workspace, home, "log").returncode == 0
        assert snap(workspace, home, "gc", "--keep-last", "0", "--dry-run").returncode == 0
    finally:
        release(holder)
    done = snap(workspace, home, "restore", "one")
    assert done.returncode == 0, done.stderr
    assert (workspace / "app.py").read_text() == "v = 1\n"


def test_run_is_refused_at_once_while_another_process_holds_the_workspace(
    tmp_path: Path, home: Path, write
) -> None:
    proj = tmp_path / "proj"
    write(proj, "calc.py", "def add(a, b):\n    return a - b\n")
    cfg = {
        "workspace": {"path": str(proj)},
        "store": {"home": str(home)},
        "strategies": {
            "fix": {
                "kind": "scripted",
                "steps": [{"replace": "calc.py", "old": "a - b", "new": "a + b"}],
            }
        },
        "scoring": {"search_tests": {"command": "true", "timeout": 60}},
        "search": {"budget": {"expansions": 2}},
        "output": {"runs_dir": str(tmp_path / "runs"), "run_id": "second"},
    }
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    holder = start_holder(proj, home)
    try:
        refused = treesearch("run", str(tmp_path / "cfg.yaml"), "--quiet")
        assert refused.returncode == 1
        assert f"is in use by pid {holder.pid} " in refused.stderr
        assert (proj / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"
        assert len(refused.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "runs" / "second").exists()  # refused before any run folder
    finally:
        release(holder)


def test_hold_of_a_process_killed_with_sigkill_is_reclaimed_with_evidence(
    workspace: Path, home: Path, write
) -> None:
    write(workspace, "app.py", "v = 1\n")
    assert snap(workspace, home, "capture", "-l", "one").returncode == 0
    write(workspace, "app.py", "v = 2\n")
    holder = start_holder(workspace, home)
    holder.send_signal(signal.SIGKILL)
    holder.communicate(timeout=60)
    assert holder.returncode == -signal.SIGKILL
    done = snap(workspace, home, "restore", "one")
    assert done.returncode == 0, done.stderr
    assert f"reclaimed the workspace hold of pid {holder.pid} " in done.stderr
    assert f"process {holder.pid} is gone" in done.stderr
    assert (workspace / "app.py").read_text() == "v = 1\n"
    again = snap(workspace, home, "undo")  # nothing left to reclaim: no note
    assert again.returncode == 0 and "reclaimed" not in again.stderr


def test_hold_kept_by_a_forked_child_of_a_dead_holder_is_refused_and_the_child_is_named(
    workspace: Path, home: Path, write
) -> None:
    write(workspace, "a.txt", "1")
    assert snap(workspace, home, "capture", "-l", "one").returncode == 0
    code = textwrap.dedent(
        """
        import os, sys, time
        from treesearch.store import ShadowStore
        store = ShadowStore.open(sys.argv[1], home=sys.argv[2])
        store.hold("parent")
        child = os.fork()
        if child == 0:
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 1)
            os.dup2(null, 2)
            time.sleep(60)  # keeps the inherited flock
            os._exit(0)
        print(child, flush=True)
        os._exit(0)  # dies holding, without releasing
        """
    )
    parent = subprocess.run(
        [sys.executable, "-c", code, str(workspace), str(home)],
        capture_output=True,
        text=True,
        env=_env(),
        check=True,
    )
    child = int(parent.stdout)
    try:
        refused = snap(workspace, home, "restore", "one")
        assert refused.returncode == 1
        assert "which is gone (a child it forked still holds the lock" in refused.stderr
    finally:
        os.kill(child, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the child is not ours to reap: wait until it is gone
        done = snap(workspace, home, "restore", "one")
        if done.returncode == 0:
            break
        time.sleep(0.1)
    assert done.returncode == 0 and "reclaimed the workspace hold" in done.stderr, done.stderr


def test_search_after_a_holder_was_killed_records_the_reclaimed_hold_in_its_run(
    tmp_path: Path, home: Path, write
) -> None:
    from treesearch.app import run_from_config

    proj = tmp_path / "proj"
    write(proj, "a.txt", "1\n")
    holder = start_holder(proj, home)
    holder.send_signal(signal.SIGKILL)
    holder.communicate(timeout=60)
    out = run_from_config(
        {
            "workspace": {"path": str(proj)},
            "store": {"home": str(home)},
            "strategies": {
                "edit": {"kind": "scripted", "steps": [{"write": "a.txt", "content": "2\n"}]}
            },
            "scoring": {"search_tests": {"command": "true", "timeout": 60}},
            "search": {"budget": {"expansions": 1}},
            "output": {"runs_dir": str(tmp_path / "runs"), "run_id": "after-kill"},
        },
        base_dir=tmp_path,
    )
    events = [json.loads(line) for line in (out.run_dir / "events.jsonl").read_text().splitlines()]
    notes = [e["note"] for e in events if e["event"] == "hold_reclaimed"]
    assert len(notes) == 1 and f"pid {holder.pid} " in notes[0] and "is gone" in notes[0]


def test_hold_is_reentrant_in_one_process_and_released_by_the_last_claim(
    workspace: Path, home: Path, write
) -> None:
    write(workspace, "a.txt", "1")
    store = ShadowStore.open(workspace, home=home)
    first = store.capture(label="one")
    write(workspace, "a.txt", "2")
    with store.hold("outer search"):
        session = TransactionalSession.create(store)  # a session inside the search: no deadlock
        store.restore("one")  # a restore inside takes the same hold
        with ShadowStore.open(workspace, home=home) as other:  # another store object, same process
            other.capture()
            with other.hold("inner"):
                pass
        session.close()
        refused = snap(workspace, home, "undo")
        assert refused.returncode == 1 and f"pid {os.getpid()} " in refused.stderr
        assert "outer search" in refused.stderr
    assert store.capture().tree == first.tree
    done = snap(workspace, home, "undo")
    assert done.returncode == 0, done.stderr
    assert (workspace / "a.txt").read_text() == "2"


def test_a_hold_writes_its_record_into_its_lock_file_and_a_half_written_one_is_no_holder(
    workspace: Path, home: Path, write
) -> None:
    """The holder record lives in ``hold.lock`` (no file made, renamed and removed per hold: a
    restore takes one of its own); it is emptied on release; one a kill left half written is
    reported as damaged by the next holder, and while held it reads as not yet written."""
    from treesearch.store._hold import holder

    write(workspace, "a.txt", "1")
    store = ShadowStore.open(workspace, home=home)
    store.capture(label="one")
    lock = store.path / "hold.lock"
    before = set(os.listdir(store.path))
    with store.hold("a restore of the test"):
        record = holder(store.path)
        assert record is not None and record.pid == os.getpid()
        assert record.purpose == "a restore of the test"
        assert set(os.listdir(store.path)) == before | {"hold.lock"}
        ino = lock.stat().st_ino
    assert lock.read_bytes() == b"" and holder(store.path) is None and lock.stat().st_ino == ino
    lock.write_bytes(b'{"pid": 12, "comm')  # a holder killed while writing its record
    assert holder(store.path) is None
    done = snap(workspace, home, "restore", "one")
    assert done.returncode == 0, done.stderr
    assert "removed a damaged workspace hold record (its lock was free)" in done.stderr
    assert lock.read_bytes() == b""
    store.close()


def test_session_dropped_without_close_releases_its_hold(
    workspace: Path, home: Path, write
) -> None:
    write(workspace, "a.txt", "1")
    store = ShadowStore.open(workspace, home=home)
    session = TransactionalSession.create(store)
    code = textwrap.dedent(
        """
        import sys
        from treesearch.errors import WorkspaceBusy
        from treesearch.store import ShadowStore
        store = ShadowStore.open(sys.argv[1], home=sys.argv[2])
        try:
            store.hold("probe").release()
        except WorkspaceBusy as exc:
            print("busy", exc)
        else:
            print("free")
        """
    )
    probe = [sys.executable, "-c", code, str(workspace), str(home)]
    busy = subprocess.run(probe, capture_output=True, text=True, env=_env(), check=True)
    assert busy.stdout.startswith("busy ") and f"pid {os.getpid()} " in busy.stdout
    del session
    free = subprocess.run(probe, capture_output=True, text=True, env=_env(), check=True)
    assert free.stdout == "free\n", free.stdout


def test_hold_refusal_is_a_workspace_busy_error_in_the_api(
    workspace: Path, home: Path, write
) -> None:
    write(workspace, "a.txt", "1")
    holder = start_holder(workspace, home)
    try:
        store = ShadowStore.open(workspace, home=home)
        snap1 = store.capture()
        with pytest.raises(WorkspaceBusy, match=rf"pid {holder.pid} .*session"):
            store.restore(snap1.commit)
        with pytest.raises(WorkspaceBusy):
            TransactionalSession.create(store)
    finally:
        release(holder)


def _two_search_config(tmp_path: Path, proj: Path, home: Path, run_id: str) -> Path:
    cfg = {
        "workspace": {"path": str(proj)},
        "store": {"home": str(home)},
        "strategies": {
            f"edit-{i}": {
                "kind": "scripted",
                "steps": [{"run": "sleep 0.2"}, {"write": f"f{i}.txt", "content": f"{run_id}\n"}],
            }
            for i in range(3)
        },
        "scoring": {"search_tests": {"command": "true", "timeout": 60}},
        "search": {"policy": "bfs", "stop_on_perfect": False, "budget": {"expansions": 6}},
        "output": {"runs_dir": str(tmp_path / "runs"), "run_id": run_id},
    }
    path = tmp_path / f"{run_id}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.slow
def test_two_searches_on_one_workspace_the_second_is_refused_and_the_first_stays_unmixed(
    tmp_path: Path, home: Path, write
) -> None:
    """Regression: two `treesearch run` on one workspace both exited 0 and mixed their edits."""
    proj = tmp_path / "proj"
    write(proj, "base.txt", "base\n")
    first = subprocess.Popen(
        [sys.executable, "-m", "treesearch", "run", "--quiet", "--json"]
        + [str(_two_search_config(tmp_path, proj, home, "first"))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    events = tmp_path / "runs" / "first" / "events.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and '"expansion"' not in (
        events.read_text() if events.exists() else ""
    ):
        time.sleep(0.05)
    second = treesearch("run", "--quiet", str(_two_search_config(tmp_path, proj, home, "second")))
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert second.returncode == 1, second.stdout
    assert f"is in use by pid {first.pid} " in second.stderr and "search run first" in second.stderr
    summary = json.loads(out)
    store = ShadowStore.open(proj, home=home)
    assert store.capture().tree == summary["best"]["tree"]  # "now at the best node" holds
    for name in ("f0.txt", "f1.txt", "f2.txt"):
        if (proj / name).exists():
            assert (proj / name).read_text() == "first\n"
    assert not (tmp_path / "runs" / "second").exists()  # refused before any run folder


# ---------------------------------------------------------------------------- atomic store files


def test_open_repairs_an_empty_workspace_marker_left_by_a_kill_and_keeps_snapshots(
    workspace: Path, home: Path, write
) -> None:
    """Regression: a kill while the marker was written in place left it empty, and every later
    open failed with "store ... belongs to workspace , not ..."."""
    write(workspace, "a.txt", "precious")
    store = ShadowStore.open(workspace, home=home)
    kept = store.capture(label="keep")
    store.close()
    (store.path / "workspace").write_text("")  # what an in-place write killed mid-way leaves
    again = ShadowStore.open(workspace, home=home)
    assert again.repaired is not None and "marker was empty" in again.repaired
    assert (again.path / "workspace").read_text() == str(workspace)
    assert again.resolve("keep").commit == kept.commit
    write(workspace, "a.txt", "changed")
    again.restore("keep")
    assert (workspace / "a.txt").read_text() == "precious"
    assert ShadowStore.open(workspace, home=home).repaired is None


def test_open_rewrites_a_torn_attributes_file_so_bytes_still_round_trip(
    workspace: Path, home: Path, write
) -> None:
    write(workspace, ".gitattributes", "* text eol=crlf\n")
    write(workspace, "dos.txt", b"one\r\ntwo\r\n")
    store = ShadowStore.open(workspace, home=home)
    store.close()
    (store.path / "git" / "info" / "attributes").write_text("")  # torn by a kill
    again = ShadowStore.open(workspace, home=home)
    snap = again.capture()
    write(workspace, "dos.txt", b"changed\n")
    again.restore(snap.commit)
    assert (workspace / "dos.txt").read_bytes() == b"one\r\ntwo\r\n"
    assert (again.path / "git" / "info" / "attributes").read_text().startswith("* -text")
    assert again.repaired is not None and "git/info/attributes" in again.repaired


def test_open_completes_a_store_whose_repository_was_half_created(
    workspace: Path, home: Path, write
) -> None:
    write(workspace, "a.txt", "1")
    store = ShadowStore.open(workspace, home=home)
    path = store.path
    store.close()
    # A kill inside `git init`: the repository folder exists without HEAD; config torn.
    (path / "git" / "HEAD").unlink()
    (path / "git" / "config").write_text("[core")
    again = ShadowStore.open(workspace, home=home)
    snap = again.capture()
    assert snap.tree and again.fsck() is not None
    assert "hooksPath" in (again.path / "git" / "config").read_text()
    assert again.repaired is not None and "half created" in again.repaired


def test_every_store_file_is_replaced_atomically_never_rewritten_in_place(
    workspace: Path, home: Path, write
) -> None:
    """The marker, state and refs are renamed into place: the inode of each changes on every
    write, so a reader or a kill never sees one half written (the journal is written in place
    into its empty file: a part of it is never JSON, see the test below)."""
    write(workspace, "a.txt", "1")
    store = ShadowStore.open(workspace, home=home)
    snap = store.capture()
    state = store.path / "state.json"
    ino = state.stat().st_ino
    write(workspace, "a.txt", "2")
    store.capture()
    assert state.stat().st_ino != ino
    store.restore(snap.commit)
    leftovers = [p.name for p in store.path.iterdir() if ".tmp" in p.name]
    assert leftovers == []


@pytest.mark.slow
def test_stores_whose_creation_was_killed_at_any_moment_open_and_capture(
    tmp_path: Path, home: Path
) -> None:
    """SIGKILL a process creating a store at spread-out moments; every store it leaves opens."""
    code = "import sys; from treesearch.store import ShadowStore; ShadowStore.open(sys.argv[1], home=sys.argv[2])"
    spans = []
    for i in range(3):  # how long a creation takes here, process start included
        ws = tmp_path / f"probe{i}"
        ws.mkdir()
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code, str(ws), str(home)], env=_env(), check=True)
        spans.append(time.perf_counter() - t0)
    span = min(spans)
    for i in range(40):
        ws = tmp_path / f"ws{i}"
        ws.mkdir()
        (ws / "a.txt").write_text(f"{i}\n")
        proc = subprocess.Popen([sys.executable, "-c", code, str(ws), str(home)], env=_env())
        time.sleep(span * (0.5 + i / 60))  # from half-way through start-up to past the end
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        store = ShadowStore.open(ws, home=home)
        assert store.capture().tree, i
        assert (store.path / "workspace").read_text() == str(ws)
        store.close()


def test_open_removes_temp_files_of_killed_writers_but_not_of_live_ones(
    workspace: Path, home: Path, write
) -> None:
    write(workspace, "a.txt", "1")
    store = ShadowStore.open(workspace, home=home)
    store.close()
    dead_pid = subprocess.Popen(["true"])
    dead_pid.wait()
    dead = store.path / f".state.json.tmp-{dead_pid.pid}-0badf00d"
    live = store.path / f".state.json.tmp-{os.getpid()}-0badf00d"
    dead.write_text("half")
    live.write_text("in flight")
    ShadowStore.open(workspace, home=home).close()
    assert not dead.exists() and live.exists()


# ---------------------------------------------------------------------------- restore outcome


def _limit_file_size(limit: int) -> Any:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_the_journal_file_stays_between_restores_empty_and_is_written_in_place(
    workspace: Path, home: Path, write, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restore writes its journal into the store's one journal file and empties it when it
    ends (no new file per restore); a journal left by a killed restore is recovered before the
    next restore writes its own."""
    write(workspace, "a.txt", "one\n")
    store = ShadowStore.open(workspace, home=home)
    first = store.capture()
    write(workspace, "a.txt", "two\n")
    second = store.capture()
    journal = store.path / "journal.json"
    store.restore(first.commit)
    ino = journal.stat().st_ino
    assert journal.read_bytes() == b""
    store.restore(second.commit)
    assert journal.stat().st_ino == ino and journal.read_bytes() == b""
    assert (workspace / "a.txt").read_text() == "two\n"

    _killed_after_its_journal(store, first.commit, monkeypatch)
    assert (
        journal.stat().st_ino == ino and json.loads(journal.read_bytes())["target"] == first.commit
    )
    again = ShadowStore.open(workspace, home=home)
    assert again.recovered is not None and "completed" in again.recovered
    assert (workspace / "a.txt").read_text() == "one\n" and journal.read_bytes() == b""
    again.restore(second.commit)
    assert (workspace / "a.txt").read_text() == "two\n" and journal.read_bytes() == b""
    again.close()


def test_restore_whose_index_sync_fails_after_every_file_is_written_completes_and_says_so(
    workspace: Path, home: Path, write
) -> None:
    """Regression: a restore that ran out of room after writing every file said "restore
    failed" and left a journal that the next command completed. The index is only a cache."""
    for i in range(600):
        write(workspace, f"d/f{i:03}.txt", "old\n")
    assert snap(workspace, home, "capture", "-l", "old").returncode == 0
    for i in range(600):
        write(workspace, f"d/f{i:03}.txt", "new!\n")
    assert snap(workspace, home, "capture", "-l", "new").returncode == 0
    new = tree_digest(workspace)
    # A real failure: git's index write runs into the file size limit (every workspace file
    # and the journal are far smaller), as it would into a full disk.
    limited = snap(workspace, home, "restore", "old", preexec_fn=_limit_file_size(24 * 1024))
    assert limited.returncode == 0, limited.stderr
    assert "restored" in limited.stdout
    assert "warning: the store's index could not be updated" in limited.stderr
    assert limited.stderr.count("\n") == 1, limited.stderr
    assert all((workspace / f"d/f{i:03}.txt").read_text() == "old\n" for i in range(600))
    store_dir = next(home.iterdir())
    assert not journal_pending(store_dir / "journal.json")
    log = snap(workspace, home, "log")
    assert log.returncode == 0 and "interrupted" not in log.stderr
    store = ShadowStore.open(workspace, home=home)
    assert store.capture().tree == store.resolve("old").tree  # the stale index corrects itself
    store.undo()
    assert tree_digest(workspace) == new


def test_restore_that_fails_before_writing_says_nothing_was_changed(
    workspace: Path, home: Path, write
) -> None:
    write(workspace, "small.txt", "1\n")
    assert snap(workspace, home, "capture", "-l", "one").returncode == 0
    write(workspace, "big.bin", os.urandom(200_000))  # the safety snapshot must store this
    before = tree_digest(workspace)
    failed = snap(workspace, home, "restore", "one", preexec_fn=_limit_file_size(24 * 1024))
    assert failed.returncode == 1
    assert failed.stderr.count("\n") == 1, failed.stderr
    assert "failed before anything was changed" in failed.stderr
    assert "the workspace is as it was" in failed.stderr
    assert tree_digest(workspace) == before
    assert not journal_pending(next(home.iterdir()) / "journal.json")
    done = snap(workspace, home, "restore", "one")
    assert done.returncode == 0 and "interrupted" not in done.stderr, done.stderr
    assert not (workspace / "big.bin").exists()


def _hard_linked_pair(workspace: Path, home: Path, write) -> tuple[Path, dict[str, Any]]:
    """Snapshots "new" (``h`` and ``z`` changed, ``z`` 100 kB) and "old", at which the
    workspace is left with ``h`` linked from outside it; returns that outside link and the
    digest of "new"."""
    write(workspace, "h", "new h\n")
    write(workspace, "z", b"z" * 100_000)
    assert snap(workspace, home, "capture", "-l", "new").returncode == 0
    new = tree_digest(workspace)
    write(workspace, "h", "old h\n")
    write(workspace, "z", "old z\n")
    outside = workspace.parent / "outside-h"
    os.link(workspace / "h", outside)
    assert snap(workspace, home, "capture", "-l", "old").returncode == 0
    return outside, new


def test_a_rollback_puts_back_a_hard_linked_file_it_wrote_over_as_the_very_file(
    workspace: Path, home: Path, write
) -> None:
    """A restore writes a new file over a hard-linked one (the other link keeps the old
    content). Regression: rolling back wrote a copy of the old content, which took its size
    again (the other link holds the old file): on a full disk, "rolling back failed too". The
    restore keeps the file aside (another link to it, no room), and the rollback renames it
    back: the very file, linked as before, and nothing left in the workspace."""
    outside, new = _hard_linked_pair(workspace, home, write)
    old = tree_digest(workspace)
    ino = outside.stat().st_ino
    # A real failure after ``h`` is written: ``z`` runs into the file size limit.
    failed = snap(workspace, home, "restore", "new", preexec_fn=_limit_file_size(24 * 1024))
    assert failed.returncode == 1 and "rolled back to how it was" in failed.stderr, failed.stderr
    assert tree_digest(workspace) == old
    assert (workspace / "h").stat().st_ino == ino and outside.stat().st_nlink == 2
    assert outside.read_text() == "old h\n"
    done = snap(workspace, home, "restore", "new")
    assert done.returncode == 0, done.stderr
    assert tree_digest(workspace) == new  # (nothing kept aside is left)
    assert outside.read_text() == "old h\n" and outside.stat().st_nlink == 1


def test_a_restore_killed_with_a_hard_linked_file_kept_aside_is_recovered_without_it(
    workspace: Path, home: Path, write, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a restore keeps aside for its rollback (``h``'s other link) is in the workspace
    while it runs; after a kill, recovery removes it (the other link still holds the file)."""
    from treesearch.store._fs import SafeTree

    outside, new = _hard_linked_pair(workspace, home, write)
    store = ShadowStore.open(workspace, home=home)

    class Killed(BaseException):
        pass

    real = SafeTree.write_file

    def write_file(self: SafeTree, rel: str, *args: Any, **kw: Any) -> None:
        if rel == "z":
            raise Killed
        real(self, rel, *args, **kw)

    monkeypatch.setattr(SafeTree, "write_file", write_file)
    with pytest.raises(Killed):
        store.restore("new")
    store.close()
    monkeypatch.undo()
    assert any(p.name.endswith(".kept") for p in workspace.iterdir())  # ``h`` is kept aside
    again = ShadowStore.open(workspace, home=home)
    assert again.recovered is not None and "completed" in again.recovered
    assert tree_digest(workspace) == new  # (nothing kept aside is left)
    assert outside.read_text() == "old h\n" and outside.stat().st_nlink == 1
    again.undo()
    assert (workspace / "h").read_text() == "old h\n" and (workspace / "z").read_text() == "old z\n"
    again.close()


def _killed_after_its_journal(
    store: ShadowStore, commit: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Restore ``commit`` and stop right after the journal is written, as a kill there would
    (nothing is rolled back); the store is closed."""
    from treesearch.store._restore import Restorer

    class Killed(BaseException):
        pass

    def killed(self: Restorer, *args: object, **kw: object) -> list[str]:
        raise Killed

    monkeypatch.setattr(Restorer, "execute", killed)
    with pytest.raises(Killed):
        store.restore(commit)
    store.close()
    monkeypatch.undo()


@pytest.mark.usefixtures("watch_mode")
def test_a_journal_cut_short_at_any_length_is_discarded_and_the_workspace_is_as_it_was(
    workspace: Path, home: Path, write, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The journal is written in place (no temporary file and rename): a kill while it is
    written leaves a part of it, which the next open discards; nothing was written yet."""
    write(workspace, "a.txt", "one\n")
    write(workspace, "d/b.txt", "one\n")
    store = ShadowStore.open(workspace, home=home)
    first = store.capture()
    write(workspace, "a.txt", "two\n")
    write(workspace, "d/c.txt", "new\n")
    store.capture()
    before = tree_digest(workspace)

    _killed_after_its_journal(store, first.commit, monkeypatch)
    journal = store.path / "journal.json"
    whole = journal.read_bytes()
    assert json.loads(whole)["target"] == first.commit
    for cut in range(len(whole)):
        journal.write_bytes(whole[:cut])
        reopened = ShadowStore.open(workspace, home=home)
        if cut == 0:  # not a byte written: the journal file as between restores
            assert reopened.recovered is None
        else:
            assert reopened.recovered is not None and "discarded" in reopened.recovered, cut
        assert not journal_pending(journal) and tree_digest(workspace) == before
        reopened.close()
    journal.write_bytes(whole)  # the whole journal: the restore is completed
    reopened = ShadowStore.open(workspace, home=home)
    assert reopened.recovered is not None and "completed" in reopened.recovered
    assert reopened.capture().tree == first.tree
    reopened.close()


@pytest.mark.usefixtures("watch_mode")
def test_an_interrupted_restore_is_completed_when_the_index_names_a_shared_index_that_is_gone(
    workspace: Path, home: Path, write, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (seen once in CI, SIGKILL at a random point of a restore): git removes the old
    shared index (``splitIndex.sharedIndexExpire = now``) before it renames the new index into
    place, so a kill in between leaves an index that names a shared index that is gone. Every
    later scan failed ("index file open failed") and the restore could be neither completed nor
    rolled back. The index is only a cache: it is dropped and every file hashed again."""
    for i in range(40):
        write(workspace, f"d{i % 4}/f{i}.txt", f"one {i}\n")
    store = ShadowStore.open(workspace, home=home)
    first = store.capture()
    for i in range(0, 40, 3):
        write(workspace, f"d{i % 4}/f{i}.txt", f"two {i}\n")
    write(workspace, "new/n.txt", "new\n")
    second = store.capture()
    shared = list((store.path / "git").glob("sharedindex.*"))
    assert shared  # the store's index is split

    _killed_after_its_journal(store, first.commit, monkeypatch)
    assert journal_pending(store.path / "journal.json")
    for path in (store.path / "git").glob("sharedindex.*"):
        path.unlink()  # what a kill inside git's index write leaves
    reopened = ShadowStore.open(workspace, home=home)
    assert reopened.recovered is not None and "completed" in reopened.recovered
    assert reopened.capture().tree == first.tree
    reopened.restore(second.commit)
    assert reopened.capture().tree == second.tree
    assert reopened.fsck() == "" or "error" not in reopened.fsck().lower()
    reopened.close()


@pytest.mark.usefixtures("watch_mode")
def test_a_restore_failing_after_its_safety_snapshot_records_it_as_the_last_snapshot(
    workspace: Path, home: Path, write, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The safety snapshot's record in the state file waits for the restore's own (one write);
    a restore that fails in between still writes it: the state names the workspace's snapshot,
    as if nothing was deferred."""
    from treesearch.errors import RestoreError
    from treesearch.store._restore import Restorer

    write(workspace, "a.txt", "one\n")
    store = ShadowStore.open(workspace, home=home)
    first = store.capture()
    write(workspace, "a.txt", "two\n")

    def no_journal(self: Restorer, *args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Restorer, "_write_journal", no_journal)
    with pytest.raises(RestoreError, match="failed before anything was changed"):
        store.restore(first.commit)
    monkeypatch.undo()
    assert (workspace / "a.txt").read_text() == "two\n"
    state = json.loads((store.path / "state.json").read_text())
    safety = store.resolve(state["last"])
    assert safety.kind == "safety" and safety.tree != first.tree
    store.close()
    again = ShadowStore.open(workspace, home=home)
    assert again.resolve("last").commit == safety.commit
    assert again.capture().commit == safety.commit  # nothing changed since: no new snapshot
    again.close()


@pytest.mark.usefixtures("watch_mode")
def test_a_small_restore_writes_the_state_file_once_and_no_loose_commit(
    workspace: Path, home: Path, write, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The safety snapshot's commit joins the pack of its scan's objects (no loose object and
    fan-out folder of its own), and its record in the state file is the restore's own."""
    from treesearch.store import _fs

    write(workspace, "a.txt", "one\n")
    write(workspace, "d/b.txt", "one\n")
    store = ShadowStore.open(workspace, home=home)
    first = store.capture()
    write(workspace, "a.txt", "two\n")  # an edit no capture saw: the safety snapshot holds it
    store.capture()
    write(workspace, "d/b.txt", "three\n")
    written: list[str] = []
    real = _fs.atomic_write

    def atomic_write(path: str | os.PathLike[str], *args: Any, **kw: Any) -> None:
        written.append(os.path.basename(path))
        real(path, *args, **kw)

    monkeypatch.setattr(_fs, "atomic_write", atomic_write)
    for module in ("_catalogue", "_trees", "_objects"):
        monkeypatch.setattr(f"treesearch.store.{module}.atomic_write", atomic_write)
    pack_dir = store.git_dir / "objects" / "pack"
    packs_before = set(pack_dir.glob("*.pack"))
    res = store.restore(first.commit)
    monkeypatch.undo()
    assert written.count("state.json") == 1, written
    assert len(set(pack_dir.glob("*.pack")) - packs_before) == 1
    assert [w for w in written if w.endswith(".idx")] != [], written  # renamed into place
    assert not any(len(w) == 38 for w in written), written  # no loose object
    assert store.resolve(res.safety.commit).kind == "safety"
    store.undo()
    assert (workspace / "a.txt").read_text() == "two\n"
    assert (workspace / "d/b.txt").read_text() == "three\n"
    store.close()


# ---------------------------------------------------------------------------- gc


def _history(store: ShadowStore, workspace: Path, write) -> dict[str, Any]:
    """A labelled capture, then three unlabelled ones, then four restores of edited states (each
    leaves a safety snapshot)."""
    write(workspace, "f.txt", "release\n")
    out: dict[str, Any] = {"labelled": store.capture(label="release")}
    out["captures"] = []
    for i in range(3):
        write(workspace, "f.txt", f"capture {i}\n")
        out["captures"].append(store.capture())
    out["safety"] = []
    for i in range(4):
        write(workspace, "f.txt", f"edited {i}\n")
        out["safety"].append(store.restore(out["captures"][min(i, 2)].commit).safety)
    assert all(s.kind == "safety" for s in out["safety"])
    return out


def test_gc_keep_last_counts_captures_not_safety_snapshots_and_keeps_labelled_ones(
    workspace: Path, home: Path, write
) -> None:
    """Regression: `gc --keep-last N` counted safety snapshots and dropped the newest labelled
    capture."""
    store = ShadowStore.open(workspace, home=home)
    h = _history(store, workspace, write)
    result = store.gc(keep_last=2)
    remaining = {s.commit for s in store.log()}
    assert h["labelled"].commit in remaining
    assert h["captures"][2].commit in remaining and h["captures"][1].commit in remaining
    assert set(result.dropped) == {h["captures"][0].commit}
    assert {s.commit for s in h["safety"]} <= remaining
    store.fsck()


def test_gc_drops_labelled_snapshots_only_by_name_or_by_the_labelled_option(
    workspace: Path, home: Path, write
) -> None:
    store = ShadowStore.open(workspace, home=home)
    h = _history(store, workspace, write)
    assert h["labelled"].commit not in store.gc(max_age=0).dropped
    by_name = store.gc(drop=["release"], dry_run=True)
    assert by_name.dropped == (h["labelled"].commit,)
    assert by_name.snapshots[0].label == "release"
    with pytest.raises(GcError, match="refusing to drop .*undo"):
        store.gc(drop=[h["safety"][-1].commit])
    store.gc(keep_last=1, labelled=True)
    assert h["labelled"].commit not in {s.commit for s in store.log()}


def test_gc_safety_snapshots_have_their_own_retention_and_the_last_restores_stay_undoable(
    workspace: Path, home: Path, write
) -> None:
    store = ShadowStore.open(workspace, home=home)
    h = _history(store, workspace, write)
    assert not set(store.gc(keep_last=0, max_age=0).dropped) & {s.commit for s in h["safety"]}
    result = store.gc(safety_max_age=0, keep_safety=2)
    assert set(result.dropped) == {h["safety"][0].commit, h["safety"][1].commit}
    store.undo()
    assert (workspace / "f.txt").read_text() == "edited 3\n"


def test_gc_max_age_leaves_alone_snapshots_a_search_dated_by_its_fixed_dates(
    workspace: Path, home: Path, write
) -> None:
    """Regression: a search dates its snapshots from 2000-01-01 in a new store (same seed, same
    commit ids), so `gc --max-age 1d` took every node but the pinned best one for old."""
    store = ShadowStore.open(workspace, home=home, fixed_dates=True)
    nodes = []
    for n in range(3):
        write(workspace, "f.txt", f"node {n}\n")
        nodes.append(store.capture())
    store.close()
    reopened = ShadowStore.open(workspace, home=home)  # read back from the log
    assert not reopened.gc(max_age=86400, safety_max_age=86400, dry_run=True).snapshots
    assert all(not s.clock_dated for s in reopened.log() if s.commit in {n.commit for n in nodes})
    write(workspace, "f.txt", "a capture of the user's\n")
    mine = reopened.capture()
    assert mine.clock_dated  # the user's own captures keep real dates and ages


def test_cli_gc_dry_run_lists_each_snapshot_it_would_drop(
    workspace: Path, home: Path, write
) -> None:
    store = ShadowStore.open(workspace, home=home)
    h = _history(store, workspace, write)
    store.close()
    before = snap(workspace, home, "log").stdout
    dry = snap(workspace, home, "gc", "--keep-last", "1", "--drop", "release", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    day = h["labelled"].created_iso[:10]
    assert any(
        line.startswith(f"would drop {h['labelled'].commit[:12]}")
        and "capture [release]" in line
        and day in line
        for line in lines
    ), dry.stdout
    assert any(line.startswith(f"would drop {h['captures'][0].commit[:12]}") for line in lines)
    assert lines[-1].startswith("would drop 3 snapshots")
    assert snap(workspace, home, "log").stdout == before


@pytest.fixture
def small_fs(tmp_path: Path) -> Any:
    """A real 2 MB tmpfs (root only): free space can be set to the page."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "fs"
    mnt.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0755", "tmpfs", str(mnt)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _big_and_small(fs: Path) -> tuple[Path, Path, dict[str, Any], dict[str, Any]]:
    """A workspace on ``fs`` with snapshots "big" (ten 3-page files) and "small" (the same ten
    files of a line each, at which it is left), 60 unchanged files beside them."""
    ws, home = fs / "ws", fs / "home"
    ws.mkdir()
    home.mkdir()
    for i in range(10):
        (ws / f"f{i}.txt").write_bytes(bytes([65 + i]) * (3 * 4096))
    for i in range(60):
        (ws / "same" / f"{i:02}").parent.mkdir(exist_ok=True)
        (ws / "same" / f"{i:02}").write_text(f"{i}\n")
    assert snap(ws, home, "capture", "-l", "big").returncode == 0
    big = tree_digest(ws)
    for i in range(10):
        (ws / f"f{i}.txt").write_text(f"small {i}\n")
    assert snap(ws, home, "capture", "-l", "small").returncode == 0
    small = tree_digest(ws)
    return ws, home, big, small


def _fill_to(fs: Path, free_pages: int) -> Path:
    filler = fs / "filler"
    st = os.statvfs(fs)
    size = st.f_bavail * st.f_frsize - free_pages * st.f_frsize
    with open(filler, "wb") as fh:
        fh.truncate(0)
        chunk = b"\0" * (1 << 16)
        while size > 0:
            size -= fh.write(chunk[: min(size, len(chunk))])
    return filler


def _put(ws: Path, files: dict[str, bytes | str]) -> None:
    """Make ``ws`` hold exactly ``files`` (a ``str`` value: a symlink to it)."""
    # (Never following a link: the target of a long one is a name too long for the system,
    # and ``Path.rglob``'s ``is_dir`` raises on it before Python 3.12.)
    for p in list(ws.iterdir()):
        if p.is_symlink() or not stat.S_ISDIR(p.lstat().st_mode):
            p.unlink()
        else:
            shutil.rmtree(p)
    for rel, data in files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            os.symlink(data, ws / rel)
        else:
            (ws / rel).write_bytes(data)


def _links_and_sizes(fs: Path) -> tuple[Path, Path, dict[str, Any], dict[str, Any]]:
    """A workspace on ``fs`` with snapshots "big" and "small" (at which it is left) that differ
    in every way a rollback has to undo: files that grow, one that shrinks, new and deleted
    ones in new and deleted folders, long symlinks (a page each on a tmpfs) that become files
    and files that become them; ``h`` and ``g/g`` are linked from outside the workspace
    (``_link_outside``) and the restore writes over the one and deletes the other."""
    page = 4096
    same: dict[str, bytes | str] = {f"same/{i:02}": f"{i}\n".encode() for i in range(20)}
    small: dict[str, bytes | str] = {
        "A.lnk": "x" * 300,
        "C": b"c" * page,
        "g/g": b"g" * (2 * page),
        "h": b"h" * (4 * page),
        "old/o": b"o" * (2 * page),
        "s": b"s" * (4 * page),
        "z.lnk": b"z" * page,
        **{f"f{i}": f"small {i}\n".encode() for i in range(4)},
        **same,
    }
    big: dict[str, bytes | str] = {
        "A.lnk": b"a" * page,
        "C": b"C" * (5 * page),
        "D": b"D" * (10 * page),
        "h": b"H" * (4 * page),
        "new/n": b"n" * (3 * page),
        "s": b"S\n",
        "z.lnk": "y" * 300,
        **{f"f{i}": bytes([65 + i]) * (3 * page) for i in range(4)},
        **same,
    }
    ws, home = fs / "ws", fs / "home"
    ws.mkdir()
    home.mkdir()
    _put(ws, big)
    assert snap(ws, home, "capture", "-l", "big").returncode == 0
    big_digest = tree_digest(ws)
    _put(ws, small)
    assert snap(ws, home, "capture", "-l", "small").returncode == 0
    return ws, home, big_digest, tree_digest(ws)


_LINKED = ("h", "g/g")


def _link_outside(ws: Path) -> dict[str, tuple[int, bytes]]:
    """Link ``_LINKED`` from outside ``ws`` (again: a restore that wrote them broke the link);
    returns each one's inode and content."""
    out = {}
    for i, rel in enumerate(_LINKED):
        outside = ws.parent / f"outside-{i}"
        outside.unlink(missing_ok=True)
        os.link(ws / rel, outside)
        out[rel] = (outside.stat().st_ino, outside.read_bytes())
    return out


@pytest.mark.slow
@pytest.mark.parametrize("files", ["ten growing files", "links and sizes"])
def test_restore_on_a_full_disk_completes_or_rolls_back_and_says_which_at_every_free_space(
    small_fs: Path, files: str
) -> None:
    """Regression: a restore that ran out of disk after writing every file said "restore
    failed" and left a journal; a rollback could need room that the files it put back needed
    ("rolling back failed too": it rewrote files the restore never reached, a copy of a
    hard-linked one taking its size again; a long symlink took a page, in path order, before a
    file that shrank freed one). At every level of free space, page by page over the whole
    range where the restore runs out, a restore completes or rolls back (or changes nothing)
    and says which; the workspace is where it says, every file byte-exact, a hard-linked file
    rolled back the very file it was; and with room again the store is sound, and undo and
    restore work."""
    build = _big_and_small if files == "ten growing files" else _links_and_sizes
    ws, home, big, small = build(small_fs)
    linked = files == "links and sizes"
    store_dir = next(home.iterdir())
    seen: dict[str, int] = {}
    completed_in_a_row = 0
    for free in range(0, 200):
        if completed_in_a_row == 2:
            break
        before = _link_outside(ws) if linked else {}
        filler = _fill_to(small_fs, free)
        r = snap(ws, home, "restore", "big")
        journal = journal_pending(store_dir / "journal.json")
        if r.returncode == 0:
            kind = "completed with a warning" if "warning" in r.stderr else "completed"
            assert tree_digest(ws) == big and not journal, (free, r.stderr)
        elif "completed: the workspace is at it" in r.stderr:
            kind = "completed, not recorded"
            assert tree_digest(ws) == big, (free, r.stderr)
        elif "the workspace was rolled back to how it was" in r.stderr:
            kind = "rolled back"
            assert tree_digest(ws) == small and not journal, (free, r.stderr)
        elif "failed before anything was changed" in r.stderr:
            kind = "unchanged"
            assert tree_digest(ws) == small and not journal, (free, r.stderr)
        else:
            raise AssertionError(f"{free} free pages: unexplained outcome: {r.stderr}")
        assert r.returncode == 0 or r.stderr.count("\n") == 1, r.stderr
        for i, rel in enumerate(_LINKED if linked else ()):
            ino, content = before[rel]
            assert (small_fs / f"outside-{i}").read_bytes() == content, (free, rel)
            if kind in ("rolled back", "unchanged"):
                assert (ws / rel).stat().st_ino == ino, (free, kind, rel)
        seen[kind] = seen.get(kind, 0) + 1
        completed_in_a_row = completed_in_a_row + 1 if kind.startswith("completed") else 0
        filler.unlink()
        # With room again (an interrupted restore recovered on open): sound, undo and restore.
        with ShadowStore.open(ws, home=home) as store:
            store.fsck()
            if kind.startswith("completed"):
                store.undo()
            else:
                store.restore("big")
                assert tree_digest(ws) == big, free
                store.undo()
            assert tree_digest(ws) == small and not journal_pending(store_dir / "journal.json")
    assert completed_in_a_row == 2, seen
    # Some level ran out of room after every file was written, and the restore said it completed.
    assert seen.get("completed with a warning", 0) + seen.get("completed, not recorded", 0), seen
    assert seen.get("rolled back", 0) > 5 and seen.get("unchanged", 0), seen


@pytest.mark.slow
def test_restore_out_of_disk_rolls_back_at_the_lowest_free_space_without_filling_it_again(
    small_fs: Path,
) -> None:
    """Regression: a rollback after a restore ran out of disk scanned the workspace first, which
    wrote the store's index and hashed files, taking the pages the failed restore had freed: at
    0-5 free pages "rolling back failed too" (about one attempt in six). It must roll back (or
    complete) every time."""
    ws, home, big, small = _big_and_small(small_fs)
    for free in [0, 1, 2, 3, 4, 5] * 3:
        filler = _fill_to(small_fs, free)
        r = snap(ws, home, "restore", "big")
        assert "failed too" not in r.stderr, (free, r.stderr)
        assert tree_digest(ws) == (big if r.returncode == 0 else small), (free, r.stderr)
        filler.unlink()
        assert snap(ws, home, "restore", "small").returncode == 0
