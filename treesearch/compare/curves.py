"""Anytime curves, read from the runs' ``events.jsonl``.

For each run: the test runs, tokens and USD spent up to and including the event that first
produced a plausible node (a node whose score is perfect: every search test passes), counted
cumulatively from the root. A search that stops at its first plausible node (``stop_on_perfect``,
the default) and whose policy does not look at the budget left (none here does) spends its first
``b`` test runs exactly as a search with budget ``b`` would: it is solved at budget ``b`` exactly
when that count is ``<= b``. So one run at the largest budget gives every smaller one.

A curve is the fraction of instances solved as a function of what was spent; with several seeds
an instance counts as the fraction of its seeds solved by then.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from treesearch.errors import RunError
from treesearch.runs import read_events

__all__ = ["FirstPlausible", "curve", "first_plausible"]

PERFECT = 1.0


@dataclass(frozen=True)
class FirstPlausible:
    """Spent until the first plausible node (cumulative from the root's test run)."""

    test_runs: int
    tokens: int
    usd: float


def first_plausible(run_dir: Path) -> FirstPlausible | None:
    """What the run had spent when its first plausible node appeared (``None``: never).

    Raises ``RunError`` when the run directory has no readable events."""
    log = read_events(run_dir / "events.jsonl")
    runs = tokens = 0
    usd = 0.0
    for ev in log.events:
        kind = ev.get("event")
        if kind == "root":
            runs += int(ev.get("test_runs", 0) or 0)
            if _perfect(ev.get("score")):
                return FirstPlausible(runs, tokens, round(usd, 6))
        elif kind == "expansion":
            runs += int(ev.get("test_runs", 0) or 0)
            tokens += int(ev.get("tokens", 0) or 0)
            cost = (ev.get("edge") or {}).get("cost") or {}
            if isinstance(cost, dict):
                usd += float(cost.get("usd") or cost.get("cost_usd") or 0.0)
            node = ev.get("node") or {}
            if isinstance(node, dict) and _perfect(node.get("score")):
                return FirstPlausible(runs, tokens, round(usd, 6))
        elif kind == "completed":  # the whole run of a node a screen had left partial
            runs += int(ev.get("test_runs", 0) or 0)
    return None


def _perfect(score: Any) -> bool:
    return isinstance(score, (int, float)) and not isinstance(score, bool) and score >= PERFECT


def curve(
    points: Mapping[str, Sequence[float | None]], instances: Iterable[str], end: float
) -> list[list[float]]:
    """The step curve ``[[x, fraction], ...]`` from 0 to ``end``.

    ``points[instance]`` lists, per seed, what was spent when that run was solved (``None``: not
    solved); an instance weighs 1/len(instances), a seed 1/its number of seeds. There is one
    point at 0, one at every x where the fraction rises, and one at ``end``."""
    ids = list(instances)
    if not ids:
        return []
    steps: dict[float, float] = {}
    for iid in ids:
        runs = points.get(iid) or []
        if not runs:
            continue
        for x in runs:
            if x is not None:
                steps[x] = steps.get(x, 0.0) + 1.0 / (len(ids) * len(runs))
    out = [[0.0, round(steps.pop(0.0, 0.0) + steps.pop(0, 0.0), 6)]]
    total = out[0][1]
    for x in sorted(steps):
        total += steps[x]
        out.append([x, round(total, 6)])
    if out[-1][0] < end:
        out.append([end, out[-1][1]])
    return [[_num(x), y] for x, y in out]


def _num(x: float) -> float:
    return int(x) if float(x).is_integer() else x


def safe_first_plausible(run_dir: Path) -> tuple[FirstPlausible | None, str | None]:
    """``first_plausible`` and, instead of raising, the reason its events could not be read."""
    try:
        return first_plausible(run_dir), None
    except RunError as exc:
        return None, str(exc)
