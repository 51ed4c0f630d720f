"""The ``mutation`` agent: offline, seeded program repair guided by fault localisation.

No model and no API key: each expansion ranks the project's lines by how strongly the failing
tests point at them (coverage spectrum, Ochiai by default) and applies one small mutation
(operator swap, negated condition, off-by-one, another variable, deleted or copied statement,
...) to a suspicious line, sampled with the search's seeded RNG. See ``agent`` for the run, the
``localize`` module for the ranking and ``operators`` for the edits.

Config (a strategy of ``kind: mutation``)::

    mutate:
      kind: mutation
      samples: 50          # controller: expansions per node (progressive widening under mcts)
      max_steps: 1         # controller: caps ``edits``
      operators: [arith, compare, boolean, negate, constant, name, bounds, swap,
                  delete, insert, return]     # default: all
      formula: ochiai      # or tarantula, dstar
      top_lines: 10        # suspicious lines considered
      edits: 1             # edits per expansion (chained when > 1)
      seed: 0              # mixed into the random stream
      coverage: true       # false: rank by failing tracebacks only
      relocalize: false    # true: a coverage run on every expanded node (else inherited)
      traceback_boost: 0.5
      family_weights: {delete: 0.5, insert: 0.5}   # prior per family (others 1)
      exclude: []          # path globs never mutated (test files never are)
      tests: {command: ...}  # only when the search gives the agent no test spec
"""

from __future__ import annotations

from treesearch.agents.mutation._source import SourceFile
from treesearch.agents.mutation.agent import MutationAgent
from treesearch.agents.mutation.localize import (
    FORMULAS,
    Localization,
    SuspiciousLine,
    inherit,
    is_test_path,
    localize,
)
from treesearch.agents.mutation.operators import FAMILIES, Edit, check, edits_at

__all__ = [
    "FAMILIES",
    "FORMULAS",
    "Edit",
    "Localization",
    "MutationAgent",
    "SourceFile",
    "SuspiciousLine",
    "check",
    "edits_at",
    "inherit",
    "is_test_path",
    "localize",
]
