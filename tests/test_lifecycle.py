"""A killed search takes its test processes and scratch folders along (issue #11, item 8).

Real processes throughout: a child Python process scores a workspace whose test command leaves a
long-lived grandchild in its process group, the test SIGKILLs that child, and then checks the
grandchild and the scratch folder. TMPDIR points into the test's own folder, so the real temp
folder is never looked at.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from treesearch import lifecycle

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc (Linux)")

# The "test suite": leaves a grandchild (sleep) in the group, records both pids, then waits.
TEST_COMMAND = "sleep 300 & echo $! > grandchild.pid; echo $$ > child.pid; wait"

SEARCH_LIKE = textwrap.dedent(
    """
    import sys
    from treesearch.scoring import TestSpec, run_tests

    spec = TestSpec(command=sys.argv[2], timeout=600)
    run_tests(spec, sys.argv[1])
    """
)


def _alive(pid: int) -> bool:
    """Running and not a zombie."""
    return lifecycle.start_time(pid) is not None


def _eventually(condition: Callable[[], bool], seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[1]) == pid:
                out.append(int(entry))
    return out


@pytest.fixture
def tmpdir_env(tmp_path: Path) -> Path:
    base = tmp_path / "tmp"
    base.mkdir()
    return base


class Spare:
    """Processes to SIGKILL at the end whatever happens, so a failing test leaves nothing
    running; each only while it is still the same process (its start time), never a recycled
    pid of someone else's."""

    def __init__(self) -> None:
        self.owners: list[lifecycle.Owner] = []
        self.children: list[subprocess.Popen[bytes]] = []

    def add(self, *pids: int) -> None:
        self.owners += [lifecycle.process_owner(pid) for pid in pids]

    def add_child(self, proc: subprocess.Popen[bytes]) -> None:
        """A child of this process: killed and waited for (no zombie, no ResourceWarning in a
        later test when a failed assert skipped the test's own wait)."""
        self.children.append(proc)

    def kill_all(self) -> None:
        for proc in self.children:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        for owner in self.owners:
            if owner.start and lifecycle.owner_alive(owner):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(owner.pid, signal.SIGKILL)


@pytest.fixture
def spare() -> Iterator[Spare]:
    s = Spare()
    yield s
    s.kill_all()


