"""Parallel expansion (``search.workers``): real worker processes, real git, real pytest."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import networkx as nx
import pytest
from conftest import run_git, tree_digest
from test_search import cli, config, make_project, run, slow_config, write_yaml

from treesearch import lifecycle
from treesearch.agents import AgentContext, AgentResult, register_agent
from treesearch.agents.scripted import ScriptedAgent
from treesearch.app import resume
from treesearch.config import DEFAULT_EXCLUDES, apply_overrides, validate
from treesearch.errors import ConfigError, SearchError, StoreError
from treesearch.runs import read_events
from treesearch.search import batch as batch_mod
from treesearch.search import graph as G
from treesearch.search import parallel
from treesearch.search._forked import PROCESS_NAME
from treesearch.search.batch import dispatched, next_to_send, select_batch, share_test_runs
from treesearch.search.graph import to_json
from treesearch.search.params import make_policy
from treesearch.search.policies import Choice
from treesearch.store import ShadowStore
from treesearch.store.workers import adopt, open_worker_store, worker_view

VOLATILE = {"seconds", "elapsed", "time", "feedback"}  # feedback quotes durations


# ------------------------------------------------------------------ agents the workers build


class HungryAgent:
    """Calls ``run_tests`` ``calls`` times, then plays scripted ``steps``."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.calls = int(config["calls"])
        self.inner = ScriptedAgent(config["steps"])

    def run(self, ctx: AgentContext) -> AgentResult:
        assert ctx.run_tests is not None
        answers = [ctx.run_tests() for _ in range(self.calls)]
        result = self.inner.run(ctx)
        result.transcript.append({"event": "run_tests", "answers": answers})
        return result


class DyingAgent:
    """Kills the process it runs in (a worker that dies mid-expansion)."""

    def __init__(self, config: dict[str, Any]) -> None:
        pass

    def run(self, ctx: AgentContext) -> AgentResult:
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable")


class TallyAgent:
    """Keeps a tally per node in the agents' cache folder, as the mutation agent keeps its log
    of the programs a node produced: attempt ``a`` writes ``tally.txt`` with the number of
    earlier attempts it found on record, then records itself. An attempt that finds another
    attempt of its node in flight (its marker in ``tally/``) records the overlap in
    ``tally/overlaps``. (That two attempts of a pair are never sent at once is asserted from
    the dispatch events, whatever the timing:
    ``test_parallel_search_never_has_two_attempts_of_a_dependent_pair_unfinished``.)"""

    def __init__(self, config: dict[str, Any]) -> None:
        pass

    def run(self, ctx: AgentContext) -> AgentResult:
        assert ctx.cache_dir is not None
        log = ctx.cache_dir / "tally" / f"{ctx.node}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        mark = log.parent / f"{ctx.node}.{ctx.attempt}.inflight"
        mark.touch()
        seen = len(log.read_text().splitlines()) if log.exists() else 0
        others = [p.name for p in log.parent.glob(f"{ctx.node}.*.inflight") if p != mark]
        if others:
            with (log.parent / "overlaps").open("a") as f:
                f.write(f"{ctx.node} {ctx.attempt} with {others}\n")
        with log.open("a") as f:
            f.write(f"{ctx.attempt}\n")
        mark.unlink()
        return ScriptedAgent([{"write": "tally.txt", "content": f"{seen}\n"}]).run(ctx)


def wait_for_file(path: Path, limit: float = 120.0) -> bool:
    """Wait until ``path`` exists: a barrier another process opens by creating it. ``limit``
    only keeps a broken search from hanging the suite; whether it was reached is returned."""
    deadline = time.monotonic() + limit
    while not path.exists():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


