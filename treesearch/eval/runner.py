"""One instance end to end, in whatever process runs it (pool worker, Ray task or the driver).

Search mode: workspace (the base commit materialised from the read-only repository, or a copy
of the local ``workspace``), environment (checked to make the tests import the tree searched),
search (``app.run_from_config``, run directory in a scratch folder), then grading
(``eval.grade``): the best tree materialised into a fresh grading copy, ``test_patch`` applied
there (never in the searched workspace), the tests ``test_patch`` touches run and judged by
SWE-bench's own rule, with our stricter reading beside it. A root that cannot be scored is an
``error`` row; a root that already passes every search test is flagged ``no_signal``.

Grade-only modes (``gold``, ``empty``, ``predictions``): no search; the instance's gold patch,
no patch, or a given prediction is applied to the base commit (``git apply``; one that does not
apply is an ``error`` row with git's message) and graded the same way.

The result is a row and the run directory packed as bytes, so that it can travel back from
another machine; the scratch folder is removed.
"""

from __future__ import annotations

import copy
import io
import os
import resource
import shutil
import tarfile
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from treesearch.errors import TreesearchError
from treesearch.eval.environment import (
    EnvResult,
    EnvSpec,
    Known,
    check_tree_imports,
    env_spec_for,
    prepare_env,
    remove_tree,
)
from treesearch.eval.grade import (
    DEFAULT_GRADE_COMMAND,
    DEFAULT_GRADE_TIMEOUT,
    GradePlan,
    grade_plan,
    grade_tree,
    patch_paths,
    reset_test_files,
)
from treesearch.eval.instances import Instance, find_repo
from treesearch.store.source import PatchError, apply_patch, materialize_commit

__all__ = [
    "MODES",
    "EvalSettings",
    "InstanceInterrupted",
    "InstanceReport",
    "agreeing_score",
    "run_instance",
]

DEFAULT_GRADE = {"command": DEFAULT_GRADE_COMMAND, "timeout": DEFAULT_GRADE_TIMEOUT}
MODES = ("search", "gold", "empty", "predictions")
"""``search``: one search per instance, its best node graded; ``gold``: the instance's own
``patch`` graded (no search); ``empty``: the base commit graded; ``predictions``: the patch of
``EvalSettings.predictions`` graded (``treesearch grade``)."""


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
    mode: str = "search"
    """One of ``MODES``."""
    predictions: Mapping[str, str | None] | None = None
    """``predictions`` mode: instance id -> ``model_patch`` (``None``: the prediction has none)."""


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
        "mode": settings.mode,
        "no_signal": False,
        "resolution": None,
        "strict": None,
        "grade_seconds": None,
    }


def run_instance(
    inst: Instance, settings: EvalSettings, known: Known | None = None
) -> InstanceReport:
    """Run one instance; never raises for the instance's own problems (they become an ``error``
    row); raises ``InstanceInterrupted`` on Ctrl-C. ``known``: what the driver looked up for it
    (``environment.look_up``); without it, this process looks it up. With ``settings.mode``
    other than ``search`` no search runs: the instance's gold patch, no patch, or the given
    prediction is graded."""
    t0 = time.monotonic()
    timing: dict[str, Any] = {"pid": os.getpid(), "start": time.time()}
    cpu0 = _cpu_seconds()
    lap = _Laps(timing)
    scratch = Path(tempfile.mkdtemp(prefix=f"treesearch-eval-{inst.instance_id[:40]}-"))
    row = error_row(inst.instance_id, settings, "")
    archive: bytes | None = None
    try:
        if settings.mode == "search":
            archive = _run(inst, settings, scratch, row, lap, known)
        else:
            archive = _grade_only(inst, settings, scratch, row, lap, known)
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


def _base_tree(inst: Instance, s: EvalSettings, dest: Path, row: dict[str, Any]) -> Path | None:
    """Write the instance's base state into ``dest``; returns the source repository (``None``
    for the local form). Sets ``row["reason"]`` and raises ``_NoBase`` when it cannot."""
    if inst.workspace is not None:
        src = Path(inst.workspace)
        if not src.is_dir():
            row["reason"] = f"workspace {src} is not a folder ({inst.where})"
            raise _NoBase
        shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        return None
    assert inst.repo is not None and inst.base_commit is not None
    repo_path, why = find_repo(Path(s.repos) if s.repos else None, inst.repo)
    if repo_path is None:
        row["reason"] = why
        raise _NoBase
    try:
        materialize_commit(repo_path, inst.base_commit, dest)
    except TreesearchError as exc:
        row["reason"] = f"base_commit {inst.base_commit}: {exc}"
        raise _NoBase from None
    return repo_path


