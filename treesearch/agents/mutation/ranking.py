"""Candidate edits of every family, and the deterministic ranked order the ``ranked`` mode of
the mutation agent tries them in.

``edits_at_all(src, line, families)`` lists the edits of the classic operator families
(``operators.FAMILIES``) and of the fix-pattern families (``patterns.PATTERN_FAMILIES``) on the
statements that start at ``line``, without duplicate splices.

``rank_key(score, edit, prior)`` orders candidates: first by suspiciousness of the line
squared x the family's prior x the edit's own weight (highest first), then by the size of the
change (smallest first), then by the code it removes (least first), so among equally likely
edits the one that changes least and keeps the most code is tried, and so reported, first.

The edits of a line depend only on the file (path and bytes), the line, the families and
``typed``; the agent asks for them twice per line and again at every expansion of a node, so
they are kept in a bounded memo (``MEMO_SIZE`` lines, the most recently used) keyed by exactly
that. A memo hit returns a new list of the same (frozen) edits: what a fresh listing returns.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping

from treesearch.agents.mutation._edit import Edit, _Builder
from treesearch.agents.mutation._source import SourceFile
from treesearch.agents.mutation.operators import FAMILIES, edits_at
from treesearch.agents.mutation.patterns import PATTERN_FAMILIES, PATTERN_PRIORS, pattern_edits
from treesearch.agents.mutation.patterns.kinds import NUMBER, SEQUENCE, kinds_of

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

MEMO_SIZE = 2048
"""Most (file, line, families, typed) listings ``edits_at_all`` keeps (see the module doc)."""
_MEMO: OrderedDict[tuple[str, bytes, int, frozenset[str], bool], tuple[Edit, ...]] = OrderedDict()
_MEMO_LOCK = threading.Lock()


def edits_at_all(
    src: SourceFile, line: int, families: Iterable[str] = ALL_FAMILIES, *, typed: bool = False
) -> list[Edit]:
    """Every edit of ``families`` (classic and pattern ones) on the statements at ``line``.
    ``typed``: leave out edits that use a variable against its kind (``patterns.kinds``).
    Memoised per (path, bytes, line, families, typed)."""
    chosen = frozenset(families)
    key = (src.path, src.source, line, chosen, typed)
    with _MEMO_LOCK:
        known = _MEMO.get(key)
        if known is not None:
            _MEMO.move_to_end(key)
            return list(known)
    edits = _edits_at_all(src, line, chosen, typed)
    with _MEMO_LOCK:
        _MEMO[key] = tuple(edits)
        while len(_MEMO) > MEMO_SIZE:
            _MEMO.popitem(last=False)
    return edits


def _edits_at_all(src: SourceFile, line: int, chosen: frozenset[str], typed: bool) -> list[Edit]:
    out = edits_at(src, line, [f for f in FAMILIES if f in chosen])
    if typed:
        out = _typed(src, line, out)
    if not chosen & set(PATTERN_FAMILIES):
        return out
    b = _Builder(src, line, chosen - set(FAMILIES))
    for stmt in src.statements_at(line):
        pattern_edits(b, stmt)
    # The same splice from two families (a copied ``return 0`` is also a missing return):
    # keep the more likely one, in the first one's place.
    kept: dict[tuple[int, int, str], Edit] = {}
    for edit in [*out, *b.out]:
        key = (edit.start, edit.end, edit.text)
        old = kept.get(key)
        if old is None or _likelihood(edit) > _likelihood(old):
            kept[key] = edit
    edits = list(kept.values())
    return _typed(src, line, edits) if typed else edits


_SWAP = re.compile(r"^(\w+) -> (\w+)$")
_LEN = re.compile(r"len\((\w+)\)")
_NUMERIC_WRAPPERS = frozenset({"abs", "int", "float", "round"})
_SEQUENCE_WRAPPERS = frozenset({"len", "list", "sorted", "set", "tuple", "sum"})


def _typed(src: SourceFile, line: int, edits: list[Edit]) -> list[Edit]:
    stmts = src.statements_at(line)
    if not stmts:
        return edits
    scope = src.enclosing_function(stmts[0]) or src.tree
    kinds = kinds_of(src, scope)
    if not kinds:
        return edits

    def ok(edit: Edit) -> bool:
        old = src.source[edit.start : edit.end].decode("utf-8", "replace")
        if edit.family == "name":
            m = _SWAP.match(edit.operator)
            if m and {kinds.get(m.group(1)), kinds.get(m.group(2))} == {SEQUENCE, NUMBER}:
                return False
        elif edit.family == "offbyone":
            if kinds.get(old) == SEQUENCE:
                return False
        elif edit.family == "wrapper" and edit.operator.startswith("wrap in "):
            fn = edit.operator[len("wrap in ") : -2]
            kind = kinds.get(old)
            if (kind == SEQUENCE and fn in _NUMERIC_WRAPPERS) or (
                kind == NUMBER and fn in _SEQUENCE_WRAPPERS
            ):
                return False
        return all(kinds.get(name) != NUMBER for name in _LEN.findall(edit.text))

    return [e for e in edits if ok(e)]


def _likelihood(edit: Edit) -> float:
    return RANKED_PRIORS.get(edit.family, 1.0) * edit.weight


def rank_key(score: float, edit: Edit, prior: float) -> tuple[float, int, int]:
    """Sort key of a candidate (smaller first): see the module docstring."""
    weight = (score**_SHARPNESS) * prior * edit.weight
    removed = edit.end - edit.start
    size = max(removed, len(edit.text.encode("utf-8")))
    return (-round(weight, 9), size, removed)