class MarkedAgent:
    """Leaves ``started-<name>`` in the agents' cache folder, waits (when given ``wait_for``)
    until the file of that name exists there, then plays scripted ``steps``."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.wait_for = config.get("wait_for")
        self.name = str(config["name"])
        self.inner = ScriptedAgent(config["steps"])

    def run(self, ctx: AgentContext) -> AgentResult:
        assert ctx.cache_dir is not None
        ctx.cache_dir.mkdir(parents=True, exist_ok=True)
        (ctx.cache_dir / f"started-{self.name}").touch()
        if self.wait_for:
            wait_for_file(ctx.cache_dir / str(self.wait_for))
        return self.inner.run(ctx)


class ExitNoteAgent:
    """Leaves ``ran-<pid>`` in the agents' cache folder, registers an exit handler of its
    process that leaves ``exited-<pid>`` and starts a thread that leaves ``thread-<pid>`` once
    the worker's folder is gone, then plays scripted ``steps``."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.inner = ScriptedAgent(config["steps"])

    def run(self, ctx: AgentContext) -> AgentResult:
        import atexit

        assert ctx.cache_dir is not None
        ctx.cache_dir.mkdir(parents=True, exist_ok=True)
        (ctx.cache_dir / f"ran-{os.getpid()}").touch()
        atexit.register((ctx.cache_dir / f"exited-{os.getpid()}").touch)
        folder, note = ctx.session.workspace, ctx.cache_dir / f"thread-{os.getpid()}"

        def linger() -> None:  # outlives the worker's folder; not a daemon
            while folder.exists():
                time.sleep(0.01)
            note.touch()

        threading.Thread(target=linger).start()
        return self.inner.run(ctx)


register_agent("test-hungry", "test_search_parallel:HungryAgent", replace=True)
register_agent("test-exit-note", "test_search_parallel:ExitNoteAgent", replace=True)
register_agent("test-marked", "test_search_parallel:MarkedAgent", replace=True)
register_agent("test-tally", "test_search_parallel:TallyAgent", replace=True)
register_agent("test-dying", "test_search_parallel:DyingAgent", replace=True)


def strip(ev: dict[str, Any]) -> dict[str, Any]:
    return {k: strip(v) if isinstance(v, dict) else v for k, v in ev.items() if k not in VOLATILE}


def search_events(run_dir: Path) -> list[dict[str, Any]]:
    kinds = ("root", "expansion", "dispatch")
    return [strip(e) for e in read_events(run_dir / "events.jsonl").events if e["event"] in kinds]


# ------------------------------------------------------------------ batches (pure)


def small_graph() -> nx.DiGraph:
    g = G.new_graph("r", commit=None, score=0.5, tests={})
    G.add_result(g, "r", "a", strategy="s1", edge={}, node={"score": 0.75, "tests": {}})
    G.backup(g, ["r", "a"], 0.75)
    g.nodes["r"]["tried"]["s1"] = 1
    return g


@pytest.mark.parametrize("policy", ["bfs", "best_first", "beam", "mcts", "random"])
def test_select_batch_never_picks_the_same_node_strategy_attempt_twice(policy: str) -> None:
    g = small_graph()
    before = to_json(g)
    strategies = {"s1": 1, "s2": 2, "s3": 1}
    pick = make_policy(policy)
    batch = select_batch(pick, g, seed=3, k0=4, n=5, strategies=strategies, max_depth=None)
    keys = [(c.node, c.strategy, c.attempt) for c in batch]
    assert len(keys) == len(set(keys)) == 5
    assert to_json(g) == before  # the graph itself is not changed
    # The first choice is what a sequential search would choose for expansion k0.
    first = pick(g, random.Random("3:4"), strategies=strategies, max_depth=None)
    assert batch[0] == first


def test_select_batch_mcts_virtual_loss_spreads_over_the_children() -> None:
    g = small_graph()
    G.add_result(g, "r", "b", strategy="s2", edge={}, node={"score": 0.75, "tests": {}})
    G.backup(g, ["r", "b"], 0.75)
    g.nodes["r"]["tried"]["s2"] = 1
    pick = make_policy("mcts", c=1.0)
    batch = select_batch(pick, g, seed=0, k0=0, n=2, strategies={"s1": 1, "s2": 1}, max_depth=None)
    # Without the virtual loss of the first choice, both would descend to the same child.
    assert {c.node for c in batch} == {"a", "b"}


