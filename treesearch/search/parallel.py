"""Parallel expansion (``search.workers: N``): worker processes, each in a folder of its own.

The controller chooses expansions ahead (``search.batch``; ``run_window``), sends each ``Task``
to an idle worker and records the ``Outcome``s strictly in the order they were chosen, so the
graph does not depend on which worker finished first. A worker is a real process (on Linux a
fork of the controller made before the root is tested, which lets go of the controller's locks,
descriptors and exit handlers at once: ``_forked``; elsewhere a fresh interpreter) that owns:

* a scratch folder (``lifecycle.scratch_dir("worker")``, outside the user's project; removed when
  the worker ends, or by the next search's ``reap`` when it was killed): its work folder ``ws``
  stands in for the workspace, and its store (``store.workers``) shares the search store's
  objects, so nothing is copied;
* its own scorer (same config, same score cache file: SQLite serialises writers), whose warm
  test runs go to a copy of the search's warm server handed over with its first task;
* the agent of each task, built from the strategy's validated config (``build_agent``).

For a task, the worker restores the node into its folder, runs the agent in a session there
(the session file goes where a sequential search puts it), captures the result, and scores it
unless the state was already a node when the expansion was chosen. The main workspace is never
written by a worker. A worker never outlives the search: it gets SIGKILL when the controller
dies (``lifecycle.die_with_parent``), its test processes go with it (its own watchdog), and a
resume starts new workers in new folders (worker folders are never trusted).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import multiprocessing
import multiprocessing.connection
import multiprocessing.reduction
import os
import pickle
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from treesearch import lifecycle
from treesearch._environ import inherited
from treesearch.agents import (
    AgentContext,
    AgentResult,
    AgentStatus,
    attempts_independent,
    build_agent,
    register_agent,
    resolve_dotted,
    run_agent,
)
from treesearch.errors import ScoringError, SearchError
from treesearch.scoring import ScoreCache, Scorer
from treesearch.scoring.runner import warm_up
from treesearch.scoring.section import ScorerConfig
from treesearch.scoring.warm import WarmClone
from treesearch.search import graph as G
from treesearch.search._forked import ForkedProcess, can_fork
from treesearch.search._forked import fork as fork_process
from treesearch.search.batch import dispatch_event, next_to_send, select_one, share_test_runs
from treesearch.search.policies import Choice
from treesearch.search.work import Outcome, Task
from treesearch.session import TransactionalSession
from treesearch.store.shadow import ShadowStore
from treesearch.store.workers import WorkerView, adopt, open_worker_store
from treesearch.types import Snapshot, TreeHash

__all__ = [
    "FORK",
    "WARM_COPIES",
    "WINDOW",
    "WorkerPool",
    "WorkerSpec",
    "quick_exit",
    "run_window",
]

WINDOW = 2
"""Expansions chosen ahead per worker (``run_window``). Results are recorded in the order
chosen, so an expansion that takes long (a fault localisation, a full test run) holds back the
choice of those after it: on the demo (120 expansions) the two workers stand idle ~1.7 of ~14
worker-seconds waiting for a choice. 4 per worker took that to 0.25 and the demo's ratio to
workers=1 from 1.37x to 1.50x, but chose on staler results: the repair benchmark's refactory
``q1_152`` was no longer fixed within 100 test runs (84 with 2; the other 23 of 24 entries
alike) and the repair searches were no faster. 2 keeps both workers busy when short
expansions (no-ops, cached states) finish behind long ones (benchmarks/README.md)."""

FORK: bool | None = None
"""How a ``WorkerPool`` made without ``fork`` starts its workers: ``None`` forked from this
process where that is safe (``_forked.can_fork``), ``False`` as fresh interpreters, ``True``
forked."""

WARM_COPIES = True
"""Whether a search's workers take copies of its warm test server (``WorkerSpec.warm_copies``)
instead of starting their own (``False``: the benchmarks' baseline)."""

HOLD = True
"""Whether an attempt chosen and not recorded holds its (node, strategy) pair from further
choices when its agent's attempts depend on each other (``batch.pending_view``); ``False``:
the benchmarks' baseline, where such an attempt is chosen and waits (``batch.next_to_send``)."""


@dataclass(frozen=True)
class WorkerSpec:
    """How a worker builds what it needs (picklable: sent once, when the worker starts)."""

    view: WorkerView
    """The search store's objects and ignore inputs (``store.workers.worker_view``)."""
    scoring: ScorerConfig
    """The validated ``scoring`` section (``Scorer.from_config``)."""
    source: str = "<config>"
    """Where the config came from (for error messages)."""
    score_cache: str | None = None
    """The score cache file the search uses (``None``: none)."""
    agent_cache: str | None = None
    """The agents' cache folder (``AgentContext.cache_dir``)."""
    isolation: Any = None
    """How agent commands are confined (``isolation.Isolation``)."""
    agents: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    """Agent kinds the strategies use: (factory, config model) as registered in the controller's
    process (``agents.agent_entry``), registered again in the worker."""
    warm_copies: bool = False
    """The controller offers each worker a copy of the search's warm test server with its first
    task (``WorkerPool.warm_source``): the worker starts no server of its own ahead."""


class WorkerPool:
    """``n`` worker processes (``start``, or at the first task), each with a connection."""

    def __init__(
        self, n: int, spec: WorkerSpec, store: ShadowStore, *, fork: bool | None = None
    ) -> None:
        if n < 1:
            raise ValueError(f"a worker pool needs at least one worker, not {n}")
        self.on_note: Callable[[str], None] | None = None
        """Hears what the workers' warm test runners said."""
        self.warm_source: Callable[[], WarmClone | None] | None = None
        """Makes a copy of the search's warm test server for a worker (``spec.warm_copies``):
        asked once per worker, at its first task."""
        self.n = n
        self.spec = spec
        for kind, entry in spec.agents.items():
            try:
                pickle.dumps(entry)
            except Exception as exc:  # noqa: BLE001 - any pickling failure says the same
                raise SearchError(
                    f"search.workers: {n}: agent kind {kind!r} was registered with a factory a "
                    f"worker process cannot import ({type(exc).__name__}: {exc}); register it "
                    "with a dotted path or a module-level callable, or set search.workers: 1"
                ) from None
        self.store = store
        """The search's store: where the states workers made are recorded (``record``)."""
        self.fork = fork
        """How workers start (``_Worker.start``): ``None`` as ``FORK`` says when they start."""
        self._workers: list[_Worker] = []
        self.warm_runs = 0
        """Test runs the workers made warm (``Outcome.warm_runs``)."""
        self.cold_runs = 0
        """Test runs the workers made cold (``Outcome.cold_runs``)."""
        self.warm_servers = 0
        """Warm servers the workers started (``Outcome.warm_servers``)."""

    @property
    def busy(self) -> int:
        """Workers with a task in hand."""
        return sum(1 for w in self._workers if w.task is not None)

    def start(self) -> None:
        """Start the worker processes (if not running yet); they get ready in the background."""
        if not self._workers:
            fork = FORK if self.fork is None else self.fork
            self._workers = [_Worker.start(self.spec, fork=fork) for _ in range(self.n)]

    def submit(self, task: Task) -> None:
        """Send ``task`` to an idle worker (starting the workers if need be)."""
        self.start()
        worker = next((w for w in self._workers if w.task is None), None)
        if worker is None:
            raise ValueError(f"every one of the {self.n} workers is busy")
        copy: WarmClone | None = None
        try:
            if not worker.offered and self.spec.warm_copies and self.warm_source is not None:
                worker.offered = True
                copy = self.warm_source()
            if copy is not None:
                task = dataclasses.replace(task, warm_copy=(copy.key, copy.pid))
            worker.conn.send(task)
            if copy is not None:
                multiprocessing.reduction.send_handle(
                    worker.conn, copy.sock.fileno(), worker.proc.pid
                )
        except BaseException:
            self.close(kill=True)
            raise
        finally:
            if copy is not None:
                copy.sock.close()  # the worker holds it now: the copy ends with the worker
        worker.task = task

    def next_outcome(self) -> Outcome:
        """Wait for the next outcome of any busy worker.

        A worker that dies is a ``SearchError`` naming its exit code; an interrupt
        (``KeyboardInterrupt``) stops every worker before it propagates."""
        try:
            busy = {w.conn: w for w in self._workers if w.task is not None}
            if not busy:
                raise ValueError("no task in flight")
            conn = multiprocessing.connection.wait(list(busy))[0]
            w = busy[conn]  # type: ignore[index]
            assert w.task is not None
            try:
                out: Outcome = w.conn.recv()
            except (EOFError, OSError):
                code = w.proc.wait()
                raise SearchError(
                    f"search worker {self._workers.index(w)} (pid {w.proc.pid}) died with exit "
                    f"code {code} during expansion {w.task.k}: the run can be resumed "
                    "(`treesearch resume`); or set search.workers: 1"
                ) from None
            w.task = None
            self.warm_runs += out.warm_runs
            self.cold_runs += out.cold_runs
            self.warm_servers += out.warm_servers
            if out.notes and self.on_note is not None:
                for text in out.notes:
                    self.on_note(f"worker {self._workers.index(w)}: {text}")
            return out
        except BaseException:
            self.close(kill=True)
            raise

    def run_window(self, ctl: Any) -> str:
        """Expand with these workers until the search must stop (``run_window``); why it
        stopped."""
        return run_window(ctl, self)

    def record(self, out: Outcome) -> Snapshot:
        """Record the state a worker made as a snapshot of the search's store (its objects are
        there already): what the search's graph and final restore refer to."""
        return adopt(self.store, out.child, modes=out.modes, empty_dirs=out.empty_dirs)

    def close(self, *, kill: bool = False) -> None:
        """Stop the workers: idle ones are told to end; busy ones (their expansion is dropped:
        the search stopped) and, with ``kill``, all get SIGTERM (they remove their folders),
        then SIGKILL when they do not end within seconds."""
        for w in self._workers:
            with contextlib.suppress(OSError, ValueError):
                if kill or w.task is not None:
                    w.proc.terminate()
                else:
                    w.conn.send(None)
        for w in self._workers:
            try:
                w.proc.wait(10)
            except subprocess.TimeoutExpired:
                w.proc.kill()
                w.proc.wait()
            w.conn.close()
        self._workers = []

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(kill=exc[0] is not None)


@dataclass
class _Worker:
    """One worker process and the connection to it (pickled messages over a socket pair)."""

    proc: subprocess.Popen[bytes] | ForkedProcess
    conn: multiprocessing.connection.Connection
    task: Task | None = None
    """The task in hand (``None``: idle)."""
    offered: bool = False
    """A copy of the search's warm server was asked for this worker (``WorkerPool.submit``)."""

    @classmethod
    def start(cls, spec: WorkerSpec, *, fork: bool | None = None) -> _Worker:
        """Start a worker: forked from this process where that is safe (``_forked``: Linux, no
        other thread; it starts without importing anything), else a fresh interpreter with
        this process's import path (not multiprocessing's spawn, which re-imports the caller's
        main script). ``fork``: ``False`` forces the fresh interpreter, ``True`` the fork."""
        mine, theirs = socket.socketpair()
        parent = os.getpid()
        use_fork = can_fork() if fork is None else fork
        proc: subprocess.Popen[bytes] | ForkedProcess
        try:
            if use_fork:
                fd = theirs.fileno()
                proc = fork_process(lambda: _forked_main(fd, parent), keep=fd)
            else:
                code = (
                    "import json, sys; sys.path[:0] = json.loads(sys.argv[3]); "
                    "from treesearch.search.parallel import worker_entry, quick_exit; "
                    "worker_entry(int(sys.argv[1]), int(sys.argv[2])); quick_exit()"
                )
                proc = subprocess.Popen(
                    [sys.executable, "-c", code, str(theirs.fileno()), str(parent)]
                    + [json.dumps(sys.path)],
                    pass_fds=(theirs.fileno(),),
                    stdin=subprocess.DEVNULL,
                    # This process's environment as Python sees it: a library may have set
                    # variables in the C environment only (LINES, COLUMNS), and a worker with
                    # another environment would not share the search's warm server.
                    env=inherited(),
                )
        finally:
            theirs.close()
        conn = multiprocessing.connection.Connection(mine.detach())
        conn.send(spec)
        return cls(proc, conn)


def _forked_main(fd: int, parent: int) -> None:
    worker_entry(fd, parent)
    quick_exit()


# ---------------------------------------------------------------------- the controller's loop


def run_window(ctl: Any, pool: WorkerPool) -> str:
    """Expand with ``pool``'s workers until the search must stop; returns why.

    ``ctl`` is the ``Controller``. Up to ``W = WINDOW * pool.n`` expansions are chosen ahead:
    expansion ``k`` is chosen (``batch.select_one``) right after the result of ``k - W`` was
    recorded, with ``k - W + 1 .. k - 1`` pending, and goes to the first idle worker (after
    any earlier attempt of its node and strategy answered: ``batch.next_to_send``); results
    are recorded strictly in the order of ``k``. A worker that answered takes the next
    expansion already chosen before the controller records anything (without a wall-clock
    budget). Which worker finishes first changes when things happen, never what. Choosing
    ahead keeps every worker busy when a short expansion finishes behind a long one.
    Expansions chosen before a kill (``ctl.pending``, from the ``dispatch`` events) are chosen
    again first, as they were."""
    g = ctl.graph
    budget, usage = ctl.budget, ctl.usage
    strategies = {n: s.samples for n, s in ctl.strategies.items()}
    independent = {n for n, s in ctl.strategies.items() if attempts_independent(s.agent)}
    window = WINDOW * pool.n
    chosen: dict[int, Task] = {}  # chosen and not recorded yet
    queued: list[int] = []  # chosen and not sent to a worker yet
    done: dict[int, Outcome] = {}
    next_k = usage.expansions
    redo, ctl.pending = dict(ctl.pending), {}

    def choose() -> str | None:
        nonlocal next_k
        while len(chosen) < window:
            stop = ctl.stop_reason()
            if stop is not None:
                return str(stop)
            if budget.expansions is not None and next_k >= budget.expansions:
                return None
            again = redo.pop(next_k, None)
            if again is not None and again[0].node in g and again[0].strategy in strategies:
                choice, share = again
            else:
                pending = [chosen[k].choice for k in sorted(chosen)]
                choice = select_completing(ctl, pending, next_k, independent, chosen)
                share = share_test_runs(_runs_left(ctl, chosen), window - len(chosen))
            if choice is None or share == 0:
                return None  # tried again once the next result is recorded
            chosen[next_k] = ctl.task_for(choice, next_k, share)
            ctl.sink_event(dispatch_event(next_k, choice, share))
            queued.append(next_k)
            next_k += 1
        return None

    def send() -> None:
        while queued and pool.busy < pool.n:
            unfinished = {k: t.choice for k, t in chosen.items() if k not in done}
            k = next_to_send(queued, unfinished, independent)
            if k is None:
                return  # each one left waits for an earlier attempt of its node and strategy
            queued.remove(k)
            pool.submit(ctl.timed(chosen[k]))

    stop = choose()
    send()
    while chosen and stop is None:
        out = pool.next_outcome()
        done[out.k] = out
        if budget.wall_seconds is None:
            # The idle worker takes what was chosen before the results are recorded. (With a
            # wall-clock budget, sending may find it spent: what is done is recorded first.)
            send()
        while stop is None and usage.expansions in done:
            k = usage.expansions
            ev = ctl.apply_outcome(pool, chosen.pop(k), done.pop(k))
            if str(ev["edge"].get("reason") or "").startswith("replay:"):
                return "replay_miss"  # a replayed search met a request it never recorded
            stop = choose()
        send()
    # Stopped with expansions chosen or in flight (a perfect score, a budget): they are dropped
    # (busy workers are stopped when the pool closes) and chosen again if the search resumes.
    return stop or ctl.stop_reason() or "search_space_exhausted"


def _runs_left(ctl: Any, chosen: dict[int, Task]) -> int | None:
    """Test runs of the budget neither spent nor promised to the expansions ``chosen``."""
    if ctl.budget.test_runs is None:
        return None
    promised = sum(t.test_runs or 0 for t in chosen.values())
    return int(ctl.budget.test_runs - ctl.usage.test_runs - promised)


def select_completing(
    ctl: Any,
    pending: list[Choice],
    k: int,
    independent: set[str],
    chosen: dict[int, Task],
) -> Choice | None:
    """The policy's choice for expansion ``k`` (``batch.select_one``, ``pending`` in flight),
    after the controller completed the run of each partial node it chose
    (``Controller.complete``, in the search's workspace; the policy then chooses again, the
    node now worth its score). ``None``: nothing to choose, or no test run left to complete
    the chosen node before the results in flight come in."""
    strategies = {n: s.samples for n, s in ctl.strategies.items()}
    while True:
        choice = select_one(
            ctl.policy, ctl.graph, pending, seed=ctl.seed, k=k, strategies=strategies,
            max_depth=ctl.budget.max_depth, independent=independent if HOLD else None,
        )  # fmt: skip
        if choice is None or not G.is_partial(ctl.graph, choice.node):
            return choice
        left = _runs_left(ctl, chosen)
        if left is not None and left < 1:
            return None
        ctl.complete(choice.node)


# ---------------------------------------------------------------------- in the worker


def worker_entry(fd: int, parent: int) -> None:
    """A worker process's main: read its ``WorkerSpec``, then expand tasks until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the controller's to handle
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    lifecycle.die_with_parent(parent)
    conn = multiprocessing.connection.Connection(fd)
    try:
        spec = conn.recv()
    except EOFError:
        return
    _serve(conn, spec)


def quick_exit() -> None:
    """End a worker that finished cleanly (its folder removed, its scorer and store closed): run
    the exit handlers (``atexit``, ``weakref.finalize``), flush, and exit without tearing the
    interpreter down module by module, which takes a worker that imported treesearch, pydantic
    and networkx more than half a second (the search waits for it at its end). Threads an agent
    left running (not daemons) are waited for first, as the interpreter's own end does."""
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)


