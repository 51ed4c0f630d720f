"""Reproduction tests (``search.reproduce``): before a search, a strategy writes tests from the
task text alone; the ones that fail at the root steer the search beside the repository's tests.

Agentless has a model write a test that reproduces the issue and keeps the patches that make it
pass; on a SWE-bench row, whose deciding tests are held out, such a test is the only signal a
search has. Here any strategy can write them (an ``llm`` strategy with the reproduction task, a
``command`` or ``python`` strategy): it runs on the root up to ``samples`` times with the task
framed by ``REPRODUCE_TASK``. Each run's new or changed test files (``test_*.py``,
``*_test.py``) are copied out of the workspace into the run directory, the workspace is put
back to the root, and each copy is run alone at the root:

- kept when at least one of its tests fails (the issue reproduced);
- dropped, with the reason, when it passes at the root, cannot be collected (a syntax error,
  an import of a name that does not exist: an ERROR at import is no reproduction), errors in
  every test, or its run does not finish.

The kept files live in the run directory only (never in the workspace, so never in a snapshot
or a prediction); ``scoring`` then runs them in the same pytest run as the search tests and
scores them as their own part (``grading.WithReproduction``). ``reproduce.json`` in the run
directory records every attempt, file and reason; a resumed search reads it instead of asking
again.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shlex
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from treesearch.agents import Agent, AgentContext, AgentResult, AgentStatus, run_agent
from treesearch.scoring.results import Outcome, RunStatus, TestRun
from treesearch.scoring.runner import run_tests
from treesearch.scoring.spec import TestSpec
from treesearch.session import TransactionalSession
from treesearch.types import SnapshotStore, TreeHash


class ReproStore(SnapshotStore, Protocol):
    """What the reproduction step needs of the store: a snapshot store that lists the paths
    two snapshots differ in (``ShadowStore.changes``)."""

    def changes(self, a: str, b: str) -> dict[str, str]:
        """Status letter (``A``, ``M``, ``D``, ``T``) per path that differs."""
        ...


__all__ = [
    "RECORD",
    "REPRODUCE_TASK",
    "Reproduction",
    "check_file",
    "is_test_file",
    "read_record",
    "reproduce",
    "reproduction_command",
    "shared_copy",
]

RECORD = "reproduce.json"
"""The record in the run directory (beside the kept files, under ``reproduce/``)."""

REPRODUCE_TASK = (
    "Write a pytest test file that reproduces the issue below. Put it in the repository as "
    "`test_reproduce_issue.py` (or another `test_*.py` name). It must FAIL on the code as it "
    "is now, because of the issue, and pass once the issue is fixed. Do not fix the issue and "
    "change no other file: only the test file is kept.\n\nThe issue:\n\n{task}"
)
"""How the reproducing strategy is asked (``search.reproduce.task`` replaces it; ``{task}`` is
the search's task text, the instance's ``problem_statement`` in ``eval``)."""

_TEST_NAME = re.compile(r"^(test_.*|.*_test)\.py$")
_E_LINE = re.compile(r"^E\s+\w*(Error|Exception)\b.*$", re.MULTILINE)
_ERROR_LINE = re.compile(r"^\w*(Error|Exception)\b.*$", re.MULTILINE)


def is_test_file(path: str) -> bool:
    """Whether pytest collects ``path`` by its default name rules (``test_*.py``, ``*_test.py``)."""
    return bool(_TEST_NAME.match(PurePosixPath(path).name))


@dataclass
class Reproduction:
    """What the reproduction step found (``reproduce.json``)."""

    strategy: str
    attempts: int = 0
    kept: list[dict[str, Any]] = field(default_factory=list)
    """``{"file", "from", "attempt", "failing": [ids]}`` per kept file (``file``: its name in
    the run's ``reproduce/`` folder; ``from``: the path the strategy wrote)."""
    dropped: list[dict[str, Any]] = field(default_factory=list)
    """``{"file", "from", "attempt", "reason"}`` per dropped file, and an entry without
    ``file`` for an attempt that wrote no test file or failed."""
    ignored: list[str] = field(default_factory=list)
    """Other files the strategy changed (never kept)."""
    tokens: int = 0
    seconds: float = 0.0
    test_runs: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "attempts": self.attempts,
            "kept": self.kept,
            "dropped": self.dropped,
            "ignored": self.ignored,
            "tokens": self.tokens,
            "seconds": round(self.seconds, 3),
            "test_runs": self.test_runs,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Reproduction:
        return cls(
            strategy=str(data.get("strategy", "")),
            attempts=int(data.get("attempts", 0)),
            kept=list(data.get("kept", [])),
            dropped=list(data.get("dropped", [])),
            ignored=list(data.get("ignored", [])),
            tokens=int(data.get("tokens", 0)),
            seconds=float(data.get("seconds", 0.0)),
            test_runs=int(data.get("test_runs", 0)),
        )

    def kept_paths(self, folder: Path) -> list[Path]:
        """The kept files, in the run's ``reproduce/`` ``folder``."""
        return [folder / str(k["file"]) for k in self.kept]


def _python_of(spec: TestSpec) -> list[str]:
    """The interpreter words the search command starts with (``python3 -m pytest`` ->
    ``python3``), else ``python``: a check runs pytest as the search does."""
    words = shlex.split(spec.command) if isinstance(spec.command, str) else list(spec.command)
    for i, word in enumerate(words):
        if "=" in word and not word.startswith("-") and i == 0:
            continue  # an ``ENV=value`` prefix
        if re.match(r"^(.*/)?python[0-9.]*$", word):
            return [word]
        break
    return ["python"]


def _ini_option(cwd: Path) -> list[str]:
    """``-c FILE`` for the pytest config file in ``cwd`` (pytest's order), so that a test file
    outside the workspace changes neither its rootdir nor its options."""
    for name, section in (
        ("pytest.ini", None),
        ("pyproject.toml", "[tool.pytest.ini_options]"),
        ("tox.ini", "[pytest]"),
        ("setup.cfg", "[tool:pytest]"),
    ):
        path = cwd / name
        if not path.is_file():
            continue
        if section is None or section in path.read_text(encoding="utf-8", errors="replace"):
            return ["-c", name]
    return []


def rooted_args(cwd: Path) -> list[str]:
    """The pytest options that keep the workspace the rootdir when test files from outside it
    are on the command line (pytest would take their common folder instead)."""
    return ["--rootdir=.", *_ini_option(cwd)]


def reproduction_command(
    command: str | tuple[str, ...], folder: Path, cwd: Path
) -> str | tuple[str, ...]:
    """The search tests' pytest ``command`` that also runs the test files of ``folder`` (outside
    the workspace), with the workspace kept as pytest's rootdir. The folder, not each file, is
    named: pytest then ids its tests ``test_x.py::test_y`` (a file named by itself outside the
    rootdir gets the id ``::test_y``, and its tests would run together)."""
    extra = [*rooted_args(cwd), str(folder)]
    if isinstance(command, str):
        return " ".join([command, *map(shlex.quote, extra)])
    return (*command, *extra)


def shared_copy(files: Sequence[Path], home: Path) -> Path:
    """The folder the search's test runs read ``files`` from: ``home/reproduce/<content
    hash>``, written once. Its place beside the stores, not in the run directory, keeps what
    the tests print (paths relative to the workspace) the same in a search replayed in another
    run directory, so a recorded model sees the same prompts."""
    digest = hashlib.sha256()
    for f in sorted(files, key=lambda p: p.name):
        digest.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    dest = home / "reproduce" / digest.hexdigest()[:16]
    if not dest.is_dir():
        part = dest.with_name(f"{dest.name}.part-{os.getpid()}")
        shutil.rmtree(part, ignore_errors=True)
        part.mkdir(parents=True)
        for f in files:
            shutil.copyfile(f, part / f.name)
        try:
            part.rename(dest)
        except OSError:  # another search wrote it first: the same files
            shutil.rmtree(part, ignore_errors=True)
    return dest


def _first_error(run: TestRun) -> str:
    """The line that names the error: pytest's ``E   ImportError: ...`` first, else any line
    naming an error, else the run's problem."""
    text = run.output or ""
    found = _E_LINE.search(text) or _ERROR_LINE.search(text)
    line = found.group(0) if found else (run.problem or "").partition("\n")[0]
    return re.sub(r"^E\s+", "", line).strip()[:300]


def check_file(path: Path, workspace: Path, spec: TestSpec) -> tuple[bool, str, TestRun]:
    """Run reproduction test ``path`` alone in ``workspace`` with the search's environment:
    ``(kept, reason, run)``. Kept when a test of it fails; the reason says why not otherwise
    (or lists the failing tests)."""
    cwd = (workspace / spec.cwd).resolve()
    alone = path.parent / f".check-{path.stem}"  # the file alone in a folder (see above)
    shutil.rmtree(alone, ignore_errors=True)
    alone.mkdir()
    try:
        shutil.copyfile(path, alone / path.name)
        check = TestSpec(
            command=(*_python_of(spec), "-m", "pytest", "-q", "-p", "no:cacheprovider"),
            cwd=spec.cwd,
            timeout=spec.timeout,
            env=spec.env,
            tests=(*rooted_args(cwd), str(alone)),
        )
        run = run_tests(check, workspace)
    finally:
        shutil.rmtree(alone, ignore_errors=True)
    failed = [t.id for t in run.tests if t.outcome is Outcome.FAILED]
    errors = [t for t in run.tests if t.outcome is Outcome.ERROR]
    collected = not run.suite_errors and "during collection" not in run.problem
    if not collected or (run.status is RunStatus.OK and not run.tests):
        why = _first_error(run)
        return False, "cannot be collected at the root" + (f": {why}" if why else ""), run
    if run.status is not RunStatus.OK:
        what = f"{run.status.value}: {run.problem[:200]}"
        return False, f"its run at the root did not finish ({what})", run
    if not failed and errors:
        why = _first_error(run)
        return (
            False,
            "errors at the root (an ERROR is no reproduction)" + (f": {why}" if why else ""),
            run,
        )
    if not failed:
        return False, "passes at the root (it does not reproduce the issue)", run
    return True, f"{len(failed)} test(s) fail at the root", run


def reproduce(
    store: ReproStore,
    root: str,
    *,
    name: str,
    make_agent: Callable[[], Agent],
    task: str,
    samples: int,
    max_steps: int,
    timeout: float,
    spec: TestSpec,
    folder: Path,
    seed: int,
    session_file: Callable[[int], Path | None],
    cache_dir: Path | None = None,
    isolation: Any = None,
    on_note: Callable[[str], None] | None = None,
) -> Reproduction:
    """Run the reproducing strategy ``name`` up to ``samples`` times at ``root`` (the workspace
    is at ``root`` before and after), check what it wrote, keep the files that fail at the
    root in ``folder`` (see the module docstring)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = Reproduction(strategy=name)
    t0 = time.perf_counter()
    workspace = Path(store.workspace)
    try:
        for attempt in range(samples):
            out.attempts += 1
            store.restore(root)
            session = TransactionalSession.create(
                store,
                session_file(attempt),
                timeout=timeout,
                messages=[{"role": "user", "content": task}],
                session_id=hashlib.sha256(
                    f"{seed}:reproduce:{name}:{attempt}".encode()
                ).hexdigest()[:16],
            )
            session.isolation = isolation
            ctx = AgentContext(
                session=session,
                task=task,
                max_steps=max_steps,
                timeout=timeout,
                rng=random.Random(f"{seed}:reproduce:{name}:{attempt}"),
                node=TreeHash(root),
                attempt=attempt,
                test_spec=spec,
                cache_dir=cache_dir,
            )
            try:
                result = run_agent(make_agent(), ctx)
            except Exception as exc:  # noqa: BLE001 - a strategy that cannot be built: said, kept
                result = AgentResult(AgentStatus.FAILED, reason=f"{type(exc).__name__}: {exc}")
            session.close()
            out.tokens += result.cost.tokens_in + result.cost.tokens_out
            if result.status is AgentStatus.FAILED:
                out.dropped.append(
                    {"attempt": attempt, "reason": f"the strategy failed: {result.reason}"}
                )
                if on_note is not None:
                    on_note(f"reproduce: attempt {attempt} failed: {result.reason}")
            after = result.tree if result.tree is not None else str(store.capture(None, None).tree)
            changes = store.changes(root, after) if after != root else {}
            written: list[tuple[str, bytes]] = []
            for rel, status in sorted(changes.items()):
                if status in ("A", "M") and is_test_file(rel):
                    written.append((rel, (workspace / rel).read_bytes()))
                elif rel not in out.ignored:
                    out.ignored.append(rel)
            store.restore(root)
            if not written and result.status is not AgentStatus.FAILED:
                out.dropped.append({"attempt": attempt, "reason": "it wrote no test file"})
            for n, (rel, data) in enumerate(written):
                stem = re.sub(r"[^A-Za-z0-9_]", "_", PurePosixPath(rel).stem)[:40]
                file_name = f"test_repro{attempt}_{n}_{stem}.py"
                dest = folder / file_name
                dest.write_bytes(data)
                kept, reason, run = check_file(dest, workspace, spec)
                out.test_runs += 1
                entry: dict[str, Any] = {"file": file_name, "from": rel, "attempt": attempt}
                if kept:
                    entry["failing"] = [t.id for t in run.tests if t.outcome is Outcome.FAILED]
                    out.kept.append(entry)
                else:
                    entry["reason"] = reason
                    out.dropped.append(entry)
                    dest.rename(dest.with_suffix(".dropped"))  # kept for reading, never collected
                if on_note is not None:
                    on_note(f"reproduce: {rel} {'kept' if kept else 'dropped'}: {reason}")
    finally:
        store.restore(root)  # however it ends (Ctrl-C included): the search starts at the root
    out.seconds = time.perf_counter() - t0
    (folder / RECORD).write_text(json.dumps(out.to_json(), indent=2, sort_keys=True) + "\n")
    return out


def read_record(folder: Path) -> Reproduction | None:
    """The reproduction a run already did (``None``: none recorded)."""
    path = folder / RECORD
    if not path.is_file():
        return None
    return Reproduction.from_json(json.loads(path.read_text()))