@pytest.mark.parametrize("policy", ["bfs", "best_first", "beam", "mcts", "random"])
def test_a_pending_attempt_of_a_dependent_strategy_holds_its_pair_from_the_next_choices(
    policy: str,
) -> None:
    """Chosen ahead, a second attempt of a sampled strategy whose attempts depend on each other
    (``s2``) would wait for the first (``next_to_send``) and keep a worker idle: while the first
    is pending the pair is held, and the choice goes to other pairs. An independent strategy's
    attempts (``agents.attempts_independent``) are chosen as before."""
    g = small_graph()
    strategies = {"s1": 1, "s2": 3, "s3": 1}
    pick = make_policy(policy)
    first = Choice("r", "s2", 0, ("r",))
    view = batch_mod.pending_view(g, [first], independent=frozenset())
    assert view.nodes["r"]["held"] == ("s2",) and "held" not in g.nodes["r"]

    def choices(independent: frozenset[str]) -> set[tuple[str, str, int]]:
        out = set()
        for k in range(40):
            c = batch_mod.select_one(
                pick,
                g,
                [first],
                seed=k,
                k=k,
                strategies=strategies,
                max_depth=None,
                independent=independent,
            )
            assert c is not None
            out.add((c.node, c.strategy, c.attempt))
        return out

    assert not {c for c in choices(frozenset()) if c[:2] == ("r", "s2")}
    if policy in ("bfs", "random"):  # these choose the root's next attempt when free to
        assert ("r", "s2", 1) in choices(frozenset({"s2"}))


def test_parallel_search_never_has_two_attempts_of_a_dependent_pair_unfinished(
    tmp_path: Path,
) -> None:
    """The dispatch events of a parallel search with a sampled (dependent) strategy: no
    expansion is chosen while another attempt of its node and strategy is chosen and not
    recorded, so no worker waits for one."""
    proj = make_project(tmp_path)
    cfg = config(tmp_path, proj, policy="bfs", stop_on_perfect=False)
    cfg["strategies"] = {"again": {"kind": "test-tally", "samples": 3}, **cfg["strategies"]}
    cfg["search"]["workers"] = 2
    cfg["search"]["budget"] = {"expansions": 10}
    out = run(cfg, tmp_path)
    unrecorded: dict[int, tuple[str, str]] = {}
    recorded = 0
    for ev in read_events(out.run_dir / "events.jsonl").events:
        if ev["event"] == "dispatch":
            pair = (ev["node"], ev["strategy"])
            assert pair not in unrecorded.values(), ev
            unrecorded[int(ev["k"])] = pair
        elif ev["event"] == "expansion":
            unrecorded.pop(recorded, None)
            recorded += 1
    assert recorded == 10


def test_share_test_runs_never_promises_more_than_is_left() -> None:
    assert share_test_runs(None, 2) is None
    assert share_test_runs(0, 2) == 0  # nothing left: wait for the expansions in flight
    assert share_test_runs(7, 2) == 3
    left, shares = 5, []
    for free in (3, 2, 1):  # three idle workers filled one after another
        shares.append(share_test_runs(left, free))
        left -= shares[-1] or 0
    assert shares == [1, 2, 2] and sum(s or 0 for s in shares) == 5


def test_next_to_send_holds_a_later_attempt_of_a_node_and_strategy_until_the_earlier_answered() -> (
    None
):
    a0, a1 = Choice("r", "mut", 0, ("r",)), Choice("r", "mut", 1, ("r",))
    other = Choice("r", "fix", 0, ("r",))
    # 0 is in flight: 1 (its next attempt) waits, 2 (another strategy) goes first.
    assert next_to_send([1, 2], {0: a0, 1: a1, 2: other}) == 2
    assert next_to_send([1], {0: a0, 1: a1}) is None
    # 0 answered (recorded or waiting to be): 1 goes.
    assert next_to_send([1, 2], {1: a1, 2: other}) == 1
    # Queued in order, the earlier attempt goes first, the later one after it.
    assert next_to_send([3, 4], {3: a0, 4: a1}) == 3
    # The same attempt number on another node does not wait.
    assert next_to_send([1], {0: a0, 1: Choice("n", "mut", 1, ("r", "n"))}) == 1


def test_dispatched_is_what_was_chosen_and_not_recorded() -> None:
    def sent(k: int, strategy: str) -> dict[str, Any]:
        return {
            "event": "dispatch",
            "k": k,
            "node": "r",
            "strategy": strategy,
            "attempt": 0,
            "path": ["r"],
            "test_runs": 2,
        }

    def recorded(k: int, strategy: str) -> dict[str, Any]:
        return {"event": "expansion", "k": k, "parent": "r", "strategy": strategy, "attempt": 0}

    events = [{"event": "root"}, sent(0, "s1"), sent(1, "s2"), recorded(0, "s1"), sent(2, "s3")]
    pending = dispatched(events)
    assert {k: (c.strategy, share) for k, (c, share) in pending.items()} == {
        1: ("s2", 2),
        2: ("s3", 2),
    }
    assert dispatched([*events, recorded(1, "s2"), recorded(2, "s3")]) == {}
    # Resumed with one worker: an expansion other than the one chosen voids the other choices.
    assert dispatched([*events, recorded(1, "s4")]) == {}


