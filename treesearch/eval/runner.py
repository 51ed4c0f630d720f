"""One instance end to end, in whatever process runs it (pool worker, Ray task or the driver).

Workspace (the base commit materialised from the read-only repository, or a copy of the local
``workspace``), environment, search (``app.run_from_config``, run directory in a scratch folder),
then grading: the best tree materialised into a fresh grading copy, ``test_patch`` applied there
(never in the searched workspace), the grade command run and judged by SWE-bench's rule (every
FAIL_TO_PASS and every PASS_TO_PASS test passes; skipped, missing or errored is not a pass).
The result is a row and the run directory packed as bytes, so that it can travel back from
another machine; the scratch folder is removed.
"""

from __future__ import annotations

import copy
import dataclasses
import io
import json
import os
import resource
import shutil
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from treesearch.errors import TreesearchError
from treesearch.eval.environment import (
    EnvResult,
    Known,
    env_spec_for,
    prepare_env,
    remove_tree,
    swebench_parser,
    swebench_specs,
)
from treesearch.eval.instances import Instance, find_repo
from treesearch.eval.swebench_grading import grade_statuses, test_command
from treesearch.scoring import Grade, RunStatus, SweBench, TestSpec, run_tests
from treesearch.store.source import apply_patch, materialize_commit

__all__ = ["EvalSettings", "InstanceInterrupted", "InstanceReport", "run_instance"]

DEFAULT_GRADE = {"command": "python -m pytest -q", "timeout": 600}


class InstanceInterrupted(Exception):
    """The instance's search was interrupted (Ctrl-C): it is not finished."""


@dataclass(frozen=True)
class EvalSettings:
    """Everything a worker needs besides the instance (plain, picklable values)."""

    config: dict[str, Any]
    """The search config without ``workspace`` and without the ``eval`` section."""
    source: str
    base_dir: str
    oracle: bool = False
    grade_tests: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_GRADE))
    setup_timeout: float = 1800.0
    env_dir: str = ""
    repos: str | None = None
    task_from_instance: bool = True
    grade_tests_explicit: bool = False
    """The config names ``eval.grade_tests`` (then SWE-bench's own test command is not used)."""


@dataclass
class InstanceReport:
    row: dict[str, Any]
    run_archive: bytes | None
    """The run directory as a gzipped tar (``None`` when no search started)."""
    timing: dict[str, Any] = field(default_factory=dict)
    """Where the instance's time went: ``pid`` of the process that ran it, ``start``/``end``
    (epoch seconds), ``phases`` (seconds spent on workspace, env, search, grade, pack,
    cleanup; a phase not reached is absent) and ``cpu`` (CPU seconds of the process and of the
    children it waited for, meanwhile: the instance's work, whatever else the machine runs).
    Progress events carry it, ``results.jsonl`` does not (a row does not depend on the worker
    that made it)."""


def _cpu_seconds() -> float:
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


class _Laps:
    """Seconds of consecutive phases: ``lap(name)`` closes the phase that ran since the last."""

    def __init__(self, timing: dict[str, Any]) -> None:
        self.phases: dict[str, float] = timing.setdefault("phases", {})
        self.t = time.monotonic()

    def __call__(self, name: str) -> None:
        now = time.monotonic()
        self.phases[name] = round(now - self.t, 3)
        self.t = now


def steer_of(settings: EvalSettings) -> dict[str, Any]:
    """What steers the search: the config's ``scoring.search_tests`` command, and oracle or not."""
    tests = (settings.config.get("scoring") or {}).get("search_tests") or {}
    return {"search_tests": tests.get("command", "python -m pytest -q"), "oracle": settings.oracle}


def error_row(instance_id: str, settings: EvalSettings, reason: str) -> dict[str, Any]:
    """A ``results.jsonl`` row with nothing done yet: status ``error`` and its reason (the
    runner fills it in as the instance gets further)."""
    return {
        "instance_id": instance_id,
        "status": "error",
        "reason": reason,
        "resolved": False,
        "oracle": settings.oracle,
        "steer": steer_of(settings),
        "tests": None,
        "test_runs": 0,
        "grade_test_runs": 0,
        "tokens": 0,
        "usd": 0.0,
        "seconds": 0.0,
        "run_dir": None,
        "best_score": None,
        "stop_reason": None,
        "env_log": None,
    }


