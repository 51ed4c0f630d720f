"""Putting a search together from its config: store, scorer, strategies, policy, run directory.

``run_from_config`` starts a search, ``resume`` continues one from its run directory (the event log
is the source of truth), ``checkout`` puts any node of a run back into its workspace. The CLI is a
thin layer over these; tests and scripts call them directly.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from treesearch import lifecycle
from treesearch.agents import agent_entry, build_agent
from treesearch.agents.llm.judge import ValueJudge
from treesearch.config import (
    Config,
    LoadedConfig,
    agent_config,
    apply_overrides,
    validate,
)
from treesearch.errors import RunError, ScoringError, WorkspaceBusy
from treesearch.isolation import NO_ISOLATION, Isolation
from treesearch.isolation import resolve as resolve_isolation
from treesearch.report import try_write_report
from treesearch.runs import RunDir, new_run_id
from treesearch.runs.cleanup import claim_copy, copy_note, make_workspace_copy
from treesearch.runs.keep import KeepingSink, keep_name
from treesearch.runs.resolved import check_runs_dir, check_workspace, resolved_config, store_home
from treesearch.scoring import ScoreCache, Scorer
from treesearch.scoring.heldout import check_grade_files, grade_in_copy
from treesearch.scoring.order import is_repair
from treesearch.scoring.ordered import screens
from treesearch.scoring.runner import warm_clone, warm_up
from treesearch.scoring.warm import WarmClone
from treesearch.search import graph as G
from treesearch.search import parallel
from treesearch.search.budget import Budget, Usage, explain_stop
from treesearch.search.controller import Controller, SearchResult, Strategy, one_line
from treesearch.search.events import replay
from treesearch.search.parallel import WorkerPool, WorkerSpec
from treesearch.search.params import make_policy
from treesearch.search.policies import SCREENED_BY_DEFAULT
from treesearch.search.reproduce import (
    REPRODUCE_TASK,
    read_record,
    reproduce,
    reproduction_command,
    shared_copy,
)
from treesearch.store import ShadowStore, default_home
from treesearch.store.workers import worker_view

__all__ = ["SearchOutcome", "checkout", "resume", "run_from_config", "load_run_graph"]


@dataclass
class SearchOutcome:
    """What a finished (or interrupted) search produced."""

    run_dir: Path
    workspace: Path
    """The folder searched (a temporary copy when ``workspace.copy`` is set)."""
    best: str
    """Tree hash of the best node (now restored in the workspace)."""
    best_score: float | None
    graph: nx.DiGraph
    usage: Usage
    stop_reason: str
    grade: Any = None
    """Held-out grade (a ``ScoreResult``) of the best node, when ``grade_tests`` are configured."""
    patch: str = ""
    """Unified diff from the root to the best node (also in ``best.patch``)."""
    summary: dict[str, Any] = field(default_factory=dict)
    interrupted: bool = False
    timings: list[Any] = field(default_factory=list)
    """Per expansion of this process: where the time went (``search.controller.Timing``)."""
    stop_detail: str | None = None
    """One line on why the search stopped when ``stop_reason`` alone does not say it (also
    ``summary["stop_detail"]``): the repeated agent error of ``max_consecutive_errors``, the
    root's unusable test run of ``root_invalid`` (then the search spent nothing on
    expansions: there is no search result, only the root)."""


ProgressFn = Callable[[dict[str, Any]], None]
NoteFn = Callable[[str], None]


def run_from_config(
    config: Mapping[str, Any] | LoadedConfig,
    *,
    base_dir: Path | None = None,
    runs_dir: Path | None = None,
    source: str = "<config>",
    on_progress: ProgressFn | None = None,
    on_start: Callable[[RunDir, Path], None] | None = None,
    home: Path | None = None,
    watch: bool = True,
    on_note: NoteFn | None = None,
) -> SearchOutcome:
    """Start a new search. ``config`` is a mapping (as YAML gives) or a loaded config.

    Everything that can be checked is checked before the run directory is created: a refused
    config leaves no run folder behind. ``home``: the store home when the config names none
    (default ``store.default_home()``; the command line passes the one ``TREESEARCH_HOME``
    names); ``watch``: see ``ShadowStore.open``."""
    if isinstance(config, LoadedConfig):
        loaded = config
    else:
        loaded = validate(config, source=source, base_dir=(base_dir or Path.cwd()).resolve())
    cfg = loaded.config
    _isolation(loaded)  # refuse an isolation that cannot work here before any run folder
    original = check_workspace(loaded)
    root_runs = Path(os.path.abspath(runs_dir or Path(cfg.output.runs_dir)))
    check_runs_dir(
        loaded, root_runs, cfg.output.run_id, flag=None if runs_dir is None else "--runs-dir"
    )
    # Held-out files the grade lays over its copy: checked (outside the workspace) up front.
    grade_files = check_grade_files(
        getattr(cfg.scoring, "grade_files", None), loaded.source, loaded.base_dir, original
    )
    home = store_home(loaded, home or default_home())
    run_id = cfg.output.run_id or new_run_id(cfg.output.instance_id)
    workspace = original
    if cfg.workspace.copy_:  # under <store home>/copies, with a marker `treesearch clean` reads
        workspace = make_workspace_copy(original, home, run_id=run_id, run_dir=root_runs / run_id)
    try:
        store = _open_store(loaded, workspace=workspace, home=home, create=True, watch=watch)
        # Taken before the run folder exists, so a refused search leaves none behind (``_search``
        # claims it again: the hold is re-entrant within a process).
        hold = store.hold(f"search run {run_id}")
    except BaseException:
        if cfg.workspace.copy_:  # nobody will look at a copy whose search never started
            shutil.rmtree(workspace.parent, ignore_errors=True)
        raise
    with hold:
        resolved = resolved_config(
            loaded,
            workspace=store.workspace,
            source=original if cfg.workspace.copy_ else None,
            home=home,
            runs_dir=root_runs,
            run_id=run_id,
        )
        if grade_files:
            resolved["scoring"]["grade_files"] = {k: str(v) for k, v in grade_files.items()}
        run = RunDir.create(root_runs, run_id, resolved)
        run.append(
            {
                "event": "run_started",
                "run_id": run_id,
                "seed": cfg.search.seed,
                "policy": cfg.search.policy,
                "time": time.time(),
            }
        )
        if hold.reclaimed:
            run.append({"event": "hold_reclaimed", "note": hold.reclaimed, "time": time.time()})
        if on_start is not None:
            on_start(run, workspace)
        source_path = str(run.path / "config.yaml")
        loaded_resolved = validate(resolved, source=source_path, base_dir=run.path)
        return _search(loaded_resolved, run, [], on_progress, store=store, on_note=on_note)


def resume(
    run_dir: Path,
    overrides: Sequence[str] = (),
    on_progress: ProgressFn | None = None,
    on_note: NoteFn | None = None,
    *,
    home: Path | None = None,
    watch: bool = True,
) -> SearchOutcome:
    """Continue a search from its run directory (after a crash, Ctrl-C, or to spend more budget).

    The graph is rebuilt from ``events.jsonl``; an expansion that was cut short is done again,
    so the search reaches the same nodes as one that was never interrupted. The run's store is
    the one its ``config.yaml`` names (never a new, empty one). When the search has nothing
    left to do (a budget spent, a perfect score), ``on_note`` is told why at once.
    """
    run = RunDir.open(Path(run_dir))
    raw = run.config()
    source = str(run.path / "config.yaml")
    if overrides:
        raw = apply_overrides(raw, overrides)
    loaded = validate(raw, source=source, base_dir=run.path, overrides=overrides)
    if overrides:  # only a config that validates replaces the recorded one
        run.write_text("config.yaml", _yaml(raw))
    log = run.events()
    # A process's end (finished, interrupted) records its elapsed time too: the wall-clock
    # budget then counts the time of an expansion it dropped or cut short.
    kinds = ("root", "expansion", "completed", "finished", "interrupted", "dispatch")
    events = [e for e in log.events if e["event"] in kinds]
    store = _open_store(loaded, home=home, watch=watch)
    return _search(loaded, run, events, on_progress, store=store, on_note=on_note)


def _open_store(
    loaded: LoadedConfig,
    *,
    workspace: Path | None = None,
    home: Path | None = None,
    create: bool = False,
    watch: bool = True,
) -> ShadowStore:
    """The run's store: ``create`` only for a new run; an existing run's store must exist.
    ``home``: the store home when the config names none (a run's recorded config always does)."""
    cfg = loaded.config
    home = store_home(loaded, home or default_home())
    return ShadowStore.open(
        workspace or loaded.workspace_path(),
        home=home,
        excludes=cfg.store.excludes,
        respect_gitignore=cfg.store.respect_gitignore,
        max_file_bytes=cfg.store.max_file_bytes,
        create=create,
        fixed_dates=True,
        watch=watch,
    )


def _search(
    loaded: LoadedConfig,
    run: RunDir,
    events: list[dict[str, Any]],
    on_progress: ProgressFn | None,
    *,
    store: ShadowStore | None = None,
    on_note: NoteFn | None = None,
) -> SearchOutcome:
    if store is None:
        store = _open_store(loaded)
    # The search holds its workspace from the first restore to the final one: another search,
    # session or restore of it in another process is refused instead of mixing states with ours.
    try:
        hold = store.hold(f"search run {run.path.name}")
    except WorkspaceBusy as exc:
        run.append({"event": "refused", "reason": str(exc), "time": time.time()})
        run.close()
        raise
    with hold:
        if hold.reclaimed:
            run.append({"event": "hold_reclaimed", "note": hold.reclaimed, "time": time.time()})
        return _search_held(loaded, run, store, events, on_progress, on_note=on_note)


def _search_held(
    loaded: LoadedConfig,
    run: RunDir,
    store: ShadowStore,
    events: list[dict[str, Any]],
    on_progress: ProgressFn | None,
    *,
    on_note: NoteFn | None = None,
) -> SearchOutcome:
    cfg = loaded.config
    reaped = lifecycle.reap()  # what killed searches left: their test processes, scratch folders
    if reaped:
        run.append({"event": "reaped", "time": time.time(), **reaped.to_dict()})
    if cfg.workspace.source is not None:  # a copy: `treesearch clean` keeps it while we run
        claim_copy(loaded.workspace_path())
    loaded = _reproduced(loaded, run, store, on_note)  # search.reproduce: tests before search
    cfg = loaded.config
    scorer = Scorer.from_config(cfg.scoring, cache=ScoreCache(store.path / "scores.sqlite"))
    with scorer:  # its warm server ends with the search, however it ends
        scorer.warm.on_note = _warm_note(run, on_note)
        return _search_scored(loaded, run, store, events, on_progress, scorer, on_note=on_note)


def _strategy(cfg: Config, name: str) -> Strategy:
    """Strategy ``name`` as the controller runs it: its agent config and its limits (its own
    ``max_steps``/``timeout``, else the search's defaults)."""
    s = cfg.strategies[name]
    return Strategy(
        name,
        agent_config(s),
        max_steps=s.max_steps if s.max_steps is not None else cfg.search.steps,
        timeout=float(s.timeout if s.timeout is not None else cfg.search.agent_timeout),
        samples=s.samples,
    )


def _reproduced(
    loaded: LoadedConfig, run: RunDir, store: ShadowStore, on_note: NoteFn | None
) -> LoadedConfig:
    """``search.reproduce``: the reproduction tests (written now, or read from the run's record
    when it is resumed), and the config the search then runs: the kept files in the search
    tests' pytest run, scored as their own part; the reproducing strategy out of the search."""
    cfg = loaded.config
    rep = cfg.search.reproduce
    if rep is None:
        return loaded
    tests = cfg.scoring.search_tests  # a pytest run (checked with the config)
    folder = run.path / "reproduce"
    record = read_record(folder)
    if record is None:
        writer = _strategy(cfg, rep.strategy)
        task = (rep.task or REPRODUCE_TASK).replace("{task}", cfg.task)
        root = str(store.capture(label=None, meta=None).tree)
        say = None if on_note is None else (lambda text: on_note(f"note: {text}"))
        record = reproduce(
            store,
            root,
            name=rep.strategy,
            make_agent=lambda: build_agent(writer.agent),
            task=task,
            samples=rep.samples,
            max_steps=writer.max_steps,
            timeout=writer.timeout,
            spec=tests,
            folder=folder,
            seed=cfg.search.seed,
            session_file=lambda k: run.session_file(f"reproduce-{k:02d}"),
            cache_dir=store.path.parent / "agent-cache",
            isolation=_isolation(loaded),
            on_note=say,
        )
        run.append({"event": "reproduced", "time": time.time(), **record.to_json()})
    others = {k: v for k, v in cfg.strategies.items() if k != rep.strategy}
    kept = record.kept_paths(folder)
    scoring = cfg.scoring
    if kept:
        cwd = store.workspace / tests.cwd
        command = reproduction_command(tests.command, shared_copy(kept, store.path.parent), cwd)
        scoring = scoring.model_copy(
            update={
                "search_tests": tests.model_copy(update={"command": command}),
                "score": {
                    "kind": "with_reproduction",
                    "base": scoring.score,
                    "files": [p.name for p in kept],
                    "weight": rep.weight,
                },
            }
        )
    elif on_note is not None:
        on_note(
            "warning: search.reproduce kept no reproduction test (see reproduce/reproduce.json):"
            " the search has only the repository's tests (no_signal if they pass at the root)"
        )
    search = cfg.search.model_copy(update={"reproduce": None})
    new = cfg.model_copy(update={"strategies": others, "scoring": scoring, "search": search})
    out = LoadedConfig(new, loaded.raw, loaded.source, loaded.base_dir, loaded.overrides)
    out.reproduction = record
    return out


def _warm_note(run: RunDir, on_note: NoteFn | None) -> NoteFn:
    """A fallback of the warm test runner: recorded in the events and said at once."""

    def note(text: str) -> None:
        run.append({"event": "warm_runner", "note": text, "time": time.time()})
        if on_note is not None:
            on_note(f"note: {text}")

    return note


def _search_scored(
    loaded: LoadedConfig,
    run: RunDir,
    store: ShadowStore,
    events: list[dict[str, Any]],
    on_progress: ProgressFn | None,
    scorer: Scorer,
    *,
    on_note: NoteFn | None = None,
) -> SearchOutcome:
    cfg = loaded.config
    isolation = _isolation(loaded)
    strategies = {name: _strategy(cfg, name) for name in cfg.strategies}
    judge = (
        ValueJudge(cfg.scoring.judge, base_dir=loaded.base_dir)
        if cfg.scoring.judge is not None
        else None
    )
    pool = _worker_pool(loaded, store, scorer, isolation)
    # Every state the run names stays in the store while the run directory exists (snap gc).
    sink = KeepingSink(run, lambda commits: store.keep(keep_name(run), commits, holder=run.path))
    sink.hold(events)
    if pool is not None:
        pool.on_note = scorer.warm.on_note
        pool.warm_source = functools.partial(_warm_copy, scorer, store.workspace)
    controller = Controller(
        store=store,
        strategies=strategies,
        make_agent=lambda st: build_agent(st.agent),
        scorer=scorer,
        policy=make_policy(cfg.search.policy, cfg.search.params),
        budget=Budget(**cfg.search.budget.model_dump()),
        seed=cfg.search.seed,
        task=cfg.task,
        stop_on_perfect=cfg.search.stop_on_perfect,
        sink=sink,
        on_progress=on_progress,
        max_consecutive_errors=cfg.search.max_consecutive_errors,
        isolation=isolation,
        pool=pool,
        judge=judge,
    )
    t0 = time.perf_counter()
    stop: str | None = None
    if pool is not None:
        pool.start()  # the workers start up while the root is tested
    try:
        if events:
            controller.replay(events)
            run.append(
                {"event": "resumed", "time": time.time(), "expansions": controller.usage.expansions}
            )
            stop = controller.stop_reason()
            if stop is not None and on_note is not None:
                why = explain_stop(
                    stop, controller.budget, controller.usage, controller.root_problem()
                )
                on_note(f"nothing to do: {why}")
        else:
            controller.start()
    except BaseException:
        if pool is not None:
            pool.close(kill=True)
        raise
    # scoring.order auto: failing-first screens in a repair search (its root fails tests) whose
    # policy seldom builds on a screened-out candidate (policies.SCREENED_BY_DEFAULT).
    g = controller.graph
    repair = g is not None and is_repair(g.nodes[G.root_of(g)].get("tests"))
    scorer.repair = repair and cfg.search.policy in SCREENED_BY_DEFAULT
    done = controller.usage.expansions
    try:
        result = controller.run()
    except BaseException:
        run.close()
        try_write_report(run.path, store)  # the graph so far; the error itself goes on up
        raise
    finally:
        if pool is not None:
            pool.close()
            scorer.warm.warm_runs += pool.warm_runs  # summary.json counts the workers' runs
            scorer.warm.cold_runs += pool.cold_runs
            scorer.warm.servers_started += pool.warm_servers
        run.close()
    if events and stop is None and on_note is not None and result.usage.expansions == done:
        why = explain_stop(result.stop_reason, controller.budget, result.usage, result.stop_detail)
        on_note(f"nothing to do: {why}")
    sink.hold()  # (the session files of the last expansions, aborted ones too)
    if judge is not None:
        judge.close()
    return _finish(
        loaded, run, store, scorer, result, time.perf_counter() - t0, isolation, judge=judge
    )


def _warm_copy(scorer: Scorer, workspace: Path) -> WarmClone | None:
    """A copy of the search's warm test server for a worker (``WorkerPool.warm_source``): the
    one the root's test started, or one started now (a resumed search; a root from the score
    cache), so that the workers start none of their own."""
    spec = scorer.search_spec
    if spec is None:
        return None
    try:
        copy = warm_clone(spec, workspace, scorer.warm)
        if copy is None:
            warm_up(spec, workspace, scorer.warm)
            copy = warm_clone(spec, workspace, scorer.warm)
    except ScoringError:
        return None
    return copy


def _worker_pool(
    loaded: LoadedConfig, store: ShadowStore, scorer: Scorer, isolation: Isolation
) -> WorkerPool | None:
    """The worker processes of ``search.workers > 1`` (``None``: one expansion at a time)."""
    cfg = loaded.config
    if cfg.search.workers <= 1:
        return None
    spec = WorkerSpec(
        view=worker_view(store),
        scoring=cfg.scoring,
        source=loaded.source,
        score_cache=str(scorer.cache.path) if scorer.cache is not None else None,
        agent_cache=str(store.path.parent / "agent-cache"),
        isolation=isolation,
        agents={
            kind: entry
            for kind in sorted({str(agent_config(s)["kind"]) for s in cfg.strategies.values()})
            if (entry := agent_entry(kind)) is not None
        },
        warm_copies=parallel.WARM_COPIES,
    )
    return WorkerPool(cfg.search.workers, spec, store)


def _isolation(loaded: LoadedConfig) -> Isolation:
    """How agent commands will be confined (``sandbox`` section); ``SandboxError`` when
    ``namespace`` is required and unavailable, or a ``writable`` folder is missing."""
    cfg = loaded.config.sandbox
    writable = [str(_abs(loaded, p)) for p in cfg.writable]
    return resolve_isolation(cfg.isolation, network=cfg.network, writable=writable)


def _abs(loaded: LoadedConfig, path: str) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else (loaded.base_dir / p).resolve()


def _finish(
    loaded: LoadedConfig,
    run: RunDir,
    store: ShadowStore,
    scorer: Scorer,
    result: SearchResult,
    seconds: float,
    isolation: Isolation = NO_ISOLATION,
    *,
    judge: ValueJudge | None = None,
) -> SearchOutcome:
    cfg = loaded.config
    g = result.graph
    root = G.root_of(g)
    best = result.best
    patch = store.diff(root, best).patch if best != root else ""
    run.write_text("best.patch", patch)
    run.write_jsonl(
        "predictions.jsonl",
        [
            {
                "instance_id": cfg.output.instance_id,
                "model_name_or_path": cfg.output.model_name,
                "model_patch": patch,
            }
        ],
    )
    grade = None
    if cfg.scoring.grade_tests is not None and not result.interrupted:
        # In a fresh copy of the best tree plus the held-out files: never in the workspace.
        files = check_grade_files(
            getattr(cfg.scoring, "grade_files", None), loaded.source, loaded.base_dir, None
        )
        grade = grade_in_copy(scorer, store, best, files, name=store.workspace.name)
    run.write_text("graph.json", G.to_json(g))
    path = G.path_to(g, best)
    timings = result.timings
    overhead = {
        key: (sum(getattr(t, key) for t in timings) / len(timings)) if timings else 0.0
        for key in ("restore", "agent", "capture", "score", "bookkeeping")
    }
    summary = {
        "run_id": run.path.name,
        "status": "interrupted" if result.interrupted else "finished",
        "stop_reason": result.stop_reason,
        "stop_detail": result.stop_detail,
        "workspace": str(store.workspace),
        "store": str(store.path),
        "policy": cfg.search.policy,
        "seed": cfg.search.seed,
        "best": {
            "tree": best,
            "commit": g.nodes[best].get("commit"),
            "score": result.best_score,
            "tests": g.nodes[best].get("tests"),
            "depth": g.nodes[best]["depth"],
            "path": [g.edges[a, b]["strategy"] for a, b in zip(path, path[1:], strict=False)],
        },
        "root": {"tree": root, "score": g.nodes[root].get("score")},
        "grade": grade.to_dict() if grade is not None else None,
        "usage": result.usage.to_dict(),
        "budget": cfg.search.budget.model_dump(),
        "nodes": g.number_of_nodes(),
        "edges": g.number_of_edges(),
        "noops": sum(len(d["noops"]) for _, d in g.nodes(data=True)),
        "agent_errors": agent_errors(g),
        "scoring_order": {  # failing tests first: what was in force, and how many nodes it left
            "order": cfg.scoring.order,
            "repair_search": is_repair(g.nodes[root].get("tests")),
            "screened": screens(scorer),
            "partial_nodes": sum(1 for _, d in g.nodes(data=True) if d.get("partial")),
            # partial nodes a policy chose, whose whole suite then ran (``completed`` events)
            "completed_nodes": sum(1 for e in run.events().events if e["event"] == "completed"),
        },
        "isolation": isolation.describe(),
        "warm": scorer.warm.describe(),
        "seconds": round(seconds, 3),
        "mean_seconds_per_expansion": {k: round(v, 4) for k, v in overhead.items()},
    }
    if cfg.workspace.source is not None:
        summary["workspace_copy"] = copy_note(store.workspace, cfg.workspace.source)
    if judge is not None:  # scoring.judge: its calls and failures (a failure is never a 0)
        summary["judge"] = judge.describe()
    record = loaded.reproduction
    if record is not None:  # search.reproduce: what steered the search beside the tests
        summary["reproduce"] = {**record.to_json(), "no_signal": not record.kept}
    run.write_json("summary.json", summary)
    run.append(
        {
            "event": "interrupted" if result.interrupted else "finished",
            "best": best,
            "score": result.best_score,
            "reason": result.stop_reason,
            "time": time.time(),
            "elapsed": round(result.usage.wall_seconds, 3),
        }
    )
    run.close()
    warning = try_write_report(run.path, store)
    if warning is not None:  # said on the terminal and in summary.json; the result stands
        summary.setdefault("warnings", []).append(warning)
        run.write_json("summary.json", summary)
    return SearchOutcome(
        run.path,
        store.workspace,
        best,
        result.best_score,
        g,
        result.usage,
        result.stop_reason,
        grade,
        patch,
        summary,
        result.interrupted,
        result.timings,
        result.stop_detail,
    )


def agent_errors(g: nx.DiGraph) -> dict[str, Any]:
    """How many agent runs failed, counted by reason (one line each); how many of them left no
    new state (``error`` edges); and whether every expansion was such an error (then nothing
    was searched: the CLI exits non-zero)."""
    runs = G.expansions(g)
    failed = [one_line(e.get("reason")) for e in runs if e.get("status") == "failed"]
    empty = sum(len(d.get("errors", [])) for _, d in g.nodes(data=True))
    by_reason: dict[str, int] = {}
    for reason in failed:
        by_reason[reason] = by_reason.get(reason, 0) + 1
    return {
        "count": len(failed),
        "without_new_state": empty,
        "expansions": len(runs),
        "every_expansion_failed": bool(runs) and empty == len(runs),
        "by_reason": dict(sorted(by_reason.items(), key=lambda kv: (-kv[1], kv[0]))),
    }


def load_run_graph(run_dir: Path) -> tuple[RunDir, nx.DiGraph, dict[str, Any]]:
    """A run's graph, rebuilt from its events (``graph.json`` may lag behind a crash)."""
    run = RunDir.open(Path(run_dir))
    g = replay(run.events().events).graph
    if g is None:
        raise RunError(f"{run_dir}: the run has no root node yet (it never got going)")
    summary: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        summary = json.loads((run.path / "summary.json").read_text())
    return run, g, summary


def resolve_node(g: nx.DiGraph, ref: str) -> str:
    """A node by tree-hash prefix, or ``#N`` for the N-th node found (0 = the root)."""
    if ref.startswith("#") and ref[1:].isdigit():
        want = int(ref[1:])
        for n, d in g.nodes(data=True):
            if d["order"] == want:
                return str(n)
        raise RunError(f"no node #{want}: the run has {g.number_of_nodes()} nodes (#0..)")
    hits = [n for n in g.nodes if str(n).startswith(ref.lower())]
    if len(hits) == 1:
        return str(hits[0])
    if not hits:
        raise RunError(
            f"no node matches {ref!r}: give a tree-hash prefix or #N (see `treesearch show`)"
        )
    raise RunError(f"{ref!r} matches {len(hits)} nodes: give more characters")


def checkout(
    run_dir: Path, ref: str, *, home: Path | None = None, watch: bool = True
) -> tuple[str, Any, Path]:
    """Restore node ``ref`` of a run into the run's workspace.

    Returns (tree, RestoreResult, workspace); ``store.undo()`` goes back. ``home``, ``watch``: as
    for ``resume``."""
    run, g, _ = load_run_graph(run_dir)
    node = resolve_node(g, ref)
    loaded = validate(run.config(), source=str(run.path / "config.yaml"), base_dir=run.path)
    store = _open_store(loaded, home=home, watch=watch)
    store.fixed_dates = False  # the safety snapshot is the user's: dated by the clock
    return node, store.restore(node), store.workspace


def _yaml(data: Any) -> str:
    import yaml

    return str(yaml.safe_dump(data, sort_keys=False))