# ------------------------------------------------------------------ config


def test_search_workers_is_validated_and_settable_with_c(tmp_path: Path) -> None:
    proj = make_project(tmp_path)
    raw = config(tmp_path, proj)
    two = apply_overrides(raw, ["search.workers=2"])
    loaded = validate(two, source="cfg.yaml", base_dir=tmp_path, overrides=["search.workers=2"])
    assert loaded.config.search.workers == 2
    assert validate(raw, source="cfg.yaml", base_dir=tmp_path).config.search.workers == 1
    zero = apply_overrides(raw, ["search.workers=0"])
    with pytest.raises(ConfigError, match=r"search\.workers=0: search\.workers: must be at least"):
        validate(zero, source="cfg.yaml", base_dir=tmp_path, overrides=["search.workers=0"])


# ------------------------------------------------------------------ worker stores


def test_worker_store_shares_the_objects_and_captures_what_the_search_store_does(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "proj"
    ws.mkdir()
    (ws / ".gitignore").write_text("*.log\n__pycache__/\n")
    (ws / "keep.log").write_text("tracked although ignored\n")
    (ws / "a.py").write_text("x = 1\n")
    (ws / "fixture.log").write_text("ignored, read by the tests\n")
    (ws / "__pycache__").mkdir()
    (ws / "__pycache__" / "a.pyc").write_text("cache\n")
    run_git(ws, "init", "-q")
    run_git(ws, "add", "-f", "keep.log")
    run_git(ws, "add", ".")
    run_git(ws, "commit", "-q", "-m", "init")
    main = ShadowStore.open(ws, home=tmp_path / "home")
    root = main.capture()
    assert {e.path for e in main.files(root.commit)} == {".gitignore", "a.py", "keep.log"}
    user_before = tree_digest(ws, include_mtime=True)
    log_before = [s.commit for s in main.log()]

    view = worker_view(main)
    with lifecycle.scratch_dir("worker", tmp_path) as folder:
        w = open_worker_store(view, folder)
        # Files the store does not capture are copied once (the tests may read them); caches not.
        assert (w.workspace / "fixture.log").read_text() == "ignored, read by the tests\n"
        assert not (w.workspace / "__pycache__").exists()
        start = adopt(w, root.tree, modes=root.modes, empty_dirs=root.empty_dirs)
        w.restore(start.commit)
        (w.workspace / "a.py").write_text("x = 2\n")
        (w.workspace / "junk.log").write_text("ignored\n")
        child = w.capture()
        w.close()
        # Every object the worker wrote went to the search store's object folder.
        own = [p for p in (w.git_dir / "objects").rglob("*") if p.is_file()]
        assert own == []
    # Nothing of the worker's reached the search store's snapshots, nor its workspace.
    assert [s.commit for s in main.log()] == log_before
    assert tree_digest(ws, include_mtime=True) == user_before
    got = adopt(main, child.tree, modes=child.modes, empty_dirs=child.empty_dirs)
    main.materialize(got.commit, tmp_path / "out")
    assert (tmp_path / "out" / "a.py").read_text() == "x = 2\n"
    # The file the user's repository tracks though ignored is kept; the ignored one is not.
    assert (tmp_path / "out" / "keep.log").exists()
    assert not (tmp_path / "out" / "junk.log").exists()


def test_worker_view_refuses_a_workspace_with_a_nested_repository(tmp_path: Path) -> None:
    ws = tmp_path / "proj"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "f.txt").write_text("f\n")
    run_git(ws / "sub", "init", "-q")
    main = ShadowStore.open(ws, home=tmp_path / "home")
    with pytest.raises(StoreError, match=r"nested git repositories \(sub.*search\.workers: 1"):
        worker_view(main)


# ------------------------------------------------------------------ searches


def store_of(tmp_path: Path, proj: Path) -> ShadowStore:
    return ShadowStore.open(proj, home=tmp_path / "home", excludes=DEFAULT_EXCLUDES)


