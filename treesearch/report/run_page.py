"""A run's page: the search tree, what each node's tests said, its diffs, the transcripts.

The data come from the run directory (``events.jsonl`` rebuilt into the graph, ``summary.json``,
``timings.jsonl``, ``transcripts/``, ``tests/``) and the diffs from the run's store, through the
store's API (``ShadowStore.diff``): only ``store/`` runs git. When the store is gone (an eval's
instance ran in a scratch folder since removed), a page written earlier still holds the diffs:
they are taken from it; else the page says the diffs are unavailable, and why.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx

from treesearch.errors import TreesearchError
from treesearch.report.html import page_html, read_page_data, write_page
from treesearch.report.texts import (
    MAX_DIFF,
    MAX_LOG,
    MAX_TRANSCRIPT,
    Budget,
    cut,
    text_item,
)
from treesearch.runs import RunDir
from treesearch.search import graph as G
from treesearch.search.events import replay
from treesearch.search.render import partial_marks

__all__ = [
    "MAX_DIFF_NODES",
    "PAGE",
    "NoTreeYet",
    "open_run_store",
    "run_page_data",
    "write_run_page",
]

PAGE = "report.html"
MAX_DIFF_NODES = 600
"""Nodes whose diffs are embedded (best path first, then in the order found)."""
PHASES = ("restore", "agent", "capture", "score", "bookkeeping")


class NoTreeYet(TreesearchError):
    """The run has no root node yet: there is no tree to draw."""


PatchFn = Callable[[list[tuple[str, str]]], list[tuple[str, bool]]]
"""``(patch, truncated)`` for each pair of trees."""


def _store_patches(store: Any) -> PatchFn:
    from treesearch.store import patches

    return lambda pairs: patches(store, pairs, max_patch_bytes=MAX_DIFF)


def _diff_item(patch: str, truncated: bool) -> dict[str, Any] | None:
    note = f"cut at {MAX_DIFF:,} bytes" if truncated else None
    if not patch and not note:
        note = "no textual change (same files, or binary/mode changes only)"
    return text_item(patch, note)


def open_run_store(run_dir: Path) -> Any:
    """The store a run's ``config.yaml`` names, opened for reading diffs; raises
    ``TreesearchError`` when it (or its workspace) is gone."""
    from treesearch.store import ShadowStore

    cfg = RunDir.open(run_dir).config()
    ws = (cfg.get("workspace") or {}).get("path")
    home = (cfg.get("store") or {}).get("home")
    if not ws or not home:
        raise TreesearchError(f"{run_dir / 'config.yaml'} names no workspace or store home")
    return ShadowStore.open(ws, home=home, create=False, watch=False)


def _old_diffs(old: dict[str, Any]) -> tuple[dict[tuple[str, str], Any], dict[str, Any]]:
    edges = {(e.get("source"), e.get("target")): e.get("diff") for e in old.get("edges", [])}
    nodes = {n.get("id"): n.get("diff_root") for n in old.get("nodes", [])}
    return edges, nodes


def write_run_page(run_dir: Path, *, store: Any = None) -> tuple[Path, list[str]]:
    """Write ``report.html`` into run directory ``run_dir``; returns its path and notes (what
    the page could not show, e.g. diffs of a store that is gone). ``store``: the run's open
    store (else the one its config names is opened, when it still exists)."""
    run_dir = Path(run_dir)
    notes: list[str] = []
    diff_fn: PatchFn | None = None
    old = read_page_data(run_dir / PAGE)
    if store is not None:
        diff_fn = _store_patches(store)
    else:
        try:
            store = open_run_store(run_dir)
        except TreesearchError as exc:
            if old is None or not old.get("diffs_available"):
                notes.append(f"diffs unavailable: {exc}")
        else:
            diff_fn = _store_patches(store)
    try:
        data = run_page_data(run_dir, diff_fn, old=old if diff_fn is None else None)
    finally:
        if diff_fn is not None and store is not None:
            with contextlib.suppress(Exception):
                store.close()
    data["notes"] = notes + data["notes"]
    title = f"treesearch run {data['run_id']}"
    path = write_page(run_dir / PAGE, page_html("run", title, data))
    return path, data["notes"]


def run_page_data(
    run_dir: Path, diff: PatchFn | None, *, old: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Everything the run page shows, as plain JSON values."""
    run = RunDir.open(run_dir)
    g = replay(run.events().events).graph
    if g is None:
        raise NoTreeYet(f"{run_dir}: the run has no root node yet: no tree to draw")
    summary = _json(run_dir / "summary.json") or {}
    root = G.root_of(g)
    best = str((summary.get("best") or {}).get("tree") or G.best_node(g))
    if best not in g:
        best = G.best_node(g)
    best_path = G.path_to(g, best)
    budget = Budget()
    notes: list[str] = []
    old_edges, old_nodes = _old_diffs(old) if old else ({}, {})

    order = sorted(g.nodes, key=lambda n: (n not in best_path, g.nodes[n]["order"]))
    with_diffs = set(order[:MAX_DIFF_NODES])
    if len(order) > MAX_DIFF_NODES:
        notes.append(
            f"diffs are embedded for {MAX_DIFF_NODES} of {len(order)} nodes (the best path "
            "first, then in the order found); `treesearch checkout RUN NODE` shows any node"
        )

    fresh: dict[tuple[str, str], Any] = {}
    if diff is not None:  # every diff the page shows, from one git process
        pairs = [(a, b) for a, b in g.edges if b in with_diffs]
        pairs += [(root, n) for n in with_diffs if n != root]
        try:
            fresh = {p: _diff_item(*d) for p, d in zip(pairs, diff(pairs), strict=True)}
        except TreesearchError as exc:
            notes.append(f"diffs unavailable: {exc}")
            fresh = dict.fromkeys(pairs, text_item(None, f"diff failed: {exc}"))

    def get_diff(a: str, b: str, cached: Any) -> Any:
        if b not in with_diffs:
            return text_item(None, "not embedded (page limit)")
        return budget.take(cached if diff is None else fresh.get((a, b)))

    nodes: list[dict[str, Any]] = []
    for n in sorted(g.nodes, key=lambda n: g.nodes[n]["order"]):
        d = g.nodes[n]
        nodes.append(
            {
                "id": n,
                "order": d["order"],
                "score": d.get("score"),
                "visits": d.get("visits", 0),
                "value_sum": d.get("value_sum", 0.0),
                "depth": d.get("depth", 0),
                "diff_size": d.get("diff_size", 0),
                "commit": d.get("commit"),
                "tests": d.get("tests") or {},
                "partial": _partial(d),
                "tried": d.get("tried") or {},
                "noops": [_attempt(e) for e in d.get("noops", [])],
                "errors": [_attempt(e) for e in d.get("errors", [])],
                "layout_parent": _layout_parent(g, n),
                "diff_root": None if n == root else get_diff(root, n, old_nodes.get(n)),
                "test_log": budget.take(_test_log(run_dir, n)),
            }
        )
    edges: list[dict[str, Any]] = []
    for a, b, e in sorted(g.edges(data=True), key=lambda x: g.nodes[x[1]]["order"]):
        edges.append(
            {
                "source": a,
                "target": b,
                "tree": _layout_parent(g, b) == a,
                **_attempt(e),
                "also": [_attempt(x) for x in e.get("also", [])],
                "transcript_text": budget.take(_transcript(run_dir, e.get("transcript"))),
                "diff": get_diff(a, b, old_edges.get((a, b))),
            }
        )
    if budget.refused:
        notes.append(f"{budget.refused} texts were left out: the page's size limit was reached")
    notes.extend(_steering_notes(summary))
    return {
        "kind": "run",
        "run_id": run_dir.name,
        "status": summary.get("status") or _status_from_events(run),
        "stop_reason": summary.get("stop_reason"),
        "stop_detail": summary.get("stop_detail"),
        "policy": summary.get("policy") or (run.config().get("search") or {}).get("policy"),
        "seed": summary.get("seed"),
        "usage": summary.get("usage") or {},
        "budget": summary.get("budget") or (run.config().get("search") or {}).get("budget") or {},
        "seconds": summary.get("seconds"),
        "grade": summary.get("grade"),
        "isolation": summary.get("isolation"),
        "agent_errors": summary.get("agent_errors"),
        "warnings": summary.get("warnings") or [],
        "phases": _phases(run_dir),
        "root": root,
        "best": best,
        "best_score": g.nodes[best].get("score"),
        "best_path": best_path,
        "nodes": nodes,
        "edges": edges,
        "diffs_available": diff is not None or bool(old and old.get("diffs_available")),
        "notes": notes,
    }