def _base_once(inst: Instance, s: EvalSettings, scratch: Path) -> Callable[[], Path]:
    """A function giving a folder with the instance's base state, written at its first call."""

    def base_tree() -> Path:
        base = scratch / "base" / "tree"
        if not base.exists():
            _base_tree(inst, s, base, {})
        return base

    return base_tree


class _NoBase(Exception):
    """The base state could not be written (the row says why)."""


def _test_env(env: EnvResult, spec: EnvSpec) -> dict[str, str]:
    """Variables of every test run of the instance: the environment's, then its table's."""
    return {**dict(env.env), **dict(spec.test_env)}


def _checker(env_vars: dict[str, str]) -> Any:
    def check(tree: Path) -> Any:
        return check_tree_imports(tree, env_vars)

    return check


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
    try:
        repo_path = _base_tree(inst, s, workspace, row)
    except _NoBase:
        return None
    if s.oracle:
        apply_patch(workspace, inst.test_patch)  # oracle: the grading tests steer the search
    lap("workspace")

    # 2. The environment, and a check that the search's tests import the tree searched.
    spec = env_spec_for(inst, known)
    env = _environment(inst, s, spec, repo_path, workspace)
    lap("env")
    row["env_log"] = str(env.log) if env.log else None
    if env.error is not None:
        row["reason"] = env.error
        return None
    test_env = _test_env(env, spec)
    check = check_tree_imports(workspace, test_env)
    if not check.ok:
        row["import_check"] = {"ok": False, "outside": dict(check.outside)}
        row["reason"] = f"search: {check.reason()}"
        return None

    # 3. The search.
    from treesearch.app import run_from_config
    from treesearch.search.graph import root_of
    from treesearch.store import ShadowStore

    raw = _search_config(inst, s, scratch, workspace, test_env, row)
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
    row["usd"] = round(
        _usd(outcome.graph) + float((outcome.summary.get("judge") or {}).get("usd") or 0), 6
    )
    row["empty_patch"] = not outcome.patch.strip()
    if outcome.stop_reason == "root_invalid":
        detail = outcome.summary.get("stop_detail") or "the root's test run is INVALID"
        row["status"], row["reason"] = "error", f"search: {detail}"
        return _pack(outcome.run_dir)
    root_score = outcome.graph.nodes[root_of(outcome.graph)].get("score")
    row["no_signal"] = bool(not s.oracle and root_score is not None and root_score >= 1.0)
    repro = outcome.summary.get("reproduce")
    if repro is not None:  # search.reproduce: which tests, written from the task, steered it
        row["reproduction"] = _reproduction_row(repro)
        row["tokens"] += int(repro.get("tokens") or 0)  # the reproducing strategy's tokens too
        row["no_signal"] = bool(row["no_signal"] or not repro.get("kept"))

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

    if not s.oracle:
        reset_test_files(grade_dir, inst, patch_paths(outcome.patch), _base_once(inst, s, scratch))
    plan = _plan(inst, s, spec, test_env)
    grade_tree(
        inst,
        grade_dir,
        plan,
        outcome.run_dir / "grade",
        row,
        check_imports=_checker(test_env),
        test_patch_applied=s.oracle,  # with oracle the searched tree holds the tests already
    )
    if repro is not None and repro.get("kept") and inst.patch.strip():
        # How often the strategy reproduced the issue correctly: the kept tests, run on the
        # base commit with the gold patch (never shown to the search).
        row["reproduction"]["passes_with_gold"] = _passes_with_gold(
            inst, s, scratch, outcome.run_dir / "reproduce", repro, raw, name
        )
    if row["no_signal"] and row["status"] != "error":
        why = (
            "no signal: search.reproduce kept no reproduction test, and the root passed every "
            "search test"
            if repro is not None and not repro.get("kept")
            else "no signal: the root already passed every search test, so the search had "
            "nothing to climb (give it one: see README, SWE-bench in practice)"
        )
        row["reason"] = why + (f"; {row['reason']}" if row.get("reason") else "")
    lap("grade")
    archive = _pack(outcome.run_dir)
    lap("pack")
    return archive