def test_parallel_search_is_deterministic_and_ends_at_the_best_node(tmp_path: Path) -> None:
    outs = []
    for i in range(2):
        base = tmp_path / f"p{i}"
        proj = make_project(base)
        cfg = config(base, proj, policy="mcts", params={"c": 1.0}, stop_on_perfect=False)
        cfg["search"]["workers"] = 2
        cfg["search"]["budget"] = {"expansions": 7}
        out = run(cfg, tmp_path)
        assert out.usage.expansions == 7  # exactly the budget
        store = store_of(base, proj)
        assert store.capture().tree == out.best  # the workspace ends at the best node
        # Only the final restore wrote the workspace: one safety snapshot in its store.
        assert [s.kind for s in store.log()].count("safety") == 1
        outs.append(out)
    graphs = [to_json(o.graph, stable=True) for o in outs]
    assert graphs[0] == graphs[1]
    assert [n["commit"] for _, n in outs[0].graph.nodes(data=True)] == [
        n["commit"] for _, n in outs[1].graph.nodes(data=True)
    ]
    events = [search_events(o.run_dir) for o in outs]
    assert events[0] == events[1]
    ks = [e["k"] for e in events[0] if e["event"] == "expansion"]
    assert ks == list(range(7))
    assert [e["k"] for e in events[0] if e["event"] == "dispatch"] == list(range(7))
    rd = outs[0].run_dir
    for k in range(7):  # a transcript and a session file per expansion, as a sequential run
        assert len(list((rd / "transcripts").glob(f"{k:04d}-*.json"))) == 1
        assert len(list((rd / "transcripts").glob(f"{k:04d}-*.session.jsonl"))) == 1
    scored = [n for n in outs[0].graph.nodes]
    assert all((rd / "tests" / f"{n[:12]}.log").exists() for n in scored)


def other_filesystem(path: Path) -> Path | None:
    """A writable folder on another filesystem than ``path`` (a tmpfs such as ``/dev/shm``)."""
    for cand in (os.environ.get("XDG_RUNTIME_DIR"), "/dev/shm", "/run/user", "/tmp"):
        if not cand or not os.path.isdir(cand) or not os.access(cand, os.W_OK):
            continue
        if os.stat(cand).st_dev != os.stat(path).st_dev:
            return Path(cand)
    return None


def test_parallel_search_with_worker_folders_on_another_filesystem_than_its_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Regression: a worker's store wrote the objects of its snapshots (into the search store's
    # object folder) through a temporary file in its own folder: with TMPDIR on a tmpfs and
    # the store home on disk, the rename failed (EXDEV) and every expansion with it.
    other = other_filesystem(tmp_path)
    if other is None:
        pytest.skip("no writable folder on another filesystem than the temporary folder")
    scratch = Path(tempfile.mkdtemp(prefix="workers-elsewhere-", dir=other))
    try:
        monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where worker folders go
        proj = make_project(tmp_path)
        cfg = config(tmp_path, proj, policy="bfs", stop_on_perfect=False)
        cfg["search"]["workers"] = 2
        cfg["search"]["budget"] = {"expansions": 4}
        out = run(cfg, tmp_path)
        assert out.usage.expansions == 4
        assert out.stop_reason == "expansions"
        expanded = [e for e in search_events(out.run_dir) if e["event"] == "expansion"]
        assert [e["edge"]["status"] for e in expanded].count("finished") >= 1
        assert all(e["edge"]["status"] != "error" for e in expanded), expanded
        store = store_of(tmp_path, proj)
        assert store.capture().tree == out.best
        assert not list(scratch.glob("*/worker-*"))  # the worker folders are gone
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def test_parallel_search_runs_the_attempts_of_a_node_one_after_another_as_sequentially(
    tmp_path: Path,
) -> None:
    """Regression: two attempts of one sampled strategy on one node ran at once in two workers,
    so an agent that keeps state per node (the mutation agent's log of the programs a node
    produced, its fault localisation) saw or missed the other's by timing: the graph depended
    on which worker was faster, and both paid the localisation. Each attempt now finds every
    earlier attempt of its node on record (its tally), and two runs give one graph."""
    graphs = []
    for run_no in range(2):
        base = tmp_path / f"run{run_no}"
        proj = make_project(base)
        cfg = config(base, proj, policy="bfs", stop_on_perfect=False)
        cfg["strategies"] = {"tally": {"kind": "test-tally", "samples": 3}}
        cfg["search"]["workers"] = 2
        cfg["search"]["budget"] = {"expansions": 4}
        out = run(cfg, base)
        g = out.graph
        store = ShadowStore.open(proj, home=base / "home")
        for parent, child in g.edges:
            dest = base / "seen" / child
            store.materialize(g.nodes[child]["commit"], dest)
            attempt = g.edges[parent, child]["attempt"]
            assert (dest / "tally.txt").read_text() == f"{attempt}\n", (parent, child)
        store.close()
        tallies = list((base / "home").rglob("tally"))
        assert tallies and not [p for t in tallies for p in t.glob("overlaps")]
        graphs.append(to_json(g, stable=True))
    assert graphs[0] == graphs[1]