def run_instance(
    inst: Instance, settings: EvalSettings, known: Known | None = None
) -> InstanceReport:
    """Run one instance; never raises for the instance's own problems (they become an ``error``
    row); raises ``InstanceInterrupted`` on Ctrl-C. ``known``: what the driver looked up for it
    (``environment.look_up``); without it, this process looks it up."""
    t0 = time.monotonic()
    timing: dict[str, Any] = {"pid": os.getpid(), "start": time.time()}
    cpu0 = _cpu_seconds()
    lap = _Laps(timing)
    scratch = Path(tempfile.mkdtemp(prefix=f"treesearch-eval-{inst.instance_id[:40]}-"))
    row = error_row(inst.instance_id, settings, "")
    archive: bytes | None = None
    try:
        archive = _run(inst, settings, scratch, row, lap, known)
    except KeyboardInterrupt:
        raise InstanceInterrupted(inst.instance_id) from None
    except InstanceInterrupted:
        raise
    except TreesearchError as exc:
        row["status"], row["reason"] = "error", str(exc)
    except Exception as exc:  # noqa: BLE001 - one instance's crash is its row, not the batch's
        row["status"], row["reason"] = "error", f"{type(exc).__name__}: {exc}"
    finally:
        lap.t = time.monotonic()
        remove_tree(scratch)
        lap("cleanup")
    row["seconds"] = round(time.monotonic() - t0, 3)
    timing["end"] = time.time()
    timing["cpu"] = round(_cpu_seconds() - cpu0, 3)
    return InstanceReport(row, archive, timing)


