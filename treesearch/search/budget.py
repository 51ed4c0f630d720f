"""Search budgets: what may be spent, what was spent, and which limit stopped the search."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Budget:
    """Limits of one search (``None``: no limit)."""

    expansions: int | None = 20
    """Agent runs (expansions), no-ops included."""
    test_runs: int | None = None
    """Test-suite runs actually executed (cache hits are free)."""
    wall_seconds: float | None = None
    """Wall-clock seconds of the search from its start (the root's test run included): the
    agents' and test runs' timeouts are clipped to what is left. Across resumes, each process
    adds its own elapsed time to what the earlier ones recorded (every event and each process's
    end carry it; after a crash the time since the last event is not counted)."""
    tokens: int | None = None
    """Model tokens (input + output) reported by agents."""
    max_depth: int | None = None
    """Deepest node that may be expanded further (the root is depth 0)."""


@dataclass
class Usage:
    """What a search has spent so far."""

    expansions: int = 0
    test_runs: int = 0
    cache_hits: int = 0
    wall_seconds: float = 0.0
    """Elapsed wall-clock seconds of the search (see ``Budget.wall_seconds``)."""
    tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def exhausted(budget: Budget, used: Usage) -> str | None:
    """The name of the first limit reached, or ``None``."""
    if budget.expansions is not None and used.expansions >= budget.expansions:
        return "expansions"
    if budget.test_runs is not None and used.test_runs >= budget.test_runs:
        return "test_runs"
    if budget.wall_seconds is not None and used.wall_seconds >= budget.wall_seconds:
        return "wall_seconds"
    if budget.tokens is not None and used.tokens >= budget.tokens:
        return "tokens"
    return None


def remaining(budget: Budget, used: Usage) -> dict[str, float | None]:
    """What is left of each limit (``None``: unlimited)."""

    def left(limit: float | None, spent: float) -> float | None:
        return None if limit is None else max(limit - spent, 0)

    return {
        "expansions": left(budget.expansions, used.expansions),
        "test_runs": left(budget.test_runs, used.test_runs),
        "wall_seconds": left(budget.wall_seconds, used.wall_seconds),
        "tokens": left(budget.tokens, used.tokens),
    }


def explain_stop(reason: str, budget: Budget, used: Usage, detail: str | None = None) -> str:
    """Why a search stopped (or has nothing left to do), and the setting that would let it go
    on: one line for the terminal. ``detail``: the search's own line on it (``stop_detail``),
    said for reasons that no setting explains (``root_invalid``)."""
    key = f"search.budget.{reason}"
    if reason == "root_invalid":
        return detail or (
            "the root's test run could not be scored (see its test log); nothing can be "
            "scored: fix scoring.search_tests and start a new run"
        )
    if reason == "perfect_score":
        return (
            "the best node already has a perfect score and search.stop_on_perfect is on: "
            "pass -c search.stop_on_perfect=false to search on"
        )
    if reason == "wall_seconds" and budget.wall_seconds is not None:
        return (
            f"{key} {budget.wall_seconds:g} s spent ({used.wall_seconds:.1f} s so far): "
            f"raise it, e.g. -c {key}={budget.wall_seconds * 2:g}"
        )
    limit = getattr(budget, reason, None) if reason in _LIMITS else None
    if limit is not None:
        return (
            f"{key} {limit} spent ({getattr(used, reason)} used): raise it, "
            f"e.g. -c {key}={int(limit) * 2 or 10}"
        )
    if reason == "search_space_exhausted":
        return (
            "every strategy was tried as often as it may be on every node it may expand: "
            "add strategies, raise their samples or search.budget.max_depth"
        )
    return f"the search stopped: {reason}"


_LIMITS = ("expansions", "test_runs", "tokens")
