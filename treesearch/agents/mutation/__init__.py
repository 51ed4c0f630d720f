"""The ``mutation`` agent: offline program repair guided by fault localisation.

No model and no API key: each expansion ranks the project's lines by how strongly the failing
tests point at them (coverage spectrum, Ochiai by default; lines run at import time count for no
test; ties go to the failing tracebacks, then to the functions a failing assertion calls) and
applies one small edit to a suspicious line. Two modes (``order``):

- ``sampled`` (the default): one edit of the classic operator families (operator swap,
  negated condition, off-by-one, another variable, deleted or copied statement, ...) drawn with
  the search's seeded RNG;
- ``ranked``: every candidate of every family at the top lines, classic operators and the fix
  patterns of real bugs (``patterns``: undefined names, condition clauses, call wrappers,
  methods and builtins, data-structure constants, off-by-one expressions, returned constants,
  missing returns, missing initialisations, loops over a list they change, uncalled methods,
  loop tails indented too deep), deduplicated by the program they produce, left out when they
  use a variable against its kind, and tried best first: suspiciousness squared x family prior x
  edit weight, then the smallest change, then the one that removes least. Each expansion
  applies the best edit not yet tried at that node; the search composes edits along its paths.

See ``agent`` for the run, ``localize`` for the ranking, ``operators`` and ``patterns`` for the
edits and ``ranking`` for the order.

Config (a strategy of ``kind: mutation``, checked by ``agents.configs.MutationConfig``; each
field is a keyword argument of ``MutationAgent``)::

    mutate:
      kind: mutation
      samples: 50          # controller: expansions per node (progressive widening under mcts)
      max_steps: 1         # controller: caps ``edits``
      order: sampled       # or ranked
      operators: [...]     # families; default: the classic ones (sampled), all (ranked)
      formula: ochiai      # or tarantula, dstar
      top_lines: 10        # suspicious lines considered
      edits: 1             # edits per expansion (chained when > 1)
      seed: 0              # mixed into the random stream (sampled)
      coverage: true       # false: rank by failing tracebacks only
      relocalize: false    # true: a coverage run on every expanded node (else inherited)
      traceback_boost: 0.5
      family_weights: {delete: 0.5, insert: 0.5}   # prior per family (ranked: ranking.RANKED_PRIORS)
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
