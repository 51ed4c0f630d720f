"""Candidate edits of every family, and the deterministic ranked order the ``ranked`` mode of
the mutation agent tries them in.

``edits_at_all(src, line, families)`` lists the edits of the classic operator families
(``operators.FAMILIES``) and of the fix-pattern families (``patterns.PATTERN_FAMILIES``) on the
statements that start at ``line``, without duplicate splices.

``rank_key(score, edit, prior)`` orders candidates: first by suspiciousness of the line
squared x the family's prior x the edit's own weight (highest first), then by the size of the
change (smallest first), then by the code it removes (least first), so among equally likely
edits the one that changes least and keeps the most code is tried, and so reported, first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from treesearch.agents.mutation._source import SourceFile
from treesearch.agents.mutation.operators import FAMILIES, Edit, _Builder, edits_at
from treesearch.agents.mutation.patterns import PATTERN_FAMILIES, PATTERN_PRIORS, pattern_edits

__all__ = ["ALL_FAMILIES", "RANKED_PRIORS", "edits_at_all", "rank_key"]

ALL_FAMILIES: tuple[str, ...] = FAMILIES + PATTERN_FAMILIES
"""Every family: the classic operators first, then the fix patterns."""

RANKED_PRIORS: Mapping[str, float] = {
    "arith": 1.0,
    "compare": 1.0,
    "boolean": 0.9,
    "negate": 0.7,
    "constant": 0.9,
    "name": 0.8,
    "bounds": 0.9,
    "swap": 0.6,
    "delete": 0.3,
    "insert": 0.35,
    "return": 0.7,
    **PATTERN_PRIORS,
}
"""Prior of each family in the ranked order (``family_weights`` overrides). Statement deletion
and copying come last: they produce most plausible-but-wrong patches (Qi et al., ISSTA 2015)."""

_SHARPNESS = 2.0


def edits_at_all(src: SourceFile, line: int, families: Iterable[str] = ALL_FAMILIES) -> list[Edit]:
    """Every edit of ``families`` (classic and pattern ones) on the statements at ``line``."""
    chosen = frozenset(families)
    out = edits_at(src, line, [f for f in FAMILIES if f in chosen])
    if chosen & set(PATTERN_FAMILIES):
        b = _Builder(src, line, chosen - set(FAMILIES))
        b._seen.update((e.start, e.end, e.text) for e in out)
        for stmt in src.statements_at(line):
            pattern_edits(b, stmt)
        out.extend(b.out)
    return out


def rank_key(score: float, edit: Edit, prior: float) -> tuple[float, int, int]:
    """Sort key of a candidate (smaller first): see the module docstring."""
    weight = (score**_SHARPNESS) * prior * edit.weight
    removed = edit.end - edit.start
    size = max(removed, len(edit.text.encode("utf-8")))
    return (-round(weight, 9), size, removed)