def _steering_notes(summary: dict[str, Any]) -> list[str]:
    """What steered the search beside its tests: the reproduction tests (``search.reproduce``)
    it kept and dropped, and the value judge (``scoring.judge``) with its failures."""
    out: list[str] = []
    repro = summary.get("reproduce")
    if repro is not None:
        kept = ", ".join(str(k.get("from")) for k in repro.get("kept", []))
        dropped = "; ".join(
            f"{d.get('from') or 'attempt ' + str(d.get('attempt'))}: {d.get('reason')}"
            for d in repro.get("dropped", [])
        )
        out.append(
            "reproduction tests that steered this search: "
            + (kept or "none (no signal from them)")
            + (f"; dropped: {dropped}" if dropped else "")
        )
    judge = summary.get("judge")
    if judge is not None:
        out.append(
            f"value judge {judge.get('model')} ({judge.get('combine')}): "
            f"{judge.get('calls')} states judged, {judge.get('errors')} verdict(s) failed"
        )
    return out


def _attempt(e: dict[str, Any]) -> dict[str, Any]:
    keys = ("strategy", "status", "reason", "steps", "tokens", "diffstat", "transcript", "to")
    out = {k: e.get(k) for k in keys if k in e}
    if out.get("reason") is not None:
        out["reason"] = cut(str(out["reason"]), 2000)[0]
    return out


