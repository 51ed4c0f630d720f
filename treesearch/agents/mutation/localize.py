"""Spectrum-based fault localisation: which lines do the failing tests run that passing ones don't?

``localize(workspace, spec)`` runs the test command once under coverage.py, with one coverage
*context* per test (a ten-line pytest plugin switches the context to the test's node id, so each
parametrised case is its own test; the data file and the plugin live in a temporary folder
outside the workspace, and no ``.coverage``, ``__pycache__`` or ``.pytest_cache`` is left in
it). Test outcomes come from the JUnit report of the same run (``treesearch.scoring.run_tests``);
when the run times out, from the plugin's own log, the test that was running counting as failed.
Lines run at import time (coverage's empty context: module-level imports, ``def`` and ``class``
statements, constants) count as run by no test: they run once, whatever the test, and would
otherwise rank with every line all failing tests share. A line also run inside a test (a
function body) is counted for that test as usual.

Each statement line of a project file (test files and ``exclude`` globs left out) gets a
suspiciousness from a spectrum formula over failing and passing tests (``FORMULAS``: Ochiai by
default, Tarantula, DStar with * = 2), scaled so the top line is 1; lines that appear in the
tracebacks of failing tests get ``traceback_boost`` x (share of failing tests whose traceback
shows them) on top. Ties are broken by proximity to the failing assertion's call: lines in
the traceback first, then lines of a function that the failing assertions call (``assert
f(x) == y`` names ``f``; pytest's report of the failing line and its ``where`` lines are read).
Under the traceback fallback, lines of such functions also score (half a traceback frame), so
an assertion that fails without a frame in the project still points at the function it calls. Lines are reported per statement: a line of a multi-line statement counts
as the statement's first line.

When coverage cannot run (the command is not a plain pytest invocation, coverage.py is missing
from the test environment, the run produced no data) or is switched off, the tracebacks alone
rank the lines, and ``Localization.note`` says so.

The expensive part, the spectrum, is cached per (tree hash, test spec, options): in memory, and
as JSON under ``cache_dir`` when one is given. Only a spectrum the environment did not spoil is
cached: when coverage should have run and could not (coverage.py missing from the test
environment, no data written), or the test run itself was not usable (a command not found, a
crash), the ranking is used once, its note says why, and the next call tries again.

With a ``cache_dir``, one process at a time computes a given spectrum: the others (the workers
of a parallel search all expand the root first) wait on a lock file beside the cache entry
(``<key>.lock``, left in place: removing it could let a third process in beside a waiting one),
then take the entry it wrote. A waiter gives up waiting at its run's time limit and runs the
tests itself; a holder that dies releases the lock with its process.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from treesearch._atomic import write_text
from treesearch.agents.mutation._computing import computing
from treesearch.agents.mutation._coverage_run import CoverageRun, run_with_coverage, wrap
from treesearch.agents.mutation._frames import (
    _Files,
    _traceback_lines,
    called_in_failure,
    is_test_path,
)
from treesearch.scoring import Outcome, RunStatus, TestRun, TestSpec, run_tests

__all__ = [
    "FORMULAS",
    "Localization",
    "SuspiciousLine",
    "called_in_failure",
    "inherit",
    "is_test_path",
    "localize",
]

_CACHE_VERSION = 2

# --- formulas -------------------------------------------------------------------------------------


def ochiai(ef: int, ep: int, nf: int, np_: int) -> float:
    """Ochiai: ef / sqrt((ef + nf) * (ef + ep))."""
    if ef == 0:
        return 0.0
    return ef / math.sqrt((ef + nf) * (ef + ep))


def tarantula(ef: int, ep: int, nf: int, np_: int) -> float:
    """Tarantula: (ef/F) / (ef/F + ep/P)."""
    if ef == 0:
        return 0.0
    fail = ef / (ef + nf)
    passed = ep / (ep + np_) if ep + np_ else 0.0
    return fail / (fail + passed)


def dstar(ef: int, ep: int, nf: int, np_: int) -> float:
    """DStar with * = 2: ef^2 / (ep + nf); a zero denominator counts as 0.5 (ranks first)."""
    if ef == 0:
        return 0.0
    denominator = ep + nf
    return ef * ef / (denominator if denominator else 0.5)


FORMULAS: Mapping[str, Callable[[int, int, int, int], float]] = {
    "ochiai": ochiai,
    "tarantula": tarantula,
    "dstar": dstar,
}
"""Spectrum formulas by name: ``f(ef, ep, nf, np)`` (failing/passing tests that run the line,
failing/passing tests that don't)."""


# --- values ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SuspiciousLine:
    """One statement line and how suspicious it is."""

    path: str
    """Workspace-relative path (posix)."""
    line: int
    """First line of the statement."""
    score: float
    """Suspiciousness: the formula's value scaled to [0, 1] plus the traceback boost."""
    failed: int
    """Failing tests that run the line (ef)."""
    passed: int
    """Passing tests that run the line (ep)."""
    in_traceback: int
    """Failing tests whose traceback shows the line."""
    near_call: int = 0
    """Failing tests whose failing assertion calls the function that holds the line."""


@dataclass(frozen=True)
class Localization:
    """The ranking of one workspace state."""

    method: str
    """``coverage`` (spectrum) or ``traceback`` (the fallback)."""
    formula: str
    """The spectrum formula used (ignored by the traceback method)."""
    failing: int
    """Failing tests (failed or error)."""
    passing: int
    """Passing tests."""
    lines: tuple[SuspiciousLine, ...]
    """Lines with a positive score, most suspicious first (ties: by path, then line)."""
    note: str = ""
    """Why the fallback was used, or what else was odd (empty when all went well)."""
    run_status: str = ""
    """Status of the test run behind the ranking (``ok``, ``timeout``, ...)."""
    seconds: float = 0.0
    """Time spent (0 when the spectrum came from the cache)."""
    cached: bool = False
    """True when the spectrum came from the cache."""
    failing_tests: tuple[str, ...] = field(default=(), repr=False)
    """Ids of the failing tests."""
    inherited_from: str | None = None
    """Tree hash of the ancestor whose test run the ranking comes from (see ``inherit``);
    ``None`` when the tests ran on this very state."""

    def top(self, n: int) -> tuple[SuspiciousLine, ...]:
        """The ``n`` most suspicious lines, plus any tied with the ``n``-th (at most ``3 n``)."""
        if n <= 0 or not self.lines:
            return ()
        if len(self.lines) <= n:
            return self.lines
        cutoff = self.lines[n - 1].score
        out = list(self.lines[:n])
        for extra in self.lines[n : 3 * n]:
            if extra.score < cutoff:
                break
            out.append(extra)
        return tuple(out)

    def to_json(self, limit: int = 10) -> dict[str, Any]:
        """Summary for transcripts (the first ``limit`` lines)."""
        return {
            "method": self.method,
            "formula": self.formula,
            "failing": self.failing,
            "passing": self.passing,
            "note": self.note,
            "run_status": self.run_status,
            "seconds": round(self.seconds, 3),
            "cached": self.cached,
            "inherited_from": self.inherited_from,
            "top": [
                {
                    "path": s.path,
                    "line": s.line,
                    "score": round(s.score, 4),
                    "ef": s.failed,
                    "ep": s.passed,
                    "tb": s.in_traceback,
                    "near": s.near_call,
                }
                for s in self.lines[:limit]
            ],
        }


@dataclass
class _Spectrum:
    """What the test run says, independent of the formula (this is what gets cached)."""

    method: str
    failing: list[str]
    passing: int
    counts: dict[str, dict[int, list[int]]]  # path -> line -> [ef, ep, tb, near]
    note: str = ""
    run_status: str = ""
    inherited_from: str | None = None  # the tree whose test run this is (see ``inherit``)
    # False when the environment spoiled the run (never written to the cache, not serialised).
    cacheable: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "version": _CACHE_VERSION,
            "inherited_from": self.inherited_from,
            "method": self.method,
            "failing": self.failing,
            "passing": self.passing,
            "counts": {
                p: {str(k): v for k, v in lines.items()} for p, lines in self.counts.items()
            },
            "note": self.note,
            "run_status": self.run_status,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> _Spectrum:
        if data.get("version") != _CACHE_VERSION:
            raise ValueError("stale cache entry")
        counts = {
            str(p): {int(k): [int(x) for x in v] for k, v in lines.items()}
            for p, lines in data["counts"].items()
        }
        return cls(
            str(data["method"]),
            [str(t) for t in data["failing"]],
            int(data["passing"]),
            counts,
            str(data.get("note", "")),
            str(data.get("run_status", "")),
            data.get("inherited_from") if isinstance(data.get("inherited_from"), str) else None,
        )


def _outcomes(cov: CoverageRun | None, run: TestRun) -> tuple[dict[str, bool], dict[str, str], str]:
    """Test id -> failed?, test id -> traceback text, and a note."""
    failed: dict[str, bool] = {}
    texts: dict[str, str] = {}
    note = ""
    if run.tests and run.status is not RunStatus.TIMEOUT:
        for t in run.tests:
            if t.outcome.is_failure:
                failed[t.id] = True
                texts[t.id] = t.text or t.message
            elif t.outcome in (Outcome.PASSED, Outcome.XPASS):
                failed[t.id] = False
        return failed, texts, note
    if cov is not None and cov.log:
        failed, texts, note = _outcomes_from_log(cov.log)
    return failed, texts, note


def _outcomes_from_log(log: Sequence[Sequence[str]]) -> tuple[dict[str, bool], dict[str, str], str]:
    """No report (the run timed out): the plugin's log says which tests passed; the one that was
    running when the time ran out counts as failed."""
    failed: dict[str, bool] = {}
    texts: dict[str, str] = {}
    state: dict[str, str] = {}
    for entry in log:
        if entry[0] == "start" and len(entry) >= 2:
            state.setdefault(entry[1], "running")
        elif entry[0] == "report" and len(entry) >= 4:
            nodeid, when, outcome = entry[1], entry[2], entry[3]
            if outcome == "failed":
                state[nodeid] = "failed"
            elif when == "call" and outcome == "passed" and state.get(nodeid) != "failed":
                state[nodeid] = "passed"
            elif when == "teardown" and state.get(nodeid) == "running":
                state[nodeid] = "skipped"
    for nodeid, s in state.items():
        if s in ("failed", "running"):
            failed[nodeid] = True
            texts[nodeid] = ""
        elif s == "passed":
            failed[nodeid] = False
    hung = [n for n, s in state.items() if s == "running"]
    note = f"the tests timed out while running {hung[-1]}, counted as failing" if hung else ""
    return failed, texts, note


def _spectrum(
    workspace: Path,
    spec: TestSpec,
    *,
    use_coverage: bool,
    timeout: float,
    exclude: Sequence[str],
    warm: Any = None,
) -> _Spectrum:
    cwd = (workspace / spec.cwd).resolve()
    files = _Files(workspace, cwd, exclude)
    cov, note, env_failure = _covered_run(spec, workspace, cwd, files, use_coverage, timeout, warm)
    usable = cov if cov is not None and not cov.problem else None
    if cov is not None and (usable is not None or cov.run.tests or cov.run.timed_out):
        run = cov.run
    else:  # no coverage, or coverage kept the tests from running: run them as they are
        run = _plain_run(spec, workspace, timeout, warm)
    failed, texts, outcome_note = _outcomes(usable, run)
    failing = sorted(t for t, f in failed.items() if f)
    passing = sum(1 for f in failed.values() if not f)
    counts: dict[str, dict[int, list[int]]] = {}
    _count_tracebacks(counts, files, failing, texts)
    method = "traceback"
    if usable is not None:
        method = "coverage"
        _count_coverage(counts, files, usable, run, failed)
    _count_near_calls(counts, files, failing, texts, covered=method == "coverage")
    notes = [n for n in (note, outcome_note) if n]
    if not failing:
        notes.append(f"no failing tests ({run.summary()})")
    spoiled = env_failure or run.status in (RunStatus.INVALID, RunStatus.CRASHED)
    return _Spectrum(
        method,
        failing,
        passing,
        counts,
        "; ".join(notes),
        run.status.value,
        cacheable=not spoiled,
    )


def _covered_run(
    spec: TestSpec,
    workspace: Path,
    cwd: Path,
    files: _Files,
    use_coverage: bool,
    timeout: float,
    warm: Any,
) -> tuple[CoverageRun | None, str, bool]:
    """The test run under coverage when it can be had: (run or None, note, whether the
    environment failed)."""
    if not use_coverage:
        return None, "coverage switched off (coverage: false)", False
    wrapped = wrap(spec)
    if isinstance(wrapped, str):
        return None, f"coverage not used: {wrapped}", False
    files.exclude = files.exclude + _path_args(cwd, wrapped.args, files.root)
    try:
        cov = run_with_coverage(spec, workspace, wrapped, timeout, warm=warm)
    except ImportError:
        return None, "coverage not used: coverage.py is not installed here", True
    if cov.problem:
        return cov, f"coverage could not run: {cov.problem}", True
    return cov, "", False


def _bump(counts: dict[str, dict[int, list[int]]], rel: str, line: int, index: int) -> None:
    counts.setdefault(rel, {}).setdefault(line, [0, 0, 0, 0])[index] += 1


def _count_tracebacks(
    counts: dict[str, dict[int, list[int]]],
    files: _Files,
    failing: Sequence[str],
    texts: Mapping[str, str],
) -> None:
    """Each failing test counts once for each project line its traceback shows."""
    for test_id in failing:
        seen: set[tuple[str, int]] = set()
        for name, line in _traceback_lines(texts.get(test_id, "")):
            rel = files.rel(name)
            head = files.head(rel, line) if rel is not None else None
            if rel is not None and head is not None and (rel, head) not in seen:
                seen.add((rel, head))
                _bump(counts, rel, head, 2)


def _count_coverage(
    counts: dict[str, dict[int, list[int]]],
    files: _Files,
    usable: CoverageRun,
    run: TestRun,
    failed: Mapping[str, bool],
) -> None:
    """Each test counts (as failing or passing) for each line it ran, import time left out."""
    per_context = _lines_per_context(usable.contexts, files)
    per_context.pop("", None)  # import time: run by no test in particular
    by_test: dict[str, set[tuple[str, int]]] = {}
    for name, lines in per_context.items():
        case = run.get(name) if run.tests else None
        key = case.id if case is not None else name
        by_test.setdefault(key, set()).update(lines)
    for test_id, is_failing in failed.items():
        for rel, head in by_test.get(test_id, set()):
            _bump(counts, rel, head, 0 if is_failing else 1)


def _count_near_calls(
    counts: dict[str, dict[int, list[int]]],
    files: _Files,
    failing: Sequence[str],
    texts: Mapping[str, str],
    *,
    covered: bool,
) -> None:
    """Each failing test counts for the lines of the functions its failing assertion calls
    (with coverage: only lines some test ran)."""
    files_seen = list(counts) if covered else files.project_files()
    for test_id in failing:
        called = called_in_failure(texts.get(test_id, ""))
        if not called:
            continue
        for rel in files_seen:
            for head in files.function_lines(rel, called):
                if covered and head not in counts.get(rel, {}):
                    continue  # not run by any test: not near the failure
                _bump(counts, rel, head, 3)


def _plain_run(spec: TestSpec, workspace: Path, timeout: float, warm: Any) -> TestRun:
    ready = warm is not None and warm.ready
    spec = spec.model_copy(update={"timeout": min(spec.timeout, timeout)})
    return run_tests(spec, workspace, warm=warm if ready else None)


def _lines_per_context(
    contexts: Mapping[str, Mapping[str, set[int]]], files: _Files
) -> dict[str, set[tuple[str, int]]]:
    out: dict[str, set[tuple[str, int]]] = {}
    for name, by_file in contexts.items():
        lines: set[tuple[str, int]] = set()
        for path, numbers in by_file.items():
            rel = files.rel(path)
            if rel is None:
                continue
            for n in numbers:
                head = files.head(rel, n)
                if head is not None:
                    lines.add((rel, head))
        out[name] = lines
    return out


def _path_args(cwd: Path, args: Iterable[str], root: str) -> tuple[str, ...]:
    """Globs for files and folders the pytest command names (they hold tests, whatever their
    names)."""
    out: list[str] = []
    for arg in args:
        if arg.startswith("-"):
            continue
        path = arg.split("::", 1)[0]
        real = os.path.realpath(cwd / path)
        if not real.startswith(root + os.sep):
            continue
        rel = os.path.relpath(real, root).replace(os.sep, "/")
        if os.path.isdir(real):
            out.append(f"{rel}/*")
        elif os.path.isfile(real):
            out.append(rel)
    return tuple(out)


# --- ranking and caching --------------------------------------------------------------------------


def _rank(spectrum: _Spectrum, formula: str, boost: float) -> tuple[SuspiciousLine, ...]:
    fn = FORMULAS[formula]
    n_fail = len(spectrum.failing)
    if n_fail == 0:
        return ()
    raw: dict[tuple[str, int], float] = {}
    for path, lines in spectrum.counts.items():
        for line, (ef, ep, *_) in lines.items():
            if spectrum.method == "coverage":
                raw[(path, line)] = fn(ef, ep, n_fail - ef, spectrum.passing - ep)
            else:
                raw[(path, line)] = 0.0
    top = max(raw.values(), default=0.0)
    out = []
    for (path, line), value in raw.items():
        ef, ep, tb, near = (spectrum.counts[path][line] + [0, 0, 0, 0])[:4]
        score = (value / top if top > 0 else 0.0) + (
            boost * tb / n_fail if spectrum.method == "coverage" else (tb + 0.5 * near) / n_fail
        )
        if score > 0:
            out.append(SuspiciousLine(path, line, score, ef, ep, tb, near))
    out.sort(key=lambda s: (-round(s.score, 9), -s.in_traceback, -s.near_call, s.path, s.line))
    return tuple(out)


_MEMORY: OrderedDict[str, dict[str, Any]] = OrderedDict()
_MEMORY_LOCK = threading.Lock()
_MEMORY_SIZE = 256


def _cache_key(tree: str, spec: TestSpec, use_coverage: bool, exclude: Sequence[str]) -> str:
    text = json.dumps(
        [_CACHE_VERSION, tree, spec.fingerprint(), use_coverage, list(exclude)],
        sort_keys=True,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _cache_get(key: str, cache_dir: Path | None) -> _Spectrum | None:
    with _MEMORY_LOCK:
        data = _MEMORY.get(key)
        if data is not None:
            _MEMORY.move_to_end(key)
    if data is None and cache_dir is not None:
        with contextlib.suppress(OSError, ValueError):
            data = json.loads((cache_dir / f"{key}.json").read_text(encoding="utf-8"))
    if data is None:
        return None
    try:
        return _Spectrum.from_json(data)
    except (KeyError, TypeError, ValueError):
        return None


def _cache_put(key: str, spectrum: _Spectrum, cache_dir: Path | None) -> None:
    data = spectrum.to_json()
    with _MEMORY_LOCK:
        _MEMORY[key] = data
        _MEMORY.move_to_end(key)
        while len(_MEMORY) > _MEMORY_SIZE:
            _MEMORY.popitem(last=False)
    if cache_dir is None:
        return
    with contextlib.suppress(OSError):
        cache_dir.mkdir(parents=True, exist_ok=True)
        write_text(cache_dir / f"{key}.json", json.dumps(data))


def localize(
    workspace: str | os.PathLike[str],
    spec: TestSpec,
    *,
    tree: str | None = None,
    formula: str = "ochiai",
    use_coverage: bool = True,
    traceback_boost: float = 0.5,
    exclude: Sequence[str] = (),
    cache_dir: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
    accept_inherited: bool = True,
    warm: Any = None,
) -> Localization:
    """Rank the statement lines of ``workspace``'s project files by suspiciousness.

    ``tree`` (the workspace's tree hash) enables the cache; ``cache_dir`` makes it persistent.
    ``timeout`` caps the test run below ``spec.timeout``. ``accept_inherited=False`` ignores a
    cached ranking that ``inherit`` derived from an ancestor and runs the tests instead.
    ``warm``: a ``scoring.warm.WarmRunner`` for the test run, once it is ``ready``. Raises
    ``ValueError`` for an unknown ``formula`` and ``treesearch.errors.ScoringError`` when the
    tests cannot be run at all (a ``cwd`` that is not a folder of the workspace).
    """
    if formula not in FORMULAS:
        raise ValueError(f"unknown formula {formula!r}; known: {', '.join(FORMULAS)}")
    ws = Path(os.path.abspath(os.fspath(workspace)))
    folder = Path(cache_dir) if cache_dir is not None else None
    limit = spec.timeout if timeout is None else max(0.001, min(spec.timeout, timeout))
    t0 = time.monotonic()
    key = _cache_key(tree, spec, use_coverage, exclude) if tree else None
    spectrum = _cache_get(key, folder) if key else None
    if spectrum is not None and spectrum.inherited_from and not accept_inherited:
        spectrum = None
    cached = spectrum is not None
    if spectrum is None:
        with computing(key, folder, t0 + limit):
            # Another process may have computed it while this one waited for the lock.
            spectrum = _cache_get(key, folder) if key else None
            if spectrum is not None and spectrum.inherited_from and not accept_inherited:
                spectrum = None
            cached = spectrum is not None
            if spectrum is None:
                left = max(0.001, limit - (time.monotonic() - t0))
                spectrum = _spectrum(
                    ws, spec, use_coverage=use_coverage, timeout=left, exclude=exclude, warm=warm
                )
                # A run cut short by the caller's own deadline says little about the state,
                # and a failure of the environment must not outlive it: neither is cached.
                cut_short = spectrum.run_status == RunStatus.TIMEOUT.value and left < spec.timeout
                if key and not cut_short and spectrum.cacheable:
                    _cache_put(key, spectrum, folder)
    return Localization(
        method=spectrum.method,
        formula=formula,
        failing=len(spectrum.failing),
        passing=spectrum.passing,
        lines=_rank(spectrum, formula, traceback_boost),
        note=spectrum.note,
        run_status=spectrum.run_status,
        seconds=0.0 if cached else time.monotonic() - t0,
        cached=cached,
        failing_tests=tuple(spectrum.failing),
        inherited_from=spectrum.inherited_from,
    )


def inherit(
    parent: str,
    child: str,
    spec: TestSpec,
    moves: Callable[[str, int], int | None],
    *,
    use_coverage: bool = True,
    exclude: Sequence[str] = (),
    cache_dir: str | os.PathLike[str] | None = None,
) -> bool:
    """Give ``child`` the cached spectrum of ``parent``, each line moved by ``moves(path, line)``
    (``None``: the line is gone). This is GenProg's way: localise once, keep the weights for the
    variants. ``localize`` of ``child`` then needs no test run (unless it refuses inherited
    rankings). Returns False when ``parent`` has no cached spectrum; never replaces a spectrum
    ``child`` got from its own test run."""
    folder = Path(cache_dir) if cache_dir is not None else None
    source = _cache_get(_cache_key(parent, spec, use_coverage, exclude), folder)
    if source is None:
        return False
    key = _cache_key(child, spec, use_coverage, exclude)
    existing = _cache_get(key, folder)
    if existing is not None and not existing.inherited_from:
        return True
    counts: dict[str, dict[int, list[int]]] = {}
    for path, lines in source.counts.items():
        for line, values in lines.items():
            moved = moves(path, line)
            if moved is not None:
                counts.setdefault(path, {})[moved] = list(values)
    root = source.inherited_from or parent
    note = source.note
    if not source.inherited_from:
        note = "; ".join(n for n in (note, f"ranking inherited from {root[:12]}") if n)
    _cache_put(
        key,
        _Spectrum(
            source.method,
            list(source.failing),
            source.passing,
            counts,
            note,
            source.run_status,
            root,
        ),
        folder,
    )
    return True