def _search_config(
    inst: Instance,
    s: EvalSettings,
    scratch: Path,
    workspace: Path,
    test_env: dict[str, str],
    row: dict[str, Any],
) -> dict[str, Any]:
    """The eval config made the config of one instance's search in ``workspace``: its task,
    its run id, its search tests and their environment."""
    raw = copy.deepcopy(s.config)
    raw["workspace"] = {"path": str(workspace)}
    store = raw.setdefault("store", {})
    store["home"] = str(scratch / "home")
    out_cfg = raw.setdefault("output", {})
    out_cfg["run_id"] = inst.instance_id
    out_cfg["instance_id"] = inst.instance_id
    if s.task_from_instance and inst.problem_statement.strip():
        raw["task"] = inst.problem_statement
    scoring = raw["scoring"] = raw.get("scoring") or {}  # `scoring: null` is no section
    tests = scoring["search_tests"] = scoring.get("search_tests") or {}  # nor `search_tests: null`
    if inst.search_tests:
        tests["command"] = inst.search_tests
        row["steer"] = {**row["steer"], "search_tests": inst.search_tests}
    if test_env:
        tests["env"] = {**test_env, **(tests.get("env") or {})}
    scoring["score"] = agreeing_score(scoring.get("score", "pass_fraction"))
    return raw


def _gold_reproduction(
    inst: Instance,
    s: EvalSettings,
    scratch: Path,
    test_env: dict[str, str],
    row: dict[str, Any],
    out: Path,
    name: str,
) -> None:
    """``eval --gold`` with a config that sets ``search.reproduce``: the reproduction step alone
    (a search of no expansion) on the base commit, its kept tests run with the gold patch.
    The row's ``reproduction`` says how often the strategy reproduced the issue correctly; the
    record goes into the instance's folder (``reproduce/``)."""
    from treesearch.app import run_from_config

    workspace = scratch / "work" / name
    try:
        _base_tree(inst, s, workspace, row)
    except _NoBase:
        return
    raw = _search_config(inst, s, scratch, workspace, test_env, row)
    search = raw.setdefault("search", {})
    search["budget"] = {**(search.get("budget") or {}), "expansions": 0}
    outcome = run_from_config(
        raw, base_dir=Path(s.base_dir), runs_dir=scratch / "runs", source=s.source
    )
    if outcome.interrupted:
        raise InstanceInterrupted(inst.instance_id)
    repro = outcome.summary.get("reproduce") or {}
    row["reproduction"] = _reproduction_row(repro)
    row["tokens"] += int(repro.get("tokens") or 0)
    if (outcome.run_dir / "reproduce").is_dir():
        shutil.copytree(outcome.run_dir / "reproduce", out / "reproduce")
    if repro.get("kept") and inst.patch.strip():
        row["reproduction"]["passes_with_gold"] = _passes_with_gold(
            inst, s, scratch, outcome.run_dir / "reproduce", repro, raw, name
        )


def _reproduction_row(repro: dict[str, Any]) -> dict[str, Any]:
    """The eval row's account of ``search.reproduce``: the kept files (the path the strategy
    wrote, the copy in the run's ``reproduce/`` folder, the tests that failed at the root) and
    the dropped ones with their reasons."""
    return {
        "strategy": repro.get("strategy"),
        "attempts": repro.get("attempts"),
        "kept": [
            {"from": k.get("from"), "file": k.get("file"), "failing": k.get("failing", [])}
            for k in repro.get("kept", [])
        ],
        "dropped": [
            {"from": d.get("from"), "reason": d.get("reason")} for d in repro.get("dropped", [])
        ],
        "tokens": repro.get("tokens", 0),
        "test_runs": repro.get("test_runs", 0),
    }


def _passes_with_gold(
    inst: Instance,
    s: EvalSettings,
    scratch: Path,
    folder: Path,
    repro: dict[str, Any],
    raw: dict[str, Any],
    name: str,
) -> dict[str, bool] | None:
    """Kept reproduction file -> whether it passes on the base commit with the gold patch
    (``None`` when that tree cannot be made)."""
    from treesearch.scoring.spec import TestSpec
    from treesearch.search.reproduce import check_file

    gold = scratch / "gold" / name
    try:
        _base_tree(inst, s, gold, {})
        apply_patch(gold, inst.patch)
    except (_NoBase, PatchError, TreesearchError):
        return None
    spec = TestSpec.model_validate(raw["scoring"]["search_tests"])  # made by _search_config
    out: dict[str, bool] = {}
    for k in repro.get("kept", []):
        kept, reason, _run = check_file(folder / str(k["file"]), gold, spec)
        out[str(k["file"])] = not kept and reason.startswith("passes")
    return out