def test_parallel_search_gives_an_idle_worker_its_next_task_before_recording_results(
    tmp_path: Path,
) -> None:
    """A worker that answered gets the next expansion already chosen at once, not after the
    controller recorded the results it can (transcripts, test logs, events, diffs): recording
    expansion 0 (here: its progress report) overlaps expansion 2, chosen with it."""
    from treesearch.app import run_from_config

    proj = make_project(tmp_path)
    cfg = config(tmp_path, proj, policy="bfs", stop_on_perfect=False)
    steps = [{"replace": "calc.py", "old": "return a - b", "new": "return a + b", "check": False}]

    def marked(name: str, wait_for: str | None = None) -> dict[str, Any]:
        return {"kind": "test-marked", "name": name, "wait_for": wait_for, "steps": steps}

    # 0 answers at once; 1 holds its worker until the test releases it, after expansion 0 was
    # reported: so 0 always answers first, with 1 busy, and 2 (chosen with them: the window)
    # can only go to 0's worker. Recording 0 (its progress report) waits for 2 to start: it
    # starts only if it was sent before the recording, every time; else the wait runs out.
    cfg["strategies"] = {"s0": marked("s0"), "s1": marked("s1", "release-s1"), "s2": marked("s2")}
    cfg["search"]["workers"] = 2
    cfg["search"]["budget"] = {"expansions": 3}
    cache = tmp_path / "home" / "agent-cache"
    seen: dict[int, bool] = {}

    def progress(info: dict[str, Any]) -> None:
        if info["k"] == 0:
            try:
                seen[0] = wait_for_file(cache / "started-s2", limit=60)
            finally:
                (cache / "release-s1").touch()

    out = run_from_config(cfg, on_progress=progress)
    assert out.usage.expansions == 3
    assert seen == {0: True}


@pytest.mark.parametrize("fork", [None, False], ids=["forked", "fresh interpreters"])
def test_parallel_search_workers_run_on_copies_of_the_search_warm_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fork: bool | None
) -> None:
    """The search's first test run (the root) is made cold and warm and compared (``scoring.warm:
    auto``); a worker takes that check instead of making its own first run twice, and the
    search's summary counts every worker's runs. The search starts one warm server (for the
    root's test); each worker takes a copy of it, forked by that server, with its first task
    instead of starting one of its own (a start imports pytest: a fraction of a CPU second per
    worker). A resumed search, whose root is not tested again, starts its server when the first
    task goes out, and copies it the same way. Regression: workers started as fresh
    interpreters got the C environment, where a library had set variables Python's
    ``os.environ`` does not show (``LINES``, ``COLUMNS``), and so started servers of their own."""
    monkeypatch.setattr(parallel, "FORK", fork)
    proj = make_project(tmp_path)
    cfg = config(tmp_path, proj, policy="bfs", stop_on_perfect=False)
    cfg["scoring"]["warm"] = "auto"
    cfg["search"]["workers"] = 2
    cfg["search"]["budget"] = {"expansions": 4}
    out = run(cfg, tmp_path)
    warm = json.loads((out.run_dir / "summary.json").read_text())["warm"]
    assert warm["notes"] == []
    assert (warm["servers_started"], warm["server_copies"]) == (1, 2)
    assert warm["cold_runs"] == 1  # the root's check, and no worker's
    assert warm["warm_runs"] == out.usage.test_runs  # the root's check and each worker run
    again = resume(out.run_dir, ["search.budget.expansions=8"], home=tmp_path / "home")
    assert again.usage.expansions == 8
    warm = json.loads((out.run_dir / "summary.json").read_text())["warm"]
    assert warm["notes"] == []
    assert (warm["servers_started"], warm["server_copies"]) == (1, 2)
    assert warm["warm_runs"] >= 1


