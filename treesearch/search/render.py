"""Text and file renderings of a search graph (no printing: callers print the strings)."""

from __future__ import annotations

import json
from typing import Any

import networkx as nx

from treesearch.search.graph import best_node, path_to, root_of


def tree_text(g: nx.DiGraph, *, max_nodes: int = 400) -> str:
    """The search tree, one node per line: order, tree hash, score, visits, strategy.

    The best path is marked with ``*``; a node reached again through another parent (a
    transposition) is shown once and referred to afterwards.
    """
    root = root_of(g)
    best = best_node(g)
    on_best = set(path_to(g, best))
    lines: list[str] = []
    seen: set[str] = set()

    def label(n: str, strategy: str | None) -> str:
        d = g.nodes[n]
        score = "  -  " if d.get("score") is None else f"{d['score']:.3f}"
        known = partial_marks(d)
        if known is not None and d.get("score") is not None:
            score = f"{_range(d)} ({partial_text(known)})"
        mark = "*" if n in on_best else " "
        noops = f"  ({len(d['noops'])} no-op)" if d["noops"] else ""
        if d.get("errors"):
            noops += f"  ({len(d['errors'])} error)"
        via = f"{strategy}  " if strategy else ""
        tests = d.get("tests", {}).get("summary", "")
        if known is not None:  # said in full after the score
            tests = tests.split("; partial:")[0]
        return (
            f"{mark} #{d['order']:<3} {n[:10]}  score {score}  visits {d['visits']:<3} "
            f"{via}[{tests}]{noops}"
        )

    def walk(n: str, prefix: str, strategy: str | None, last: bool, top: bool) -> None:
        if len(lines) >= max_nodes:
            return
        branch = "" if top else ("└─ " if last else "├─ ")
        if n in seen:
            d = g.nodes[n]
            lines.append(
                f"{prefix}{branch}  -> #{d['order']} {n[:10]} via {strategy} (same state as above)"
            )
            return
        seen.add(n)
        lines.append(prefix + branch + label(n, strategy))
        kids = sorted(g.successors(n), key=lambda k: g.nodes[k]["order"])
        child_prefix = prefix if top else prefix + ("   " if last else "│  ")
        errors: dict[tuple[str, str], int] = {}
        for e in g.nodes[n].get("errors", []):
            key = (str(e.get("strategy")), " ".join(str(e.get("reason") or "?").split())[:160])
            errors[key] = errors.get(key, 0) + 1
        for (via, reason), count in errors.items():
            times = f" x{count}" if count > 1 else ""
            lines.append(
                f"{child_prefix}{'│  ' if kids else '   '}! error{times} via {via}: {reason}"
            )
        for i, k in enumerate(kids):
            walk(k, child_prefix, g.edges[n, k]["strategy"], i == len(kids) - 1, False)

    walk(root, "", None, True, True)
    if len(lines) >= max_nodes:
        lines.append(f"... ({g.number_of_nodes()} nodes in all; see `treesearch export`)")
    lines.append("(* marks the path to the best node)")
    if any(partial_marks(d) is not None for _, d in g.nodes(data=True)):
        lines.append(
            "(a..b marks a partial score: a failing-first screen stopped early; a counts the "
            "tests not run as failed, b as passed, and the search ranks the node by b until it "
            "completes its run)"
        )
    return "\n".join(lines)


def partial_marks(d: dict[str, Any]) -> dict[str, int] | None:
    """What is known of a node scored by a failing-first screen alone (``partial``): its known
    passes and failures and the tests not run; ``None`` for a fully run node. Its score is
    only a lower bound (the tests not run count as failed)."""
    tests = d.get("tests") or {}
    if not (d.get("partial") or tests.get("partial")):
        return None
    return {k: int(tests.get(k) or 0) for k in ("known_passed", "known_failed", "not_run")}


def _range(d: dict[str, Any]) -> str:
    """A partial node's score: ``lower..upper`` (``>=lower`` when the run recorded no bound)."""
    low = f"{d['score']:.3f}"
    bound = d.get("bound", (d.get("tests") or {}).get("upper"))
    return f">={low}" if bound is None else f"{low}..{float(bound):.3f}"


def partial_text(known: dict[str, int]) -> str:
    """``partial: 2 passed, 1 failed known, 1 not run``."""
    return (
        f"partial: {known['known_passed']} passed, {known['known_failed']} failed known, "
        f"{known['not_run']} not run"
    )


