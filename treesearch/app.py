"""Putting a search together from its config: store, scorer, strategies, policy, run directory.

``run_from_config`` starts a search, ``resume`` continues one from its run directory (the event log
is the source of truth), ``checkout`` puts any node of a run back into its workspace. The CLI is a
thin layer over these; tests and scripts call them directly.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from treesearch.agents import build_agent
from treesearch.config import (
    LoadedConfig,
    agent_config,
    apply_overrides,
    validate,
)
from treesearch.errors import RunError
from treesearch.runs import RunDir, new_run_id
from treesearch.scoring import ScoreCache, Scorer
from treesearch.scoring.heldout import check_grade_files, grade_in_copy
from treesearch.search import graph as G
from treesearch.search.budget import Budget, Usage
from treesearch.search.controller import Controller, SearchResult, Strategy
from treesearch.search.policies import make_policy
from treesearch.store import ShadowStore

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


ProgressFn = Callable[[dict[str, Any]], None]


def run_from_config(
    config: Mapping[str, Any] | LoadedConfig,
    *,
    base_dir: Path | None = None,
    runs_dir: Path | None = None,
    source: str = "<config>",
    on_progress: ProgressFn | None = None,
    on_start: Callable[[RunDir, Path], None] | None = None,
) -> SearchOutcome:
    """Start a new search. ``config`` is a mapping (as YAML gives) or a loaded config."""
    if isinstance(config, LoadedConfig):
        loaded = config
    else:
        loaded = validate(config, source=source, base_dir=(base_dir or Path.cwd()).resolve())
    cfg = loaded.config
    original = loaded.workspace_path()
    if not original.is_dir():
        raise RunError(f"{loaded.source}: workspace.path: {original} is not a folder")
    workspace = original
    if cfg.workspace.copy_:
        tmp = Path(tempfile.mkdtemp(prefix="treesearch-"))
        workspace = tmp / original.name
        shutil.copytree(original, workspace, symlinks=True)
    resolved = json.loads(json.dumps(loaded.raw, default=str))
    resolved["workspace"] = {"path": str(workspace), "copy": False}
    if cfg.workspace.copy_:
        resolved["workspace"]["source"] = str(original)
    if cfg.store.home is not None:
        home = Path(cfg.store.home).expanduser()
        resolved.setdefault("store", {})["home"] = str(
            home if home.is_absolute() else (loaded.base_dir / home).resolve()
        )
    grade_files = getattr(cfg.scoring, "grade_files", None)
    if grade_files is not None:
        checked = check_grade_files(grade_files, loaded.source, loaded.base_dir, original)
        resolved["scoring"]["grade_files"] = {k: str(v) for k, v in checked.items()}
    run_id = cfg.output.run_id or new_run_id(cfg.output.instance_id)
    root_runs = runs_dir or Path(cfg.output.runs_dir)
    run = RunDir.create(root_runs.resolve(), run_id, resolved)
    run.append(
        {
            "event": "run_started",
            "run_id": run_id,
            "seed": cfg.search.seed,
            "policy": cfg.search.policy,
            "time": time.time(),
        }
    )
    if on_start is not None:
        on_start(run, workspace)
    loaded_resolved = validate(resolved, source=str(run.path / "config.yaml"), base_dir=run.path)
    return _search(loaded_resolved, run, [], on_progress)


def resume(
    run_dir: Path, overrides: Sequence[str] = (), on_progress: ProgressFn | None = None
) -> SearchOutcome:
    """Continue a search from its run directory (after a crash, Ctrl-C, or to spend more budget).

    The graph is rebuilt from ``events.jsonl``; an expansion that was cut short is done again,
    so the search reaches the same nodes as one that was never interrupted.
    """
    run = RunDir.open(Path(run_dir))
    raw = run.config()
    if overrides:
        raw = apply_overrides(raw, overrides)
        run.write_text("config.yaml", _yaml(raw))
    loaded = validate(raw, source=str(run.path / "config.yaml"), base_dir=run.path)
    log = run.events()
    events = [e for e in log.events if e["event"] in ("root", "expansion")]
    return _search(loaded, run, events, on_progress)


def _open_store(loaded: LoadedConfig) -> ShadowStore:
    cfg = loaded.config
    return ShadowStore.open(
        loaded.workspace_path(),
        home=cfg.store.home,
        excludes=cfg.store.excludes,
        respect_gitignore=cfg.store.respect_gitignore,
        max_file_bytes=cfg.store.max_file_bytes,
    )


def _search(
    loaded: LoadedConfig, run: RunDir, events: list[dict[str, Any]], on_progress: ProgressFn | None
) -> SearchOutcome:
    cfg = loaded.config
    store = _open_store(loaded)
    scorer = Scorer.from_config(
        cfg.scoring.model_dump(),
        loaded.source,
        where="scoring",
        cache=ScoreCache(store.path / "scores.sqlite"),
    )
    strategies = {
        name: Strategy(
            name,
            agent_config(s),
            max_steps=int(s.get("max_steps", cfg.search.steps)),
            timeout=float(s.get("timeout", cfg.search.agent_timeout)),
            samples=int(s.get("samples", 1)),
        )
        for name, s in cfg.strategies.items()
    }
    controller = Controller(
        store=store,
        strategies=strategies,
        make_agent=lambda st: build_agent(st.agent),
        scorer=scorer,
        policy=make_policy(cfg.search.policy, **cfg.search.params),
        budget=Budget(**cfg.search.budget.model_dump()),
        seed=cfg.search.seed,
        task=cfg.task,
        stop_on_perfect=cfg.search.stop_on_perfect,
        emit=run.append,
        transcripts=run.path / "transcripts",
        on_progress=on_progress,
    )
    t0 = time.perf_counter()
    if events:
        controller.replay(events)
        run.append(
            {"event": "resumed", "time": time.time(), "expansions": controller.usage.expansions}
        )
    else:
        controller.start()
    try:
        result = controller.run()
    finally:
        run.close()
    return _finish(loaded, run, store, scorer, result, time.perf_counter() - t0)


def _finish(
    loaded: LoadedConfig,
    run: RunDir,
    store: ShadowStore,
    scorer: Scorer,
    result: SearchResult,
    seconds: float,
) -> SearchOutcome:
    cfg = loaded.config
    g = result.graph
    root = G.root_of(g)
    best = result.best
    store.pin(best, f"run-{run.path.name}")
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
        "workspace": str(store.workspace),
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
        "seconds": round(seconds, 3),
        "mean_seconds_per_expansion": {k: round(v, 4) for k, v in overhead.items()},
    }
    run.write_json("summary.json", summary)
    run.append(
        {
            "event": "interrupted" if result.interrupted else "finished",
            "best": best,
            "score": result.best_score,
            "reason": result.stop_reason,
            "time": time.time(),
        }
    )
    run.close()
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
    )


def load_run_graph(run_dir: Path) -> tuple[RunDir, nx.DiGraph, dict[str, Any]]:
    """A run's graph, rebuilt from its events (``graph.json`` may lag behind a crash)."""
    run = RunDir.open(Path(run_dir))
    events = [e for e in run.events().events if e["event"] in ("root", "expansion")]
    if not events:
        raise RunError(f"{run_dir}: the run has no root node yet (it never got going)")
    usage = Usage()
    from treesearch.search.controller import apply_event

    g = G.new_graph(
        events[0]["tree"],
        commit=events[0]["commit"],
        score=events[0]["score"],
        tests=events[0]["tests"],
    )
    for ev in events[1:]:
        apply_event(g, ev, usage)
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


def checkout(run_dir: Path, ref: str) -> tuple[str, Any, Path]:
    """Restore node ``ref`` of a run into the run's workspace.

    Returns (tree, RestoreResult, workspace); ``store.undo()`` goes back."""
    run, g, _ = load_run_graph(run_dir)
    node = resolve_node(g, ref)
    loaded = validate(run.config(), source=str(run.path / "config.yaml"), base_dir=run.path)
    store = _open_store(loaded)
    return node, store.restore(node), store.workspace


def _yaml(data: Any) -> str:
    import yaml

    return str(yaml.safe_dump(data, sort_keys=False))