def _run(
    inst: Instance,
    s: EvalSettings,
    scratch: Path,
    row: dict[str, Any],
    lap: _Laps,
    known: Known | None,
) -> bytes | None:
    name = (inst.repo or inst.instance_id).rsplit("/", 1)[-1] or "workspace"
    workspace = scratch / "work" / name

    # 1. The workspace.
    repo_path: Path | None = None
    if inst.workspace is not None:
        src = Path(inst.workspace)
        if not src.is_dir():
            row["reason"] = f"workspace {src} is not a folder ({inst.where})"
            return None
        shutil.copytree(src, workspace, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    else:
        assert inst.repo is not None and inst.base_commit is not None
        repo_path, why = find_repo(Path(s.repos) if s.repos else None, inst.repo)
        if repo_path is None:
            row["reason"] = why
            return None
        try:
            materialize_commit(repo_path, inst.base_commit, workspace)
        except TreesearchError as exc:
            row["reason"] = f"base_commit {inst.base_commit}: {exc}"
            return None
    if s.oracle:
        apply_patch(workspace, inst.test_patch)  # oracle: the grading tests steer the search
    lap("workspace")

    # 2. The environment.
    env = _environment(inst, s, repo_path, workspace, known)
    lap("env")
    row["env_log"] = str(env.log) if env.log else None
    if env.error is not None:
        row["reason"] = env.error
        return None

    # 3. The search.
    from treesearch.app import run_from_config
    from treesearch.store import ShadowStore

    raw = copy.deepcopy(s.config)
    raw["workspace"] = {"path": str(workspace)}
    store = raw.setdefault("store", {})
    store["home"] = str(scratch / "home")
    out_cfg = raw.setdefault("output", {})
    out_cfg["run_id"] = inst.instance_id
    out_cfg["instance_id"] = inst.instance_id
    if s.task_from_instance and inst.problem_statement.strip():
        raw["task"] = inst.problem_statement
    if env.env:
        scoring = raw.setdefault("scoring", {})
        tests = scoring.setdefault("search_tests", {})
        tests["env"] = {**dict(env.env), **(tests.get("env") or {})}
    runs = scratch / "runs"
    outcome = run_from_config(raw, base_dir=Path(s.base_dir), runs_dir=runs, source=s.source)
    lap("search")
    if outcome.interrupted:
        raise InstanceInterrupted(inst.instance_id)
    row["run_dir"] = f"instances/{inst.instance_id}"
    row["best_score"] = outcome.best_score
    row["stop_reason"] = outcome.stop_reason
    row["test_runs"] = outcome.usage.test_runs
    row["tokens"] = outcome.usage.tokens
    row["usd"] = _usd(outcome.graph)

    # 4. Grading, in a fresh copy of the best tree plus the held-out tests.
    st = ShadowStore.open(
        workspace,
        home=str(scratch / "home"),
        watch=False,
        excludes=tuple(
            (s.config.get("store") or {}).get("excludes")
            or ("__pycache__/", ".pytest_cache/", "*.pyc", ".coverage", ".coverage.*")
        ),
    )
    grade_dir = scratch / "grade" / name
    try:
        st.materialize(outcome.best, grade_dir)
    finally:
        st.close()
    _grade(inst, s, grade_dir, env, outcome.run_dir, row, known)
    lap("grade")
    archive = _pack(outcome.run_dir)
    lap("pack")
    return archive


def _environment(
    inst: Instance, s: EvalSettings, repo_path: Path | None, workspace: Path, known: Known | None
) -> EnvResult:
    spec = env_spec_for(inst, known)

    def materialize(dest: Path) -> None:
        commit = inst.environment_setup_commit or inst.base_commit
        if repo_path is not None and commit:
            materialize_commit(repo_path, commit, dest)
        else:
            shutil.copytree(workspace, dest, symlinks=True)

    root = Path(s.env_dir) if s.env_dir else Path(tempfile.gettempdir()) / "treesearch-envs"
    return prepare_env(spec, root, materialize, timeout=s.setup_timeout)


def _grade(
    inst: Instance,
    s: EvalSettings,
    grade_dir: Path,
    env: EnvResult,
    run_dir: Path,
    row: dict[str, Any],
    known: Known | None,
) -> None:
    out = run_dir / "grade"
    out.mkdir(exist_ok=True)
    try:
        if not s.oracle:  # with oracle the searched tree holds the tests already
            apply_patch(grade_dir, inst.test_patch)
    except TreesearchError as exc:
        row["status"], row["reason"] = "error", f"test_patch: {exc}"
        (out / "error.txt").write_text(row["reason"] + "\n", encoding="utf-8")
        return
    spec_map = dict(s.grade_tests)
    if env.env:
        spec_map["env"] = {**dict(env.env), **(spec_map.get("env") or {})}
    official = _swebench_way(inst, s, known)
    if official is not None:  # SWE-bench's own test command and log parser
        spec_map.update(command=official[0], runner="generic")
    spec = TestSpec.from_config(spec_map, s.source, where="eval.grade_tests")
    run = run_tests(spec, grade_dir)
    row["grade_test_runs"] = 1
    judge = SweBench(inst.fail_to_pass, inst.pass_to_pass, strict_pass_to_pass=True)
    if official is not None:
        statuses = official[1](run.output) if run.status is not RunStatus.TIMEOUT else {}
        report = grade_statuses(statuses, inst.fail_to_pass, inst.pass_to_pass)
        resolved = not report["FAIL_TO_PASS"]["failure"] and not report["PASS_TO_PASS"]["failure"]
        grade = Grade(1.0 if resolved else 0.0, resolved, {"parser": "swebench"})
        if not statuses and run.status is not RunStatus.TIMEOUT:
            run = dataclasses.replace(
                run, status=RunStatus.INVALID, problem="SWE-bench's log parser found no tests"
            )
    else:
        report = judge.report(run)
        grade = judge(run)
    (out / "output.txt").write_text(
        f"$ {spec.command}\n(exit {run.exit_code}, status {run.status.value})\n"
        + (run.output or ""),
        encoding="utf-8",
        errors="replace",
    )
    (out / "report.json").write_text(
        json.dumps(
            {
                "instance_id": inst.instance_id,
                "status": run.status.value,
                "problem": run.problem,
                "tests_status": report,
                "outcomes": {t.id: t.outcome.value for t in run.tests},
            },
            indent=2,
            sort_keys=True,
        )
        + "\n",
        encoding="utf-8",
    )
    row["tests"] = report
    if run.status in (RunStatus.INVALID, RunStatus.CRASHED):
        row["status"] = "error"
        row["reason"] = f"grading run {run.status.value}: {run.problem or 'no usable report'}"
        return
    row["resolved"] = bool(grade.resolved)
    row["status"] = "resolved" if grade.resolved else "unresolved"
    if not grade.resolved:
        failed = report["FAIL_TO_PASS"]["failure"] + report["PASS_TO_PASS"]["failure"]
        row["reason"] = f"{len(failed)} graded test(s) not passing" + (
            f" (run {run.status.value})" if run.status is not RunStatus.OK else ""
        )


def _swebench_way(inst: Instance, s: EvalSettings, known: Known | None) -> tuple[str, Any] | None:
    """(test command, log parser) from the installed ``swebench`` for this instance, unless the
    config names its own ``eval.grade_tests``."""
    if s.grade_tests_explicit or not inst.repo:
        return None
    spec = known.swebench_spec if known is not None else swebench_specs(inst.repo, inst.version)
    parser = swebench_parser(inst.repo) if spec else None
    command = test_command(spec, inst.test_patch) if spec else None
    if command is None or parser is None:
        return None
    return command, parser


def _usd(graph: Any) -> float:
    total = 0.0
    for _a, _b, d in graph.edges(data=True):
        cost = d.get("cost") or {}
        if isinstance(cost, dict):
            total += float(cost.get("usd") or cost.get("cost_usd") or 0.0)
    return round(total, 6)


def _pack(run_dir: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(str(run_dir), arcname=".")
    return buf.getvalue()


def unpack(archive: bytes, dest: Path) -> None:
    """Write a packed run directory into ``dest`` (a new folder)."""
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.10.12+, 3.11.4+
            tar.extractall(str(dest), filter="data")
            return
        for member in tar.getmembers():  # older: refuse what the "data" filter refuses
            name = Path(member.name)
            if name.is_absolute() or ".." in name.parts or not (member.isfile() or member.isdir()):
                raise ValueError(f"run archive: refused member {member.name!r}")
        tar.extractall(str(dest))  # noqa: S202 - members checked above
