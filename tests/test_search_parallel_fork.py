"""Workers forked from the controller (``search._forked``): real forks, real stores, real pytest.

A forked worker must own nothing of the controller's: not its store's lock nor the workspace
hold (``flock``s live on the open file), not its watcher, not its exit handlers; and a search
with forked workers must build the graph a search with fresh-interpreter workers builds.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import threading
import time
import weakref
from pathlib import Path

import pytest
from test_search import config, make_project, run

from treesearch.config import DEFAULT_EXCLUDES, validate
from treesearch.search import parallel
from treesearch.search._forked import PROCESS_NAME, can_fork
from treesearch.search.graph import to_json
from treesearch.search.parallel import WorkerPool, WorkerSpec
from treesearch.store import ShadowStore
from treesearch.store.workers import worker_view

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork: Linux only")


def pool_of(tmp_path: Path, *, fork: bool | None) -> tuple[WorkerPool, ShadowStore]:
    proj = make_project(tmp_path)
    store = ShadowStore.open(proj, home=tmp_path / "home", excludes=DEFAULT_EXCLUDES)
    loaded = validate(config(tmp_path, proj), source="cfg.yaml", base_dir=tmp_path)
    spec = WorkerSpec(view=worker_view(store), scoring=loaded.config.scoring)
    return WorkerPool(1, spec, store, fork=fork), store


def started(pid: int) -> str:
    """The worker's name once it let go of the controller's state (``_forked._detach`` names
    it last), or its command line when it is a fresh interpreter."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        if comm == PROCESS_NAME:
            return comm
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        if b"worker_entry" in cmdline:
            return cmdline.decode(errors="replace")
        time.sleep(0.01)
    raise AssertionError(f"worker {pid} did not start")


def open_files(pid: int) -> list[str]:
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
    return out


def test_forked_worker_keeps_none_of_the_controllers_locks_watcher_or_files(
    tmp_path: Path,
) -> None:
    """Forked while the controller holds the workspace and has its store's lock file, its
    watcher and a log open: the worker has none of them open (a copy of the hold's descriptor
    would keep the workspace held after the controller is gone)."""
    pool, store = pool_of(tmp_path, fork=True)
    hold = store.hold("test")
    store.capture()  # opens the store's lock file (and the watcher, where there is one)
    log = (tmp_path / "events.jsonl").open("a")
    mine = open_files(os.getpid())
    try:
        pool.start()
        pid = pool._workers[0].proc.pid
        assert started(pid) == PROCESS_NAME
        theirs = open_files(pid)
    finally:
        pool.close()
        log.close()
        hold.release()
        store.close()
    controllers = {str(store.path / "lock"), str(tmp_path / "events.jsonl")}
    assert controllers <= set(mine)  # what the worker must not have
    assert any(p.endswith("hold.lock") for p in mine)
    assert not [p for p in theirs if p in controllers or p.endswith("hold.lock")]
    assert not [p for p in theirs if "inotify" in p]
    assert not [p for p in theirs if str(tmp_path) in p]


def test_forked_worker_runs_none_of_the_controllers_exit_handlers(tmp_path: Path) -> None:
    """A worker's end runs the exit handlers registered in it, never the controller's: an
    ``atexit`` handler or a ``weakref.finalize`` of the controller (a temporary folder of the
    caller, a server) would otherwise run once more in every worker."""
    marker = tmp_path / "controller-atexit-ran"
    folder = tmp_path / "controller-temp"
    folder.mkdir()

    class Owner:
        pass

    owner = Owner()
    fin = weakref.finalize(owner, shutil.rmtree, str(folder))
    atexit.register(marker.touch)
    try:
        pool, store = pool_of(tmp_path / "p", fork=True)
        pool.start()
        assert started(pool._workers[0].proc.pid) == PROCESS_NAME
        pool.close()  # the idle worker is told to end: it ends through its exit handlers
        assert pool._workers == []
        store.close()
        assert not marker.exists()
        assert folder.is_dir()
    finally:
        atexit.unregister(marker.touch)
        fin.detach()


def test_workers_start_as_fresh_interpreters_while_another_thread_runs(tmp_path: Path) -> None:
    """A fork while another thread runs could leave a lock that thread held locked forever in
    the child: the pool then starts fresh interpreters."""
    before = can_fork()  # (threads other tests of this process left running count too)
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not can_fork()
        pool, store = pool_of(tmp_path, fork=None)
        pool.start()
        assert "worker_entry" in started(pool._workers[0].proc.pid)
        pool.close()
        store.close()
    finally:
        stop.set()
        thread.join()
    # A joined thread leaves /proc/self/task a moment after ``join`` returns (its Python part
    # ends first): wait for that, a few seconds at most.
    deadline = time.monotonic() + 5
    while can_fork() is not before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert can_fork() is before


def test_forked_and_fresh_interpreter_workers_build_the_same_graph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same seed, same number of workers: the graph (and the nodes' commits) do not depend on
    how the workers were started."""
    outs = []
    for fork in (True, False):
        monkeypatch.setattr(parallel, "FORK", fork)
        base = tmp_path / f"fork-{fork}"
        proj = make_project(base)
        cfg = config(base, proj, policy="mcts", params={"c": 1.0}, stop_on_perfect=False)
        cfg["search"]["workers"] = 2
        cfg["search"]["budget"] = {"expansions": 6}
        outs.append(run(cfg, base))
    assert [o.usage.expansions for o in outs] == [6, 6]
    assert to_json(outs[0].graph, stable=True) == to_json(outs[1].graph, stable=True)
    assert outs[0].best == outs[1].best


def test_forked_process_wait_gives_the_exit_code_the_signal_or_a_timeout() -> None:
    """``ForkedProcess`` is handled as a ``Popen``: ``wait(timeout)`` raises
    ``subprocess.TimeoutExpired`` while the child runs, then gives its exit code (negative: the
    signal that ended it); ``poll`` is ``None`` until then."""
    import signal
    import subprocess

    from treesearch.search._forked import fork

    read, write = os.pipe()
    proc = fork(lambda: (os.read(read, 1), sys.exit(3)), keep=read)
    os.close(read)
    assert proc.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(0.05)
    os.write(write, b"x")  # now it may end
    os.close(write)
    assert proc.wait(30) == 3 and proc.poll() == 3
    stuck = fork(lambda: signal.pause(), keep=-1)
    stuck.kill()
    assert stuck.wait(30) == -signal.SIGKILL
