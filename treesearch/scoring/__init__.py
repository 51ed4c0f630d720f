"""Run a test command, read per-test results, grade them, cache them by tree hash.

* ``TestSpec`` says what to run (command, cwd, timeout, env, JUnit path, test ids, reruns) and
  has a stable ``fingerprint()``.
* ``run_tests(spec, workspace)`` runs it through ``treesearch.sandbox.run`` and returns a
  ``TestRun``: per-test ``Outcome``s, totals, exit code, a ``RunStatus`` (OK, ERROR, TIMEOUT,
  CRASHED, INVALID; a run without a usable report and without sign that tests ran, a command
  not found or a pytest session cut short is INVALID, a collection error is ERROR: never a
  pass) and ``feedback()`` text for an agent. The JUnit report is untrusted input and parsed
  as such; a small pytest plugin (``pytest_probe``) reports what the report cannot.
* Score functions (``pass_fraction``, ``resolved``, ``swebench``) turn a run into a value in
  [0, 1]; ``make_score`` builds one by name or from a ``{kind: ...}`` mapping.
* ``Scorer`` scores states with the search tests and grades final states with held-out tests;
  ``ScoreCache`` keeps runs by (tree hash, spec fingerprint, environment key: ``envkey``) in
  SQLite, shared by processes.
* ``order``: failing tests first (``scoring.order``: a screen leaves a ``Partial`` result) and
  per-test time limits from the parent's durations (``scoring.per_test_timeout``).
* ``score_workspace`` is the entry point for the ``treesearch score`` command.
* ``warm.WarmRunner`` (``scoring.warm``) runs pytest commands forked from a warm server where
  that gives the result of a cold run, and says when it falls back to cold runs.

The library never prints. The names below load their module when first used, so that a module
that needs only ``results`` (the search controller) does not load the runner and the warm
server with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from treesearch.scoring.cache import CacheEntry, ScoreCache
    from treesearch.scoring.grading import (
        SCORES,
        PassFraction,
        Resolved,
        ScoreFunction,
        SweBench,
        make_score,
        score_names,
    )
    from treesearch.scoring.results import (
        Grade,
        Outcome,
        Partial,
        RunStatus,
        ScoreResult,
        TestCase,
        TestRun,
    )
    from treesearch.scoring.runner import recheck_changed, run_tests
    from treesearch.scoring.scorer import ScoreLike, Scorer, SnapshotSource, score_workspace
    from treesearch.scoring.spec import TestSpec

_WHERE = {
    **dict.fromkeys(("CacheEntry", "ScoreCache"), "cache"),
    **dict.fromkeys(
        (
            "SCORES",
            "PassFraction",
            "Resolved",
            "ScoreFunction",
            "SweBench",
            "make_score",
            "score_names",
        ),
        "grading",
    ),
    **dict.fromkeys(
        ("Grade", "Outcome", "Partial", "RunStatus", "ScoreResult", "TestCase", "TestRun"),
        "results",
    ),
    **dict.fromkeys(("recheck_changed", "run_tests"), "runner"),
    **dict.fromkeys(("ScoreLike", "Scorer", "SnapshotSource", "score_workspace"), "scorer"),
    "TestSpec": "spec",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})


__all__ = [
    "SCORES",
    "CacheEntry",
    "Grade",
    "Outcome",
    "Partial",
    "PassFraction",
    "Resolved",
    "RunStatus",
    "ScoreCache",
    "ScoreFunction",
    "ScoreLike",
    "ScoreResult",
    "Scorer",
    "SnapshotSource",
    "SweBench",
    "TestCase",
    "TestRun",
    "TestSpec",
    "make_score",
    "recheck_changed",
    "run_tests",
    "score_names",
    "score_workspace",
]
