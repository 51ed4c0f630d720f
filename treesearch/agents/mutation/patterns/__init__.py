"""Fix patterns for real bugs, beyond the classic mutation operators of ``operators``.

Families (``PATTERN_FAMILIES``), after the fix-pattern catalogues of the repair literature
(TBar's fix-pattern families, PyTER's repairs of Python type errors, the one-line bug classes
of QuixBugs-style algorithm benchmarks):

- ``variable``: an undefined name (a ``NameError``) -> a variable in scope, the most similar
  spelling first (PyTER); an integer constant in a slice, ``range`` or comparison -> a
  parameter of the function;
- ``clause``: a missing or extra clause of a condition: drop one operand of an ``and``/``or``
  condition, or add ``and C`` / ``or C`` / ``and not C`` where ``C`` is another condition of the
  same function (in-scope expressions the programmer already wrote);
- ``wrapper``: a missing or extra call wrapper: ``x`` -> ``len(x)``, ``abs(x)``, ``int(x)``,
  ``list(x)``, ``sorted(x)`` ... and ``len(x)`` -> ``x``;
- ``method``: a wrong method or builtin: ``sort``/``sorted``, ``append``/``extend``/``insert``,
  ``remove``/``pop``, ``int``/``round``/``float``, ``find``/``index``/``count`` ...; a call
  ``xs.sort()`` -> ``sorted(xs)``; a statement ``sorted(xs)`` -> ``xs = sorted(xs)``; a sort
  with or without ``reverse=True``;
- ``structure``: a wrong data-structure constant: ``[]``, ``{}``, ``set()``, ``()``, ``''``,
  ``0``, ``None`` among themselves, a list literal <-> a tuple literal;
- ``offbyone``: an expression off by one in a comparison or a returned value
  (``i < len(xs)`` -> ``i < len(xs) - 1``, ``return n`` -> ``return n + 1``);
- ``retval``: a wrong returned constant (``None``, ``0``, ``-1``, ``True``, ``False``, ``[]``,
  ``''``, or the length of a parameter);
- ``missing``: a missing ``return`` at the end of a function that can fall off its end
  (returning another returned expression of the function, a variable in scope, or a constant);
- ``init``: a missing initialisation of an accumulator nothing binds (``acc = []`` first);
- ``iterate``: a loop over a list its body changes -> a loop over a copy (``xs[:]``);
- ``call``: a method named as a statement but not called (``xs.pop``) -> ``xs.pop()``;
- ``indent``: the last statements of a loop's body one level too deep -> out of the loop;
- ``exit``: a loop whose final ``if ... else: return`` decides on the first item -> the
  ``else`` body after the loop;
- ``guard``: a fixed index or ``max``/``min`` of a parameter that may be empty -> an
  ``if not xs:`` guard that returns (or leaves the loop) first;
- ``effect``: a value computed and dropped (``x == y``, ``best - i``) -> the assignment;
- ``inplace``: the ``None`` of ``xs.sort()``/``xs.remove(x)``... used as a value -> the call as
  a statement, its receiver in its place;
- ``element``: ``xs[0]`` inside ``for x in xs:`` -> ``x``;
- ``advance``: a ``while`` counter its body never changes -> ``n += 1`` at the end of the body.

Each family is a function ``(builder, stmt) -> None`` that adds ``Edit`` s to the builder.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping

from treesearch.agents.mutation._edit import _Builder
from treesearch.agents.mutation.patterns.expressions import (
    clause_edits,
    method_edits,
    offbyone_edits,
    structure_edits,
    wrapper_edits,
)
from treesearch.agents.mutation.patterns.flow import (
    advance_edits,
    effect_edits,
    element_edits,
    exit_edits,
    guard_edits,
    indent_edits,
    inplace_edits,
)
from treesearch.agents.mutation.patterns.state import (
    call_edits,
    init_edits,
    iterate_edits,
)
from treesearch.agents.mutation.patterns.statements import (
    missing_edits,
    retval_edits,
    variable_edits,
)

__all__ = ["PATTERN_FAMILIES", "PATTERN_PRIORS", "pattern_edits"]

_BY_FAMILY: Mapping[str, Callable[[_Builder, ast.stmt], None]] = {
    "variable": variable_edits,
    "clause": clause_edits,
    "wrapper": wrapper_edits,
    "method": method_edits,
    "structure": structure_edits,
    "offbyone": offbyone_edits,
    "retval": retval_edits,
    "missing": missing_edits,
    "init": init_edits,
    "iterate": iterate_edits,
    "call": call_edits,
    "indent": indent_edits,
    "exit": exit_edits,
    "guard": guard_edits,
    "effect": effect_edits,
    "inplace": inplace_edits,
    "element": element_edits,
    "advance": advance_edits,
}
PATTERN_FAMILIES: tuple[str, ...] = tuple(_BY_FAMILY)
"""The fix-pattern families, in the order their edits are listed."""

PATTERN_PRIORS: Mapping[str, float] = {
    "variable": 1.0,
    "clause": 0.6,
    "wrapper": 0.5,
    "method": 0.8,
    "structure": 0.6,
    "offbyone": 0.7,
    "retval": 0.5,
    "missing": 0.8,
    "init": 1.0,
    "iterate": 1.0,
    "call": 1.0,
    "indent": 0.8,
    "exit": 0.9,
    "guard": 0.7,
    "effect": 1.0,
    "inplace": 1.0,
    "element": 0.6,
    "advance": 0.8,
}
"""Prior weight of each pattern family in the ranked order (the classic families' priors are
in ``treesearch.agents.mutation.ranking``)."""


def pattern_edits(b: _Builder, stmt: ast.stmt) -> None:
    """Add the edits of the builder's chosen pattern families on ``stmt``."""
    for family, fn in _BY_FAMILY.items():
        if family in b.families:
            fn(b, stmt)