def _flat(g: nx.DiGraph) -> nx.DiGraph:
    """A copy whose attributes are all scalars (GraphML cannot hold lists or dicts)."""
    h = nx.DiGraph()
    for n, d in g.nodes(data=True):
        h.add_node(n, **{k: _scalar(v) for k, v in d.items()})
    for a, b, d in g.edges(data=True):
        h.add_edge(a, b, **{k: _scalar(v) for k, v in d.items()})
    return h


def _scalar(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, (bool, int, float, str)):
        return v
    return json.dumps(v, sort_keys=True)


def export(g: nx.DiGraph, fmt: str) -> str:
    """``graphml``, ``dot`` or ``json`` (networkx node-link data)."""
    if fmt == "json":
        from treesearch.search.graph import to_json

        return to_json(g)
    if fmt == "graphml":
        return "\n".join(nx.generate_graphml(_flat(g))) + "\n"
    if fmt == "dot":
        best = set(path_to(g, best_node(g)))
        out = ["digraph search {", "  node [shape=box, fontname=monospace];"]
        for n, d in sorted(g.nodes(data=True), key=lambda x: x[1]["order"]):
            score = "-" if d.get("score") is None else f"{d['score']:.3f}"
            if score != "-" and partial_marks(d) is not None:
                score = f"{_range(d)} (partial)"
            style = ', style=bold, color="darkgreen"' if n in best else ""
            out.append(f'  "{n}" [label="#{d["order"]} {n[:8]}\\nscore {score}"{style}];')
        for a, b, d in g.edges(data=True):
            out.append(f'  "{a}" -> "{b}" [label="{_dot_escape(str(d.get("strategy")))}"];')
        out.append("}")
        return "\n".join(out) + "\n"
    raise ValueError(f"unknown export format {fmt!r}: use graphml, dot or json")


def _dot_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def expansion_result(outcome: str, score: str, status: str | None, reason: str | None) -> str:
    """What the progress line says about one expansion: ``new 0.50``, ``error: <reason>``, or
    ``new 0.50 (agent failed: <reason>)`` for a failed run that kept steps."""
    why = " ".join(str(reason or "unknown error").split())[:120]
    if outcome == "error":
        return f"error: {why}"
    if status == "failed":
        return f"{outcome} {score} (agent failed: {why})"
    return f"{outcome} {score}"


def agent_lines(summary: dict[str, Any]) -> list[str]:
    """End-of-run lines from ``summary.json``: why the search stopped (when the reason alone
    does not say), which isolation agent commands had, and the agent errors by reason."""
    lines = []
    if summary.get("stop_detail"):
        lines.append(f"  {summary['stop_detail']}")
    iso = summary.get("isolation") or {}
    if iso.get("mechanism") not in (None, "none"):
        net = "network allowed" if iso.get("network") else "no network"
        lines.append(
            f"agent commands: isolated ({iso['mechanism']}: workspace only writable, {net})"
        )
    elif iso:
        lines.append(
            f"agent commands: not isolated ({iso.get('note') or 'sandbox.isolation: none'})"
        )
    errors = summary.get("agent_errors") or {}
    if errors.get("count"):
        lines.append(
            f"agent errors: {errors['count']} of {errors['expansions']} expansions failed:"
        )
        for reason, n in list(errors["by_reason"].items())[:5]:
            lines.append(f"  {n} x {reason[:200]}")
    return lines


def root_failure(summary: dict[str, Any], stop_reason: str) -> str | None:
    """Why a finished search searched nothing because its root could not be scored (the CLI
    exits 4), or ``None``."""
    if stop_reason != "root_invalid":
        return None
    return str(summary.get("stop_detail") or "the root's test run could not be scored")


def agent_failure(summary: dict[str, Any], stop_reason: str) -> str | None:
    """Why a finished search is not a search result (the CLI exits 3), or ``None``: every
    expansion failed with an agent error, or the search stopped on repeated agent errors."""
    errors = summary.get("agent_errors") or {}
    if errors.get("every_expansion_failed"):
        first = next(iter(errors.get("by_reason") or {}), "unknown error")
        return (
            f"every expansion failed with an agent error ({errors['count']} of "
            f"{errors['expansions']}; first: {first[:200]}); nothing was searched"
        )
    if stop_reason == "max_consecutive_errors":
        return f"the search stopped on repeated agent errors: {summary.get('stop_detail')}"
    return None
