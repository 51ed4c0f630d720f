"""Copies of a warm server (``WarmRunner.clone`` / ``adopt``): a parallel search's workers run
their tests on copies of the search's own server, forked by it, instead of each starting one.

Real servers, real copies (processes forked by the server), real pytest; every result is
compared with a real cold run of the same folder."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from test_scoring_warm import alive, project, spec, view

from treesearch.scoring import run_tests
from treesearch.scoring.runner import warm_clone
from treesearch.scoring.warm import WarmRunner

FAILING = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "test_calc.py": "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n\n"
    "def test_zero():\n    assert add(0, 0) == 0\n",
}
FIXED = {**FAILING, "calc.py": "def add(a, b):\n    return a + b\n"}


def _gone(pid: int, seconds: float = 10.0) -> bool:
    """No such process at all: it ended and was reaped (a zombie still has a /proc entry)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not os.path.exists(f"/proc/{pid}"):
            return True
        time.sleep(0.02)
    return not os.path.exists(f"/proc/{pid}")


def test_a_copy_runs_another_folder_with_the_cold_result_and_starts_no_server(
    tmp_path: Path,
) -> None:
    """A runner takes a copy of another runner's server and runs its own folder on it: each
    result is a cold run's, and the second runner starts no server of its own (the folders
    differ, as a parallel search's workers' do: the shell's ``PWD`` is not part of the key)."""
    s = spec(command=f"{sys.executable} -m pytest -q")  # a shell line: the folder's PWD is set
    ws1 = project(tmp_path / "one", FAILING)
    ws2 = project(tmp_path / "two", FIXED)
    with WarmRunner("on") as original, WarmRunner("on") as other:
        first = run_tests(s, ws1, warm=original)
        assert original.warm_runs == 1 and original.servers_started == 1
        copy = warm_clone(s, ws1, original)
        assert copy is not None and original.copies == 1
        server_pid = next(iter(original._servers.values())).proc.pid
        assert copy.pid != server_pid and alive(copy.pid)
        other.adopt(copy.key, copy.sock, copy.pid)
        second = run_tests(s, ws2, warm=other)
        assert other.warm_runs == 1 and other.servers_started == 0 and not other.notes
        assert [srv.proc.pid for srv in other._servers.values()] == [copy.pid]
        assert view(second) == view(run_tests(s, ws2))  # the fixed folder: all pass
        assert view(first) == view(run_tests(s, ws1))
        assert second.totals.get("passed") == 2 and first.totals.get("failed") == 1
        # The original goes on serving its own runs.
        assert view(run_tests(s, ws1, warm=original)) == view(first)
        assert original.servers_started == 1 and original.warm_runs == 2


def test_a_copy_outlives_its_original_and_ends_with_its_client(tmp_path: Path) -> None:
    s = spec()
    ws = project(tmp_path / "ws", FAILING)
    original = WarmRunner("on")
    other = WarmRunner("on")
    try:
        run_tests(s, ws, warm=original)
        copy = warm_clone(s, ws, original)
        assert copy is not None
        other.adopt(copy.key, copy.sock, copy.pid)
        original.close()  # the search's runner ends first: its copy is in a session of its own
        run = run_tests(s, ws, warm=other)
        assert other.warm_runs == 1 and other.servers_started == 0
        assert view(run) == view(run_tests(s, ws))
        other.close()
        assert not alive(copy.pid)
    finally:
        original.close()
        other.close()


def _cpu_of(pid: int) -> float:
    """CPU seconds of ``pid`` and of the children it has waited for (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def test_the_server_reaps_its_copies_so_their_time_counts_in_its_own(tmp_path: Path) -> None:
    """A copy is the server's child, not its client's: the server waits for its copies at its
    end, so the CPU time of a copy and its runs counts in the server's children, and so in its
    client's (a benchmark's CPU figure includes it), and no zombie is left."""
    s = spec()
    ws = project(tmp_path / "ws", FAILING)
    burn = project(
        tmp_path / "burn",
        {
            "test_burn.py": "import time\n\ndef test_burn():\n    t = time.process_time()\n"
            "    while time.process_time() - t < 0.5:\n        pass\n"
        },
    )
    with WarmRunner("on") as original:
        run_tests(s, ws, warm=original)
        copy = warm_clone(s, ws, original)
        assert copy is not None
        with WarmRunner("on") as other:
            other.adopt(copy.key, copy.sock, copy.pid)
            run_tests(s, burn, warm=other)  # half a CPU second in the copy's child
        assert not alive(copy.pid)  # ended with its client (a zombie until the server reaps)
        server = next(iter(original._servers.values())).proc
        before = _cpu_of(server.pid)  # the server's own, and its waited-for children's
        kids0 = os.times()
        original.close()
    assert _gone(copy.pid)
    kids = os.times()
    grew = kids.children_user + kids.children_system - kids0.children_user - kids0.children_system
    assert grew - before >= 0.4  # the copy's run came up with the server


def test_no_copy_is_made_without_a_running_server_or_with_warm_runs_off(tmp_path: Path) -> None:
    s = spec()
    ws = project(tmp_path / "ws", FAILING)
    with WarmRunner("on") as fresh, WarmRunner("off") as off:
        assert warm_clone(s, ws, fresh) is None  # nothing started yet: nothing to copy
        assert warm_clone(s, ws, off) is None
        run_tests(s, ws, warm=off)
        assert warm_clone(s, ws, off) is None and off.servers_started == 0