def agreeing_score(score: Any) -> Any:
    """The search's score, made to agree with SWE-bench's grade on every outcome: an XPASS is
    no pass for the harness (its log parser has no such status), so it is none for the score
    either. A score given with its own ``xpass`` setting is left as it is."""
    if isinstance(score, str) and score in ("pass_fraction", "resolved"):
        return {"kind": score, "xpass": "fail"}
    if isinstance(score, dict) and score.get("kind") in ("pass_fraction", "resolved"):
        return {"xpass": "fail", **score}
    return score


def _plan(inst: Instance, s: EvalSettings, spec: EnvSpec, test_env: dict[str, str]) -> GradePlan:
    return grade_plan(
        inst,
        s.grade_tests,
        explicit=s.grade_tests_explicit,
        env_test_cmd=spec.test_cmd,
        env_source={"table": "setup table", "swebench": "swebench spec"}.get(
            spec.source, spec.source
        ),
        env_vars=test_env,
        source=s.source,
    )


def _grade_only(
    inst: Instance,
    s: EvalSettings,
    scratch: Path,
    row: dict[str, Any],
    lap: _Laps,
    known: Known | None,
) -> bytes | None:
    """Grade the gold patch, no patch, or a given prediction at the base commit (no search)."""
    name = (inst.repo or inst.instance_id).rsplit("/", 1)[-1] or "workspace"
    grade_dir = scratch / "grade" / name
    out = scratch / "out"
    out.mkdir()
    row["mode"] = s.mode
    patch: str | None
    if s.mode == "gold":
        patch = inst.patch
    elif s.mode == "empty":
        patch = ""
    else:
        patch = (s.predictions or {}).get(inst.instance_id)
    row["empty_patch"] = not (patch or "").strip()
    try:
        repo_path = _base_tree(inst, s, grade_dir, row)
    except _NoBase:
        return None
    (out / "patch.diff").write_text(patch or "", encoding="utf-8")
    row["run_dir"] = f"instances/{inst.instance_id}"
    lap("workspace")
    if row["empty_patch"] and s.mode == "predictions":
        # As the harness: an empty prediction is not run; it counts as not resolved.
        row["status"], row["reason"] = "unresolved", "empty patch (not run, as the harness does)"
        return _pack(out)
    spec = env_spec_for(inst, known)
    env = _environment(inst, s, spec, repo_path, grade_dir)
    lap("env")
    row["env_log"] = str(env.log) if env.log else None
    if env.error is not None:
        row["reason"] = env.error
        return _pack(out)
    if patch:
        try:
            apply_patch(grade_dir, patch)
        except PatchError as exc:
            said = "; ".join(line for line in exc.git_message.splitlines() if line.strip())
            row["patch_applied"] = False
            row["status"], row["reason"] = "error", f"the patch does not apply (git apply: {said})"
            (out / "error.txt").write_text(row["reason"] + "\n", encoding="utf-8")
            return _pack(out)
        reset_test_files(grade_dir, inst, patch_paths(patch), _base_once(inst, s, scratch))
    row["patch_applied"] = True
    test_env = _test_env(env, spec)
    if s.mode == "gold" and ((s.config or {}).get("search") or {}).get("reproduce"):
        _gold_reproduction(inst, s, scratch, test_env, row, out, name)
        lap("reproduce")
    grade_tree(
        inst,
        grade_dir,
        _plan(inst, s, spec, test_env),
        out / "grade",
        row,
        check_imports=_checker(test_env),
    )
    lap("grade")
    archive = _pack(out)
    lap("pack")
    return archive


def _environment(
    inst: Instance, s: EvalSettings, spec: EnvSpec, repo_path: Path | None, workspace: Path
) -> EnvResult:
    def materialize(dest: Path) -> None:
        commit = inst.environment_setup_commit or inst.base_commit
        if repo_path is not None and commit:
            materialize_commit(repo_path, commit, dest)
        else:
            shutil.copytree(workspace, dest, symlinks=True)

    root = Path(s.env_dir) if s.env_dir else Path(tempfile.gettempdir()) / "treesearch-envs"
    return prepare_env(spec, root, materialize, timeout=s.setup_timeout)


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