def _partial(d: dict[str, Any]) -> dict[str, Any] | None:
    """For a node scored by a failing-first screen alone: its known passes and failures, the
    tests not run and why the screen stopped (its score is a lower bound); else ``None``."""
    known = partial_marks(d)
    if known is None:
        return None
    tests = d.get("tests") or {}
    upper = d.get("bound", tests.get("upper"))
    return {
        **known,
        "reason": str(tests.get("partial_reason") or ""),
        "upper": None if upper is None else float(upper),
    }


def _layout_parent(g: nx.DiGraph, n: str) -> str | None:
    """The parent a node hangs under in the drawing: the one on its shortest path from the
    root (its other parents are transpositions, drawn as extra edges)."""
    preds = sorted(g.predecessors(n), key=lambda p: (g.nodes[p]["depth"], g.nodes[p]["order"]))
    return str(preds[0]) if preds else None


def _json(path: Path) -> Any:
    with contextlib.suppress(OSError, ValueError):
        return json.loads(path.read_text(encoding="utf-8"))
    return None


def _status_from_events(run: RunDir) -> str:
    kinds = [e.get("event") for e in run.events().events]
    for kind in reversed(kinds):
        if kind in ("finished", "interrupted"):
            return str(kind)
    return "incomplete (no finished event: still running, or killed)"


def _test_log(run_dir: Path, tree: str) -> dict[str, Any] | None:
    path = run_dir / "tests" / f"{tree[:12]}.log"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return text_item(*cut(text, MAX_LOG, tail=True))


def _transcript(run_dir: Path, rel: str | None) -> dict[str, Any] | None:
    """The agent's transcript of one expansion: its result file (status, cost, steps) and, where
    the session persisted itself, the conversation (``<name>.session.jsonl``)."""
    if not rel:
        return None
    path = run_dir / rel
    parts: list[str] = []
    data = _json(path)
    if data is None:
        return text_item(None, f"{rel} is missing or unreadable")
    head = {k: data.get(k) for k in ("status", "reason", "steps", "cost") if k in data}
    parts.append(json.dumps(head, indent=1, sort_keys=True, default=str))
    for i, entry in enumerate(data.get("transcript") or []):
        parts.append(f"--- entry {i}\n" + json.dumps(entry, indent=1, sort_keys=True, default=str))
    session = path.with_name(path.name.removesuffix(".json") + ".session.jsonl")
    messages = _session_messages(session)
    if messages:
        parts.append("=== conversation (" + session.name + ")\n" + messages)
    text, note = cut("\n".join(parts), MAX_TRANSCRIPT)
    return text_item(text, note)


def _session_messages(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    out: list[str] = []
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        msgs = [rec["message"]] if rec.get("type") == "message" else rec.get("messages") or []
        for m in msgs:
            if not isinstance(m, dict):
                continue
            content = m.get("content")
            calls = m.get("tool_calls") or []
            text = content if isinstance(content, str) else json.dumps(content, default=str)
            if calls:
                text = (text if content else "") + "".join(
                    f"\n  call {(c.get('function') or {}).get('name')}: "
                    f"{(c.get('function') or {}).get('arguments')}"
                    for c in calls
                    if isinstance(c, dict)
                )
            out.append(f"[{m.get('role')}] {text}")
    return "\n".join(out)


def _phases(run_dir: Path) -> dict[str, Any]:
    """Seconds per phase, summed over ``timings.jsonl`` (every expansion of every process, and
    every completed run of a partial node: its restore and score)."""
    totals = dict.fromkeys(PHASES, 0.0)
    count = 0
    try:
        lines = (run_dir / "timings.jsonl").read_text(encoding="utf-8").splitlines()
    except OSError:
        return {"seconds": totals, "expansions": 0, "source": None}
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        count += 0 if "completed" in rec else 1
        for k in PHASES:
            totals[k] += float(rec.get(f"{k}_seconds") or 0.0)
    return {
        "seconds": {k: round(v, 4) for k, v in totals.items()},
        "expansions": count,
        "source": "timings.jsonl",
    }