def test_parallel_search_never_spends_more_test_runs_than_the_budget(tmp_path: Path) -> None:
    proj = make_project(tmp_path)
    cfg = config(tmp_path, proj, policy="bfs", stop_on_perfect=False)
    for name, strat in list(cfg["strategies"].items()):
        cfg["strategies"][name] = {"kind": "test-hungry", "calls": 3, "steps": strat["steps"]}
    cfg["search"]["workers"] = 2
    cfg["search"]["budget"] = {"expansions": 50, "test_runs": 8}
    out = run(cfg, tmp_path)
    events = read_events(out.run_dir / "events.jsonl").events
    kinds = ("root", "expansion", "completed")
    spent = sum(e.get("test_runs", 0) for e in events if e["event"] in kinds)
    assert spent == out.usage.test_runs <= 8
    assert out.stop_reason == "test_runs"
    answers = [
        a
        for p in (out.run_dir / "transcripts").glob("*[0-9]-*[a-z].json")
        for ev in json.loads(p.read_text())["transcript"]
        if ev.get("event") == "run_tests"
        for a in ev["answers"]
    ]
    assert any("share of search.budget.test_runs" in a for a in answers)


def test_a_worker_that_dies_stops_the_search_with_its_exit_code(tmp_path: Path) -> None:
    proj = make_project(tmp_path)
    cfg = config(tmp_path, proj, policy="bfs")
    cfg["strategies"] = {"die": {"kind": "test-dying"}, **cfg["strategies"]}
    cfg["search"]["workers"] = 2
    with pytest.raises(SearchError, match=r"search worker 0 .* died with exit code -9"):
        run(cfg, tmp_path)
    assert "return a - b" in (proj / "calc.py").read_text()  # the workspace is as it was


def worker_pids(pid: int) -> list[int]:
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    out = []
    for k in map(int, kids):
        try:
            cmd = Path(f"/proc/{k}/cmdline").read_bytes()
            comm = Path(f"/proc/{k}/comm").read_text().strip()
        except OSError:
            continue
        if b"worker_entry" in cmd or comm == PROCESS_NAME:  # a fresh interpreter, or forked
            out.append(k)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_parallel_search_killed_resumes_to_the_same_graph(tmp_path: Path, sig: int) -> None:
    ref_proj = make_project(tmp_path / "ref")
    ref_cfg = slow_config(tmp_path / "ref", ref_proj)
    ref_cfg["search"]["workers"] = 2
    reference = run(ref_cfg, tmp_path)

    proj = make_project(tmp_path / "int")
    cfg = slow_config(tmp_path / "int", proj)
    cfg["search"]["workers"] = 2
    cfg["output"]["run_id"] = "killed"
    proc = cli("run", str(write_yaml(tmp_path / "int.yaml", cfg)))
    run_dir = tmp_path / "int" / "runs" / "killed"
    deadline = time.monotonic() + 120
    pids: list[int] = []
    while time.monotonic() < deadline:  # until a few expansions are on record
        events = run_dir / "events.jsonl"
        pids = worker_pids(proc.pid) or pids
        recorded = events.read_text().count('"expansion"') if events.exists() else 0
        started = len(list((run_dir / "transcripts").glob("*.session.jsonl")))
        if recorded >= 3 and started > recorded:  # and an expansion under way: inside a batch
            break
        time.sleep(0.05)  # (polling, not timing: the condition above decides)
    pids = worker_pids(proc.pid) or pids
    assert len(pids) == 2
    os.kill(proc.pid, sig)  # the controller alone: its workers must end with it
    _out, err = proc.communicate(timeout=60)
    if sig == signal.SIGTERM:
        assert proc.returncode == 130, err
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["status"] == "interrupted"
        assert store_of(tmp_path / "int", proj).capture().tree == summary["best"]["tree"]
    end = time.monotonic() + 30
    while any(Path(f"/proc/{p}").exists() for p in pids) and time.monotonic() < end:
        time.sleep(0.05)
    assert not [p for p in pids if Path(f"/proc/{p}").exists()]
    resumed = resume(run_dir)
    assert to_json(resumed.graph, stable=True) == to_json(reference.graph, stable=True)
    assert resumed.best == reference.best
    assert store_of(tmp_path / "int", proj).capture().tree == resumed.best
    # The killed workers' folders were reaped by the resumed search.
    left = [p for p in lifecycle.temp_root().glob("worker-*") if int(p.name.split("-")[1]) in pids]
    assert left == []


