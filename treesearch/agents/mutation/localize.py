"""Spectrum-based fault localisation: which lines do the failing tests run that passing ones don't?

``localize(workspace, spec)`` runs the test command once under coverage.py, with one coverage
*context* per test (a ten-line pytest plugin switches the context to the test's node id, so each
parametrised case is its own test; the data file and the plugin live in a temporary folder
outside the workspace, and no ``.coverage``, ``__pycache__`` or ``.pytest_cache`` is left in
it). Test outcomes come from the JUnit report of the same run (``treesearch.scoring.run_tests``);
when the run times out, from the plugin's own log, the test that was running counting as failed.
Lines run at import time (coverage's empty context) count as run by every test.

Each statement line of a project file (test files and ``exclude`` globs left out) gets a
suspiciousness from a spectrum formula over failing and passing tests (``FORMULAS``: Ochiai by
default, Tarantula, DStar with * = 2), scaled so the top line is 1; lines that appear in the
tracebacks of failing tests get ``traceback_boost`` x (share of failing tests whose traceback
shows them) on top. Lines are reported per statement: a line of a multi-line statement counts
as the statement's first line.

When coverage cannot run (the command is not a plain pytest invocation, coverage.py is missing
from the test environment, the run produced no data) or is switched off, the tracebacks alone
rank the lines, and ``Localization.note`` says so.

The expensive part, the spectrum, is cached per (tree hash, test spec, options): in memory, and
as JSON under ``cache_dir`` when one is given. Only a spectrum the environment did not spoil is
cached: when coverage should have run and could not (coverage.py missing from the test
environment, no data written), or the test run itself was not usable (a command not found, a
crash), the ranking is used once, its note says why, and the next call tries again.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import math
import os
import re
import shlex
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from treesearch import lifecycle
from treesearch.agents.mutation._source import SourceFile
from treesearch.scoring import Outcome, RunStatus, TestRun, TestSpec, run_tests

__all__ = [
    "FORMULAS",
    "Localization",
    "SuspiciousLine",
    "inherit",
    "is_test_path",
    "localize",
]

_CACHE_VERSION = 1

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
    counts: dict[str, dict[int, list[int]]]  # path -> line -> [ef, ep, tb]
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


# --- test files -----------------------------------------------------------------------------------

_TEST_DIRS = frozenset({"tests", "test", "testing"})


def is_test_path(rel: str, exclude: Sequence[str] = ()) -> bool:
    """True for files that belong to the test suite (never edited, never ranked): ``test_*.py``,
    ``*_test.py``, ``conftest.py``, anything under a ``tests``/``test``/``testing`` folder, and
    paths matching one of the ``exclude`` globs (``fnmatch`` on the path and on the name)."""
    parts = rel.split("/")
    name = parts[-1]
    if name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py"):
        return True
    if any(p in _TEST_DIRS for p in parts[:-1]):
        return True
    return any(fnmatch.fnmatch(rel, g) or fnmatch.fnmatch(name, g) for g in exclude)


# --- the coverage run -----------------------------------------------------------------------------

_PLUGIN_MODULE = "_treesearch_fl_contexts"
_PLUGIN_SOURCE = '''\
"""Written by treesearch: one coverage context per test (its node id), and an outcome log."""
import coverage
import pytest

LOG = None


def _switch(name):
    cov = coverage.Coverage.current()
    if cov is not None:
        cov.switch_context(name)


def _log(*fields):
    if LOG is not None:
        with open(LOG, "a", encoding="utf-8") as handle:
            handle.write("\\t".join(f.replace("\\t", " ").replace("\\n", " ") for f in fields))
            handle.write("\\n")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _log("start", item.nodeid)
    _switch(item.nodeid)


def pytest_runtest_logreport(report):
    _log("report", report.nodeid, report.when, report.outcome)


def pytest_runtest_logfinish(nodeid, location):
    _switch("")
'''
# argv: python -c BOOT <rcfile> <plugin dir> <log file> <pytest args...>
_BOOT = (
    "import sys; rc, d, log = sys.argv[1:4]; sys.path.append(d); "
    f"import {_PLUGIN_MODULE} as p; p.LOG = log; "
    "from coverage.cmdline import main; "
    f"sys.exit(main(['run', '--rcfile=' + rc, '-m', 'pytest', '-p', '{_PLUGIN_MODULE}', "
    "*sys.argv[4:]]))"
)
_PYTHON_WORD = re.compile(r"^python(\d+(\.\d+)*)?$")
_PYTEST_WORD = re.compile(r"^py\.?test$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SHELL_META = re.compile(r"[;&|<>`$(){}\n*?]")


@dataclass(frozen=True)
class _Wrapped:
    python: str
    args: tuple[str, ...]
    env: dict[str, str]


def _wrap(spec: TestSpec) -> _Wrapped | str:
    """Split a pytest command into (python, pytest args, env); a reason string if impossible."""
    if not spec.is_pytest:
        return "the test command is not a pytest command"
    if isinstance(spec.command, str):
        if _SHELL_META.search(spec.command):
            return "the test command uses shell syntax that cannot be wrapped in coverage"
        try:
            words = shlex.split(spec.command)
        except ValueError as exc:
            return f"cannot split the test command: {exc}"
    else:
        words = list(spec.command)
    env: dict[str, str] = {}
    while words and _ASSIGNMENT.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if (
        len(words) >= 3
        and _PYTHON_WORD.match(os.path.basename(words[0]))
        and words[1:3]
        == [
            "-m",
            "pytest",
        ]
    ):
        return _Wrapped(words[0], tuple(words[3:]), env)
    if words and _PYTEST_WORD.match(os.path.basename(words[0])):
        return _Wrapped("python", tuple(words[1:]), env)
    return "the test command is neither `python -m pytest ...` nor `pytest ...`"


@dataclass
class _CoverageRun:
    run: TestRun
    contexts: dict[str, dict[str, set[int]]]  # context -> abs path -> lines
    log: list[list[str]]
    problem: str = ""


def _run_with_coverage(
    spec: TestSpec, workspace: Path, wrapped: _Wrapped, timeout: float
) -> _CoverageRun:
    from coverage import CoverageData  # imported here: only this path needs coverage.py

    with lifecycle.scratch_dir("fl") as tmp:
        folder = Path(tmp)
        (folder / f"{_PLUGIN_MODULE}.py").write_text(_PLUGIN_SOURCE, encoding="utf-8")
        data_file = folder / "coverage.data"
        rc = folder / "coveragerc"
        root = os.path.realpath(workspace)
        rc.write_text(
            "[run]\n"
            f"data_file = {data_file}\n"
            f"include = {root}{os.sep}*\n"
            # SIGTERM (the sandbox's first signal on a timeout) still writes the data.
            "sigterm = true\n"
            "disable_warnings = no-data-collected, module-not-measured, couldnt-parse\n",
            encoding="utf-8",
        )
        log_file = folder / "outcomes.log"
        command = (
            wrapped.python,
            "-c",
            _BOOT,
            str(rc),
            str(folder),
            str(log_file),
            *wrapped.args,
        )
        # sys.monitoring (coverage's default core on Python 3.14+) cannot switch contexts: ask
        # for the C tracer (older coverage ignores the variable).
        env = {
            **spec.env,
            **wrapped.env,
            "COVERAGE_FILE": str(data_file),
            "COVERAGE_CORE": "ctrace",
        }
        run_spec = TestSpec(
            command=command,
            cwd=spec.cwd,
            timeout=timeout,
            env=env,
            tests=spec.tests,
            runner="pytest",
        )
        run = run_tests(run_spec, workspace)
        log: list[list[str]] = []
        with contextlib.suppress(OSError):
            log = [
                line.split("\t")
                for line in log_file.read_text(encoding="utf-8", errors="replace").splitlines()
            ]
        contexts: dict[str, dict[str, set[int]]] = {}
        if not data_file.exists():
            tail = run.output.strip().splitlines()[-1:] or [run.problem]
            return _CoverageRun(run, contexts, log, f"coverage wrote no data ({tail[0][:200]})")
        try:
            data = CoverageData(basename=str(data_file))
            data.read()
            for path in data.measured_files():
                for lineno, names in data.contexts_by_lineno(path).items():
                    for name in names:
                        contexts.setdefault(name, {}).setdefault(path, set()).add(lineno)
        except Exception as exc:  # coverage's data errors have no common base class
            return _CoverageRun(run, {}, log, f"cannot read the coverage data: {exc}")
        return _CoverageRun(run, contexts, log)


# --- tracebacks -----------------------------------------------------------------------------------

_TB_PYTEST = re.compile(r"^(\S[^\n]*?\.py):(\d+):", re.MULTILINE)
_TB_NATIVE = re.compile(r'File "([^"\n]+\.py)", line (\d+)')


def _traceback_lines(text: str) -> list[tuple[str, int]]:
    found = [(m.group(1), int(m.group(2))) for m in _TB_PYTEST.finditer(text)]
    found += [(m.group(1), int(m.group(2))) for m in _TB_NATIVE.finditer(text)]
    return found


# --- the spectrum ---------------------------------------------------------------------------------


class _Files:
    """Maps raw file names to workspace-relative project files and lines to statement heads."""

    def __init__(self, workspace: Path, cwd: Path, exclude: Sequence[str]) -> None:
        self.root = os.path.realpath(workspace)
        self.cwd = cwd
        self.exclude = tuple(exclude)
        self._rel: dict[str, str | None] = {}
        self._heads: dict[str, dict[int, int] | None] = {}

    def rel(self, name: str) -> str | None:
        """Workspace-relative path of a project (non-test) ``.py`` file, else ``None``."""
        if name in self._rel:
            return self._rel[name]
        result: str | None = None
        candidates = (
            [name] if os.path.isabs(name) else [str(self.cwd / name), os.path.join(self.root, name)]
        )
        for candidate in candidates:
            real = os.path.realpath(candidate)
            if not real.startswith(self.root + os.sep) or not os.path.isfile(real):
                continue
            rel = os.path.relpath(real, self.root).replace(os.sep, "/")
            if rel.endswith(".py") and not is_test_path(rel, self.exclude):
                result = rel
            break
        self._rel[name] = result
        return result

    def head(self, rel: str, line: int) -> int | None:
        """The first line of the statement that holds ``line`` (``None``: not a statement)."""
        if rel not in self._heads:
            try:
                source = Path(self.root, rel).read_bytes()
                self._heads[rel] = SourceFile(rel, source).heads
            except (OSError, SyntaxError, ValueError):
                self._heads[rel] = None
        heads = self._heads[rel]
        if heads is None:
            return line
        return heads.get(line)


def _outcomes(
    cov: _CoverageRun | None, run: TestRun
) -> tuple[dict[str, bool], dict[str, str], str]:
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
        # No report (the run timed out): the plugin's log says which tests passed; the one that
        # was running when the time ran out counts as failed.
        state: dict[str, str] = {}
        for entry in cov.log:
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
        if hung:
            note = f"the tests timed out while running {hung[-1]}, counted as failing"
    return failed, texts, note


def _spectrum(
    workspace: Path,
    spec: TestSpec,
    *,
    use_coverage: bool,
    timeout: float,
    exclude: Sequence[str],
) -> _Spectrum:
    cwd = (workspace / spec.cwd).resolve()
    files = _Files(workspace, cwd, exclude)
    cov: _CoverageRun | None = None
    note = ""
    env_failure = False
    if use_coverage:
        wrapped = _wrap(spec)
        if isinstance(wrapped, str):
            note = f"coverage not used: {wrapped}"
        else:
            files.exclude = files.exclude + _path_args(cwd, wrapped.args, files.root)
            try:
                cov = _run_with_coverage(spec, workspace, wrapped, timeout)
            except ImportError:
                note = "coverage not used: coverage.py is not installed here"
                env_failure = True
            if cov is not None and cov.problem:
                note = f"coverage could not run: {cov.problem}"
                env_failure = True
    else:
        note = "coverage switched off (coverage: false)"
    usable = cov if cov is not None and not cov.problem else None
    if cov is not None and (usable is not None or cov.run.tests or cov.run.timed_out):
        run = cov.run
    else:  # no coverage, or coverage kept the tests from running: run them as they are
        run = _plain_run(spec, workspace, timeout)
    failed, texts, outcome_note = _outcomes(usable, run)
    failing = sorted(t for t, f in failed.items() if f)
    passing = sum(1 for f in failed.values() if not f)
    counts: dict[str, dict[int, list[int]]] = {}

    def bump(rel: str, line: int, index: int) -> None:
        counts.setdefault(rel, {}).setdefault(line, [0, 0, 0])[index] += 1

    for test_id in failing:
        seen: set[tuple[str, int]] = set()
        for name, line in _traceback_lines(texts.get(test_id, "")):
            rel = files.rel(name)
            head = files.head(rel, line) if rel is not None else None
            if rel is not None and head is not None and (rel, head) not in seen:
                seen.add((rel, head))
                bump(rel, head, 2)
    method = "traceback"
    if usable is not None:
        method = "coverage"
        per_context = _lines_per_context(usable.contexts, files)
        shared = per_context.pop("", set())
        by_test: dict[str, set[tuple[str, int]]] = {}
        for name, lines in per_context.items():
            case = run.get(name) if run.tests else None
            key = case.id if case is not None else name
            by_test.setdefault(key, set()).update(lines)
        for test_id, is_failing in failed.items():
            lines = by_test.get(test_id, set()) | shared
            for rel, head in lines:
                bump(rel, head, 0 if is_failing else 1)
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


def _plain_run(spec: TestSpec, workspace: Path, timeout: float) -> TestRun:
    return run_tests(replace(spec, timeout=min(spec.timeout, timeout)), workspace)


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
        for line, (ef, ep, _) in lines.items():
            if spectrum.method == "coverage":
                raw[(path, line)] = fn(ef, ep, n_fail - ef, spectrum.passing - ep)
            else:
                raw[(path, line)] = 0.0
    top = max(raw.values(), default=0.0)
    out = []
    for (path, line), value in raw.items():
        ef, ep, tb = spectrum.counts[path][line]
        score = (value / top if top > 0 else 0.0) + (
            boost * tb / n_fail if spectrum.method == "coverage" else tb / n_fail
        )
        if score > 0:
            out.append(SuspiciousLine(path, line, score, ef, ep, tb))
    out.sort(key=lambda s: (-s.score, -s.in_traceback, s.path, s.line))
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
        fd, temp = tempfile.mkstemp(dir=cache_dir, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle)
            os.replace(temp, cache_dir / f"{key}.json")
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temp)


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
) -> Localization:
    """Rank the statement lines of ``workspace``'s project files by suspiciousness.

    ``tree`` (the workspace's tree hash) enables the cache; ``cache_dir`` makes it persistent.
    ``timeout`` caps the test run below ``spec.timeout``. ``accept_inherited=False`` ignores a
    cached ranking that ``inherit`` derived from an ancestor and runs the tests instead. Raises
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
        spectrum = _spectrum(ws, spec, use_coverage=use_coverage, timeout=limit, exclude=exclude)
        # A run cut short by the caller's own deadline says little about the state, and a
        # failure of the environment must not outlive it: neither is cached.
        cut_short = spectrum.run_status == RunStatus.TIMEOUT.value and limit < spec.timeout
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