def _serve(conn: multiprocessing.connection.Connection, spec: WorkerSpec) -> None:
    """Open the worker's folder and store, then answer tasks until told to stop."""
    broken: str | None = None
    notes: list[str] = []
    servers_said = 0
    with lifecycle.scratch_dir("worker") as folder:
        store: ShadowStore | None = None
        scorer: Scorer | None = None
        try:
            for kind, (factory, model) in spec.agents.items():
                register_agent(kind, factory, model=model, replace=True)
                if isinstance(factory, str):  # imported now, while the root is tested
                    with contextlib.suppress(Exception):
                        resolve_dotted(factory)
            store = open_worker_store(spec.view, folder)
            cache = ScoreCache(spec.score_cache) if spec.score_cache else None
            scorer = Scorer.from_config(spec.scoring, spec.source, cache=cache)
            scorer.warm.on_note = notes.append
            if scorer.search_spec is not None and not spec.warm_copies:
                with contextlib.suppress(ScoringError):  # then the first run says it
                    warm_up(scorer.search_spec, store.workspace, scorer.warm)  # imports pytest
        except Exception as exc:  # noqa: BLE001 - said for every task instead
            broken = f"the worker could not start: {type(exc).__name__}: {exc}"
        try:
            while True:
                try:
                    task = conn.recv()
                except EOFError:
                    break
                if task is None:
                    break
                if task.warm_copy is not None:
                    _adopt_copy(conn, task.warm_copy, scorer)
                if broken is not None or store is None or scorer is None:
                    conn.send(Outcome(task.k, error=broken))
                    continue
                if task.warm_checked:
                    scorer.warm.take_check()
                warm0, cold0 = scorer.warm.warm_runs, scorer.warm.cold_runs
                try:
                    out = expand(task, store, scorer, spec)
                except Exception as exc:  # noqa: BLE001 - the controller says it and stops
                    tb = traceback.format_exc(limit=8)
                    out = Outcome(task.k, error=f"{type(exc).__name__}: {exc}\n{tb}")
                out.warm_runs = scorer.warm.warm_runs - warm0
                out.cold_runs = scorer.warm.cold_runs - cold0
                out.warm_servers = scorer.warm.servers_started - servers_said
                servers_said = scorer.warm.servers_started  # those started ahead included
                if notes:
                    out = dataclasses.replace(out, notes=tuple(notes))
                    notes.clear()
                conn.send(out)
        finally:
            if scorer is not None:
                scorer.close()  # its warm test server ends with the worker
            if store is not None:
                store.close()