def test_parallel_search_says_what_the_workers_warm_runners_said(tmp_path: Path) -> None:
    """A worker scores with its own warm runner; a fallback to cold runs there is said by the
    search (events, terminal) like the search's own, never lost in the worker."""
    from treesearch.app import run_from_config

    proj = make_project(tmp_path)
    cfg = config(tmp_path, proj, policy="bfs", stop_on_perfect=False)
    cfg["scoring"]["search_tests"]["command"] = "cd . && python -m pytest -q"
    cfg["scoring"]["warm"] = "on"
    cfg["search"]["workers"] = 2
    cfg["search"]["budget"] = {"expansions": 4}
    notes: list[str] = []
    out = run_from_config(cfg, on_note=notes.append)
    assert out.usage.expansions == 4
    events = read_events(out.run_dir / "events.jsonl").events
    said = [e["note"] for e in events if e["event"] == "warm_runner"]
    from_workers = [n for n in said if n.startswith("worker ")]
    assert from_workers and all("shell features" in n for n in from_workers)
    assert len(said) == len(notes)


# ------------------------------------------------------------------ a worker's warm server


def my_warm_servers() -> list[int]:
    """Live warm servers started by this process (its children running the server script)."""
    found = []
    for pid in Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if b"_treesearch_warm_server" in cmdline and state != b"Z":
            found.append(int(pid))
    return found


def test_warm_up_starts_the_server_the_first_run_then_uses(tmp_path: Path) -> None:
    """A server started ahead (``runner.warm_up``: the search's own, for copies to the workers
    of a resumed search) imports pytest while other work goes on: the first test run then
    finds it started, instead of waiting for a server to import pytest, and starts no second
    one."""
    import sys

    from treesearch.scoring import TestSpec, run_tests
    from treesearch.scoring.runner import warm_up
    from treesearch.scoring.warm import WarmRunner

    proj = make_project(tmp_path)
    spec = TestSpec(
        command=f"{sys.executable} -m pytest -q",  # a command line, as the demo's
        timeout=60,
        env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    others = set(my_warm_servers())  # servers earlier tests of this process left running
    with WarmRunner("on") as runner:
        warm_up(spec, proj, runner)
        started = set(my_warm_servers()) - others
        assert len(started) == 1 and runner.warm_runs == 0  # started, nothing run
        run = run_tests(spec, proj, warm=runner)
        assert run.totals.get("failed") and runner.warm_runs == 1 and not runner.notes
        assert set(my_warm_servers()) - others == started  # the run used it
    assert set(my_warm_servers()) - others == set()


def test_a_worker_ends_quickly_and_still_runs_its_exit_handlers(tmp_path: Path) -> None:
    """A worker skips the interpreter's slow teardown at its end (``parallel.quick_exit``), but
    not what a program registered to run at exit (an agent's ``atexit`` handler) nor the end of
    a thread an agent left running."""
    proj = make_project(tmp_path)
    cfg = config(tmp_path, proj, policy="bfs", stop_on_perfect=False)
    steps = [{"replace": "calc.py", "old": "return a - b", "new": "return a + b", "check": False}]
    cfg["strategies"] = {f"s{i}": {"kind": "test-exit-note", "steps": steps} for i in range(4)}
    cfg["search"]["workers"] = 2
    cfg["search"]["budget"] = {"expansions": 4}
    out = run(cfg, tmp_path)
    assert out.usage.expansions == 4
    cache = tmp_path / "home" / "agent-cache"
    ran = {p.name.split("-")[1] for p in cache.glob("ran-*")}
    exited = {p.name.split("-")[1] for p in cache.glob("exited-*")}
    threads = {p.name.split("-")[1] for p in cache.glob("thread-*")}
    assert ran and ran == exited == threads
    assert str(os.getpid()) not in ran  # the agents ran in the workers