def _start_search_like(
    tmp_path: Path, base: Path, spare: Spare
) -> tuple[subprocess.Popen[bytes], int, int]:
    """A child that scores a workspace with TEST_COMMAND; returns it, the sh pid, the sleep pid."""
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {**os.environ, "TMPDIR": str(base)}
    parent = subprocess.Popen(
        [sys.executable, "-c", SEARCH_LIKE, str(ws), TEST_COMMAND],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    spare.add_child(parent)
    assert _eventually(lambda: (ws / "grandchild.pid").is_file() and (ws / "child.pid").is_file())
    assert _eventually(lambda: bool((ws / "grandchild.pid").read_text().strip()))
    assert _eventually(lambda: bool((ws / "child.pid").read_text().strip()))
    grandchild = int((ws / "grandchild.pid").read_text())
    child = int((ws / "child.pid").read_text())
    spare.add(grandchild, child)
    return parent, child, grandchild


def _scratch(base: Path) -> list[Path]:
    root = base / f"treesearch-{os.getuid()}"
    return sorted(p for p in root.iterdir() if p.name.startswith("score-")) if root.is_dir() else []


def test_sigkill_of_a_scoring_process_kills_its_test_grandchild_at_once(
    tmp_path: Path, tmpdir_env: Path, spare: Spare
) -> None:
    """Regression (#11.8): the sandbox starts tests in their own session, so a SIGKILL of the
    search left them running (12 of 20 kills left pytest processes)."""
    parent, child, grandchild = _start_search_like(tmp_path, tmpdir_env, spare)
    assert _alive(child) and _alive(grandchild)
    assert len(_scratch(tmpdir_env)) == 1  # the scoring's scratch folder, named after its owner
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert _eventually(lambda: not _alive(child)), "the test command outlived the search"
    assert _eventually(lambda: not _alive(grandchild)), "the test's grandchild outlived the search"
    # The next run's reaper removes the dead process's scratch folder, and the watchdog has
    # already removed the registry of its groups.
    report = lifecycle.reap(tmpdir_env)
    assert _scratch(tmpdir_env) == []
    assert [Path(f).name.startswith("score-") for f in report.folders] == [True]
    procs = tmpdir_env / f"treesearch-{os.getuid()}" / "procs"
    assert _eventually(lambda: list(procs.iterdir()) == [])


def test_reap_kills_the_groups_of_a_killed_search_whose_watchdog_died_too(
    tmp_path: Path, tmpdir_env: Path, spare: Spare
) -> None:
    """The last line of defence: a `kill -9` of the search *and* its watchdog leaves the
    grandchild; the next run's reaper finds the group in the dead search's registry file."""
    parent, child, grandchild = _start_search_like(tmp_path, tmpdir_env, spare)
    watchdogs = [p for p in _children(parent.pid) if p != child]
    assert len(watchdogs) == 1
    spare.add(*watchdogs)
    os.kill(watchdogs[0], signal.SIGKILL)
    assert _eventually(lambda: not _alive(watchdogs[0]))
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    # The parent-death signal ended the direct child; the grandchild escaped it.
    assert _eventually(lambda: not _alive(child))
    assert _alive(grandchild)
    listed = lifecycle.reap(tmpdir_env, dry_run=True)
    assert _alive(grandchild) and len(_scratch(tmpdir_env)) == 1  # a dry run touches nothing
    assert [g["pgid"] for g in listed.groups] == [child]
    assert grandchild in listed.groups[0]["pids"]  # type: ignore[operator]
    report = lifecycle.reap(tmpdir_env)
    assert [g["pgid"] for g in report.groups] == [child]
    assert _eventually(lambda: not _alive(grandchild))
    assert _scratch(tmpdir_env) == []
    assert list((tmpdir_env / f"treesearch-{os.getuid()}" / "procs").iterdir()) == []


def test_reap_leaves_live_processes_and_their_scratch_folders_alone(
    tmpdir_env: Path, spare: Spare
) -> None:
    root = lifecycle.temp_root(tmpdir_env)
    me = lifecycle.process_owner()
    mine = root / f"score-{me.token}-abcd"
    mine.mkdir()
    # A live process in its own session, recorded as the group of this (live) process.
    sleeper = subprocess.Popen(["sleep", "300"], start_new_session=True)
    spare.add_child(sleeper)
    start = lifecycle.start_time(sleeper.pid)
    (root / "procs").mkdir()
    (root / "procs" / f"{me.token}.json").write_text(json.dumps({"groups": [[sleeper.pid, start]]}))
    report = lifecycle.reap(tmpdir_env)
    assert not report
    assert mine.is_dir() and _alive(sleeper.pid)
    sleeper.kill()
    sleeper.wait()


def test_reap_never_kills_a_group_whose_leader_pid_was_recycled(
    tmpdir_env: Path, spare: Spare
) -> None:
    """A record of a dead search names a pgid that is now another process's (its start time
    differs): the reaper drops the record and leaves that process alone."""
    root = lifecycle.temp_root(tmpdir_env)
    stranger = subprocess.Popen(["sleep", "300"], start_new_session=True)
    spare.add_child(stranger)
    real_start = lifecycle.start_time(stranger.pid)
    assert real_start is not None
    dead = lifecycle.Owner(
        pid=stranger.pid, start=real_start + 1, boot=lifecycle.process_owner().boot
    )
    (root / "procs").mkdir()
    record = root / "procs" / f"{dead.token}.json"
    record.write_text(json.dumps({"groups": [[stranger.pid, real_start - 1]]}))
    torn = root / "procs" / f".{dead.token}.json.{dead.pid}.tmp"  # a write cut short
    torn.write_text('{"groups": [[')
    old = root / f"fl-{dead.token}-wxyz"
    (old / "sub").mkdir(parents=True)
    (old / "sub").chmod(0o500)  # a read-only folder inside does not stop the removal
    report = lifecycle.reap(tmpdir_env)
    assert report.groups == []
    assert _alive(stranger.pid)
    assert not record.exists() and not old.exists() and not torn.exists()
    assert report.folders == [str(old)]
    stranger.kill()
    stranger.wait()


def test_owner_of_another_boot_is_dead_and_a_zombie_is_dead(tmp_path: Path) -> None:
    me = lifecycle.process_owner()
    assert lifecycle.owner_alive(me)
    other_boot = "e" * 8 if me.boot != "e" * 8 else "f" * 8
    assert not lifecycle.owner_alive(lifecycle.Owner(me.pid, me.start, other_boot))
    # A record made in another pid namespace (a container sharing TMPDIR) is never acted on.
    assert lifecycle.owner_alive(lifecycle.Owner(me.pid, me.start + 1, me.boot, "1"))
    proc = subprocess.Popen(["sleep", "30"])
    owner = lifecycle.process_owner(proc.pid)
    assert owner.start and lifecycle.owner_alive(owner)
    proc.kill()
    assert _eventually(lambda: lifecycle.start_time(proc.pid) is None)  # a zombie now
    assert os.path.exists(f"/proc/{proc.pid}")
    assert not lifecycle.owner_alive(owner)
    assert not lifecycle.owner_alive(lifecycle.Owner(proc.pid, 0, owner.boot))
    proc.wait()


def test_scratch_dir_is_named_after_its_owner_and_removed_on_exit(tmpdir_env: Path) -> None:
    with lifecycle.scratch_dir("score", tmpdir_env) as folder:
        assert folder.parent == lifecycle.temp_root(tmpdir_env)
        assert folder.name.startswith(f"score-{lifecycle.process_owner().token}-")
        (folder / "junit.xml").write_text("<x/>")
    assert not folder.exists()


def test_temp_root_refuses_a_folder_of_another_kind(tmpdir_env: Path) -> None:
    (tmpdir_env / f"treesearch-{os.getuid()}").symlink_to(tmpdir_env)
    with pytest.raises(PermissionError, match="not a folder owned by this user"):
        lifecycle.temp_root(tmpdir_env)


def test_sigkill_before_the_parent_recorded_the_group_still_kills_the_grandchild(
    tmp_path: Path, tmpdir_env: Path, spare: Spare
) -> None:
    """Regression: the parent records a group only after the child has started, so a SIGKILL in
    between (seen under load) left the test's grandchild running. The child announces itself to
    the watchdog before exec; here the registry file is removed to stand for that window."""
    parent, child, grandchild = _start_search_like(tmp_path, tmpdir_env, spare)
    procs = tmpdir_env / f"treesearch-{os.getuid()}" / "procs"
    # The parent records the group once its child has started: the grandchild may have written
    # its pid first (seen in CI under load), so wait for the record.
    assert _eventually(lambda: bool(list(procs.glob("*.json")))), "the search recorded no group"
    records = list(procs.glob("*.json"))
    for record in records:
        record.unlink()
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert _eventually(lambda: not _alive(grandchild)), "the test's grandchild outlived the search"


def test_the_group_registry_is_rewritten_in_place_and_made_again_if_removed(
    tmpdir_env: Path, monkeypatch: pytest.MonkeyPatch, spare: Spare
) -> None:
    """The record of a process's live groups is one file rewritten in place (no temporary
    file, no rename: two updates per test run); a shorter record is padded, never cut, and a
    record removed meanwhile is made again at the next update."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmpdir_env))
    registry = lifecycle._Registry()
    sleepers = [subprocess.Popen(["sleep", "60"], start_new_session=True) for _ in range(2)]
    for p in sleepers:
        spare.add_child(p)
    a, b = (p.pid for p in sleepers)
    try:
        registry.add(a)
        registry.add(b)
        assert registry.file is not None
        record = registry.file
        inode = os.stat(record).st_ino
        assert sorted(g for g, _ in json.loads(record.read_text())["groups"]) == sorted([a, b])
        registry.remove(b)
        assert os.stat(record).st_ino == inode  # the same file, written over
        assert [g for g, _ in json.loads(record.read_text())["groups"]] == [a]
        assert [p.name for p in record.parent.iterdir()] == [record.name]  # no temp files
        record.unlink()
        registry.remove(a)
        assert json.loads(record.read_text())["groups"] == []
        registry.add(b)
        assert [g for g, _ in json.loads(record.read_text())["groups"]] == [b]
    finally:
        assert registry.watch_fd is not None
        os.close(registry.watch_fd)  # as if the process ended: the watchdog does its work
        if registry.record_fd is not None:
            os.close(registry.record_fd)
    # The watchdog kills the groups the record lists (b), leaves the others, removes the file.
    assert _eventually(lambda: sleepers[1].poll() is not None)
    assert _eventually(lambda: not record.exists())
    assert sleepers[0].poll() is None
