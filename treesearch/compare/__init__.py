"""Comparing contenders (configs plus overrides) over one instance set at one budget.

``run_compare(SPEC, out=DIR)`` runs the matrix contenders x seeds x instances, one
``treesearch eval`` batch per (contender, seed), on the eval executors (local pool or Ray), and
writes ``compare.json`` and ``compare.csv``; ``resume_compare(DIR)`` continues it. ``load_spec``
reads and checks a SPEC (``spec``); the statistics are in ``stats``, the anytime curves in
``curves``. Nothing here prints: progress goes to an ``on_event`` callback.
"""

from treesearch.compare.matrix import CompareError, CompareOutcome, resume_compare, run_compare
from treesearch.compare.spec import CompareSpec, SpecError, load_spec

__all__ = [
    "CompareError",
    "CompareOutcome",
    "CompareSpec",
    "SpecError",
    "load_spec",
    "resume_compare",
    "run_compare",
]