def _adopt_copy(
    conn: multiprocessing.connection.Connection,
    copy: tuple[tuple[Any, ...], int],
    scorer: Scorer | None,
) -> None:
    """Take the socket of the warm server's copy that follows the task and give it to the
    worker's runner (a worker that could not start closes it: the copy ends)."""
    sock = socket.socket(fileno=multiprocessing.reduction.recv_handle(conn))
    if scorer is None:
        sock.close()
        return
    key, pid = copy
    scorer.warm.adopt(key, sock, pid)


def expand(task: Task, store: ShadowStore, scorer: Scorer, spec: WorkerSpec) -> Outcome:
    """One expansion in the worker's folder (what ``Controller.expand`` does up to the record)."""
    t_start = time.perf_counter()
    deadline = None if task.time_left is None else time.monotonic() + task.time_left
    timing: dict[str, float] = {}

    def left() -> float | None:
        return None if deadline is None else max(deadline - time.monotonic(), 0.0)

    t = time.perf_counter()
    start = adopt(
        store, task.start.tree, modes=dict(task.start.modes), empty_dirs=task.start.empty_dirs
    )
    store.restore(start.commit)
    timing["restore"] = time.perf_counter() - t
    runs0, hits0 = scorer.test_runs, scorer.cache_hits
    agent_runs = 0

    def run_tests() -> str:
        nonlocal agent_runs
        remaining = left()
        if remaining is not None and remaining <= 0:
            return "not run: the search's wall-clock budget (search.budget.wall_seconds) is spent"
        if task.test_runs is not None and agent_runs >= task.test_runs - 1:
            return (
                "not run: this expansion's share of search.budget.test_runs "
                f"({task.test_runs}, one kept for scoring its result) is spent"
            )
        agent_runs += 1
        result = scorer.score(store.workspace, tree=None, time_limit=remaining)
        return str(result.feedback())

    session = TransactionalSession.create(
        store,
        task.session_file,
        timeout=task.timeout,
        messages=[{"role": "user", "content": task.task}] if task.task else (),
        session_id=task.session_id,
    )
    session.isolation = spec.isolation
    choice = task.choice
    ctx = AgentContext(
        session=session,
        task=task.task,
        feedback=task.feedback,
        max_steps=task.strategy.max_steps,
        timeout=task.timeout,
        rng=random.Random(f"{task.seed}:{choice.node}:{task.strategy.name}:{choice.attempt}"),
        node=TreeHash(choice.node),
        attempt=choice.attempt,
        history=task.history,
        siblings=task.siblings,
        test_spec=scorer.search_spec,
        run_tests=run_tests,
        cache_dir=Path(spec.agent_cache) if spec.agent_cache else None,
        warm=scorer.warm,
        failing=task.failing,
    )
    t = time.perf_counter()
    try:
        result = run_agent(build_agent(task.strategy.agent), ctx)
    except Exception as exc:  # noqa: BLE001 - a strategy that cannot even be built fails
        result = AgentResult(AgentStatus.FAILED, reason=f"{type(exc).__name__}: {exc}")
    timing["agent"] = time.perf_counter() - t
    session.close()
    if deadline is not None and left() == 0:
        return Outcome(task.k, cut=True)
    # Plain JSON in the transcript: what a sequential search writes (``default=str``).
    result.transcript = json.loads(json.dumps(result.transcript, default=str))
    t = time.perf_counter()
    snap = (
        store.resolve(result.tree)
        if result.tree is not None
        else store.capture(label=None, meta=None)
    )
    timing["capture"] = time.perf_counter() - t
    child = str(snap.tree)
    scored = None
    if child not in task.known:
        t = time.perf_counter()
        remaining = left()
        if remaining is not None and remaining <= 0:
            return Outcome(task.k, cut=True)
        scorer.repair = task.repair
        share = None if task.test_runs is None else max(task.test_runs - agent_runs, 1)
        scored = scorer.score(
            store.workspace,
            tree=child,
            parent=task.parent_score,
            time_limit=remaining,
            max_runs=share,
        )
        spec_ = scorer.search_spec
        limited = remaining is not None and spec_ is not None and remaining < spec_.timeout
        if limited and scored.run.timed_out and not scored.cached:
            return Outcome(task.k, cut=True)  # cut by the budget: says nothing of the state
        timing["score"] = time.perf_counter() - t
    return Outcome(
        task.k,
        result=result,
        child=child,
        modes=dict(snap.modes),
        empty_dirs=tuple(snap.empty_dirs),
        scored=scored,
        test_runs=scorer.test_runs - runs0,
        cache_hits=scorer.cache_hits - hits0,
        timing=timing,
        seconds=time.perf_counter() - t_start,
    )
