"""``run_eval``: one search per instance, on an executor, into a resumable eval directory.

The eval directory::

    eval.yaml          resolved: the config (with its ``eval`` section), where things came from
    instances.jsonl    the instances as read (resume reads this copy)
    instances/<id>/    each a normal run directory (``graph.json``, ``events.jsonl``, ...) plus
                       ``grade/`` (the grading run's output and report)
    results.jsonl      one row per finished instance (a journal while the batch runs; rewritten
                       in the instances' order when it ends, whatever order they ran in)
    predictions.jsonl  SWE-bench predictions of the finished instances (empty ``model_patch``
                       when there is no patch)
    summary.json       totals; ``status`` finished or interrupted

Only the driver writes here. A finished instance is committed as: run directory unpacked into a
temporary folder, renamed into ``instances/<id>``, then its row appended and flushed to disk.
Killing the driver at any point loses at most the instances in flight; ``resume_eval`` skips the
finished ones (rows in ``results.jsonl``) and redoes the others.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import importlib.util
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError

from treesearch import __version__
from treesearch._atomic import hold_folder, write_text
from treesearch.config import apply_overrides, origin, validate
from treesearch.errors import ConfigError, TreesearchError
from treesearch.eval.environment import look_up
from treesearch.eval.instances import Instance, load_instances
from treesearch.eval.predictions import Prediction, load_predictions
from treesearch.eval.runner import (
    DEFAULT_GRADE,
    MODES,
    EvalSettings,
    InstanceReport,
    error_row,
    steer_of,
    unpack,
)
from treesearch.eval.schedule import DurationsError, longest_first, read_durations, results_file
from treesearch.eval.setup_table import load_setup_table
from treesearch.report import try_write_batch_report
from treesearch.scoring import TestSpec
from treesearch.validation import MAX_SECONDS, Number, config_error

__all__ = ["EvalError", "EvalOutcome", "EvalSection", "load_eval_config", "resume_eval", "run_eval"]

EventFn = Callable[[dict[str, Any]], None]
STATUSES = ("resolved", "unresolved", "error")


class EvalError(TreesearchError):
    """The batch cannot run (eval directory in use or not one, bad arguments)."""


@dataclass
class EvalOutcome:
    """What a batch (or the part of it this call ran) produced."""

    out: Path
    rows: list[dict[str, Any]]
    """Rows of the finished instances, in the instances' order."""
    summary: dict[str, Any]
    interrupted: bool = False
    skipped: list[str] = field(default_factory=list)
    """Instances finished by an earlier call (resume) and not run again."""


# ------------------------------------------------------------------------------ config


def _read_yaml(path: Path, depth: int = 0) -> tuple[dict[str, Any], Path]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    base_dir = path.parent.resolve()
    parent = raw.pop("extends", None)
    if parent is not None:
        if not isinstance(parent, str) or depth > 8:
            raise ConfigError(f"{path}: extends: must name another config file (no cycles)")
        base, base_dir = _read_yaml(base_dir / parent, depth + 1)
        raw = _merge(base, raw)
    return raw, base_dir


def _merge(a: dict[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), dict) else v
    return out


class EvalSection(BaseModel):
    """The ``eval`` section of an eval config: how each instance is set up, searched and graded.
    Each field's description is what a bad value is told."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    oracle: StrictBool = Field(False, description="true or false")
    """Steer the search by the grading tests (an upper bound, labelled in every output)."""
    grade_tests: TestSpec | None = None
    """The grading tests; unset: SWE-bench's own command, else ``DEFAULT_GRADE``."""
    setup_timeout: Number = Field(
        1800.0, gt=0, le=MAX_SECONDS, description="a positive number of seconds (at most a year)"
    )
    """Seconds an instance's environment set-up may take."""
    env_dir: StrictStr | None = Field(None, description="a folder path")
    """Where environments are kept (relative: to the config's folder); unset: the eval's."""
    task_from_instance: StrictBool = Field(True, description="true or false")
    """The instance's ``problem_statement`` is the agents' task."""
    setup: StrictStr | None = Field(None, description="the path of a set-up table (YAML)")
    """A set-up table (``setup_table``) for instances without set-up commands of their own."""


def _eval_section(section: Any, source: str, overrides: Sequence[str]) -> EvalSection:
    """The ``eval`` section validated; ``ConfigError`` names the file (or the ``-c`` override
    to blame) and the key path."""
    try:
        return EvalSection.model_validate({} if section is None else section)
    except ValidationError as exc:
        at = origin(["eval", *exc.errors()[0]["loc"]], source, overrides)
        raise config_error(exc, EvalSection, at, "eval") from None


def load_eval_config(
    path: str | Path, overrides: Sequence[str] = ()
) -> tuple[dict[str, Any], EvalSection, str, Path]:
    """(search config without workspace or ``eval``, the ``eval`` section, source, base dir).

    Raises ``ConfigError`` naming the file (or ``-c`` override) and key of any problem."""
    p = Path(path)
    raw, base_dir = _read_yaml(p)
    raw = apply_overrides(raw, overrides)
    source = str(p)
    section = _eval_section(raw.pop("eval", None), source, overrides)
    if "workspace" in raw:
        raise ConfigError(
            f"{source}: workspace: an eval config has no workspace (each instance brings its "
            "own); remove the section"
        )
    checked = copy.deepcopy(raw)
    checked["workspace"] = {"path": str(base_dir)}
    validate(checked, source=source, base_dir=base_dir, overrides=overrides)
    return raw, section, source, base_dir


# ------------------------------------------------------------------------------ entry points


def run_eval(
    config: str | Path | None = None,
    instances: str | Path | None = None,
    *,
    repos: str | Path | None = None,
    out: str | Path | None = None,
    workers: int | None = None,
    executor: str = "local",
    ray_address: str | None = None,
    overrides: Sequence[str] = (),
    resume: str | Path | None = None,
    on_event: EventFn | None = None,
    durations_from: str | Path | None = None,
    mode: str = "search",
    setup: str | Path | None = None,
    predictions: str | Path | None = None,
) -> EvalOutcome:
    """Run one search per instance of ``instances`` with the search config ``config``.

    ``mode`` (``runner.MODES``): ``gold`` grades each instance's own patch, ``empty`` the base
    commit, ``predictions`` the patches of the ``predictions`` file (SWE-bench's format): no
    search, and ``config`` is optional (its ``eval`` section and ``-c`` still apply).
    ``setup``: a set-up table (``setup_table``) for instances without set-up commands of their
    own; it overrides the config's ``eval.setup``.
    ``resume=DIR`` continues an earlier batch instead (``config`` and ``instances`` unset).
    ``workers`` defaults to the CPU count; ``executor`` is ``local`` (process pool) or ``ray``.
    ``durations_from``: an earlier eval of these instances (its directory or ``results.jsonl``):
    instances start longest first by the seconds it recorded (see ``eval.schedule``).
    ``on_event`` receives progress events (``eval_started``, ``instance_finished``,
    ``eval_finished``); nothing is printed.
    """
    if resume is not None:
        if config is not None or instances is not None or overrides:
            raise EvalError("resume takes the eval directory only (no config, instances or -c)")
        return resume_eval(
            resume,
            workers=workers,
            executor=executor,
            ray_address=ray_address,
            on_event=on_event,
            durations_from=durations_from,
        )
    if mode not in MODES:
        raise EvalError(f"mode {mode!r}: must be one of {', '.join(MODES)}")
    if instances is None or (config is None and mode == "search"):
        raise EvalError("run_eval needs a config and an instances file (or resume=DIR)")
    if (mode == "predictions") != (predictions is not None):
        raise EvalError("a predictions file goes with mode='predictions', and only with it")
    check_executor(executor, workers)
    durations = read_durations(durations_from) if durations_from is not None else None
    if config is not None:
        raw, section, source, base_dir = load_eval_config(config, overrides)
    else:
        raw, section, source, base_dir = _grading_only_config(overrides)
    if setup is not None:
        section = section.model_copy(update={"setup": str(Path(setup).resolve())})
    elif section.setup:
        given = Path(section.setup).expanduser()
        resolved_setup = str(given if given.is_absolute() else (base_dir / given).resolve())
        section = section.model_copy(update={"setup": resolved_setup})
    if section.setup:
        load_setup_table(section.setup)  # checked before anything runs
    inst_path = Path(instances)
    items = load_instances(inst_path)
    preds: dict[str, Prediction] | None = None
    if predictions is not None:
        preds = load_predictions(predictions)
        unknown = sorted(set(preds) - {i.instance_id for i in items})
        if unknown:
            raise EvalError(
                f"{predictions}: {len(unknown)} prediction(s) name instances that are not in "
                f"{instances}: {', '.join(unknown[:5])}{' ...' if len(unknown) > 5 else ''}"
            )
    repos_dir = Path(repos).resolve() if repos is not None else None
    if repos_dir is not None and not repos_dir.is_dir():
        raise EvalError(f"--repos {repos}: not a folder")
    target = Path(out) if out is not None else _default_out()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise EvalError(
            f"{target} already exists and is not empty: give a new --out, or continue it with "
            f"`treesearch eval --resume {target}`"
        )
    target.mkdir(parents=True, exist_ok=True)
    target = target.resolve()
    full = dict(raw)
    full["eval"] = section.model_dump(mode="json", exclude_unset=True)
    resolved = {
        "treesearch": __version__,
        "config": full,
        "source": str(Path(config).resolve()) if config is not None else source,
        "mode": mode,
        "base_dir": str(base_dir),
        "instances": str(inst_path.resolve()),
        "instances_sha256": hashlib.sha256(inst_path.read_bytes()).hexdigest(),
        "repos": str(repos_dir) if repos_dir else None,
        "executor": executor,
        "workers": workers,
        "ray_address": ray_address,
        "durations_from": _durations_source(durations_from),
        "steer": None,
    }
    with _locked(target):
        _write_jsonl(target / "instances.jsonl", [i.to_json() for i in items])
        if preds is not None:
            _write_jsonl(
                target / "predictions-graded.jsonl",
                [dataclasses.asdict(p) for p in preds.values()],
            )
        settings = _settings(resolved, target, section)
        resolved["steer"] = steer_of(settings)
        _atomic_write(target / "eval.yaml", yaml.safe_dump(resolved, sort_keys=False))
        return _batch(
            target,
            items,
            settings,
            resolved,
            {},
            workers,
            executor,
            ray_address,
            on_event,
            durations,
        )


def resume_eval(
    out: str | Path,
    *,
    workers: int | None = None,
    executor: str | None = None,
    ray_address: str | None = None,
    on_event: EventFn | None = None,
    durations_from: str | Path | None = None,
) -> EvalOutcome:
    """Continue the batch of eval directory ``out``: finished instances are skipped, the others
    run (again). ``executor``/``workers``/``ray_address``/``durations_from`` default to the
    first run's (an earlier eval that can no longer be read leaves the input order)."""
    target = Path(out).resolve()
    meta = target / "eval.yaml"
    if not meta.is_file():
        raise EvalError(f"{out}: not an eval directory (no eval.yaml)")
    try:
        resolved = yaml.safe_load(meta.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise EvalError(f"{meta}: cannot read: {exc}") from None
    executor = executor or resolved.get("executor") or "local"
    workers = workers if workers is not None else resolved.get("workers")
    ray_address = ray_address or resolved.get("ray_address")
    check_executor(executor, workers)
    durations: dict[str, float] | None = None
    if durations_from is not None:
        durations = read_durations(durations_from)
    elif resolved.get("durations_from"):
        with contextlib.suppress(DurationsError):  # only the order depends on it
            durations = read_durations(resolved["durations_from"])
    with _locked(target):
        items = load_instances(target / "instances.jsonl")
        section = _eval_section(resolved["config"].get("eval"), str(meta), ())
        settings = _settings(resolved, target, section)
        done = _finished_rows(target, {i.instance_id for i in items})
        return _batch(
            target,
            items,
            settings,
            resolved,
            done,
            workers,
            executor,
            ray_address,
            on_event,
            durations,
        )


def check_executor(
    executor: str, workers: int | None, error: type[TreesearchError] = EvalError
) -> None:
    """The executor arguments, checked before anything runs (``treesearch eval`` and
    ``compare``); ``error``: the caller's error class."""
    if executor not in ("local", "ray"):
        raise error(f"--executor {executor}: must be local or ray")
    if workers is not None and (isinstance(workers, bool) or workers < 1):
        raise error(f"--workers {workers}: must be at least 1")
    if executor == "ray" and importlib.util.find_spec("ray") is None:
        raise error(
            "--executor ray needs Ray: install it with `pip install -e '.[ray]'` "
            "(or `pip install 'ray>=2.9'`)"
        )


def _durations_source(path: str | Path | None) -> str | None:
    return None if path is None else str(results_file(path).resolve())


def _default_out() -> Path:
    return Path("evals") / time.strftime("eval-%Y%m%d-%H%M%S", time.gmtime())


def _settings(resolved: Mapping[str, Any], target: Path, section: EvalSection) -> EvalSettings:
    cfg = copy.deepcopy(resolved["config"])
    cfg.pop("eval", None)
    env_dir = section.env_dir
    if env_dir:
        env_path = Path(env_dir).expanduser()
        env_dir = str(env_path if env_path.is_absolute() else Path(resolved["base_dir"]) / env_path)
    grade = section.grade_tests
    return EvalSettings(
        config=cfg,
        source=resolved["source"],
        base_dir=resolved["base_dir"],
        oracle=section.oracle,
        grade_tests=grade.model_dump(exclude_unset=True) if grade else dict(DEFAULT_GRADE),
        setup_timeout=section.setup_timeout,
        env_dir=env_dir or str(target / "envs"),
        repos=resolved.get("repos"),
        task_from_instance=section.task_from_instance,
        grade_tests_explicit=grade is not None,
        mode=str(resolved.get("mode") or "search"),
        predictions=_graded_predictions(target) if resolved.get("mode") == "predictions" else None,
    )


def _graded_predictions(target: Path) -> dict[str, str | None]:
    """The patches of a ``grade`` batch, from the copy of the predictions file it keeps."""
    out: dict[str, str | None] = {}
    path = target / "predictions-graded.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            out[row["instance_id"]] = row["model_patch"]
    return out


def _model_names(target: Path) -> dict[str, str]:
    path = target / "predictions-graded.jsonl"
    if not path.is_file():
        return {}
    out: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            out[row["instance_id"]] = row["model_name_or_path"]
    return out


def _grading_only_config(
    overrides: Sequence[str],
) -> tuple[dict[str, Any], EvalSection, str, Path]:
    """The config of a grading-only batch given no config file: an ``eval`` section from
    ``-c eval.KEY=VALUE`` overrides alone."""
    raw = apply_overrides({}, overrides)
    section = raw.pop("eval", None)
    other = sorted(raw)
    if other:
        raise ConfigError(
            f"-c {other[0]}...: without a config file only eval.* keys can be set "
            f"({', '.join(EvalSection.model_fields)})"
        )
    return {}, _eval_section(section, "-c", overrides), "<no config>", Path.cwd().resolve()


def _locked(target: Path) -> contextlib.AbstractContextManager[None]:
    return hold_folder(
        target / ".lock",
        lambda pid: EvalError(f"{target} is in use by another treesearch eval (pid {pid})"),
    )


# ------------------------------------------------------------------------------ the batch


def _finished_rows(target: Path, ids: set[str]) -> dict[str, dict[str, Any]]:
    """Rows already committed; run folders of unfinished instances are removed."""
    done: dict[str, dict[str, Any]] = {}
    path = target / "results.jsonl"
    if path.is_file():
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue  # a torn last line: that instance was not committed
            if isinstance(row, dict) and row.get("instance_id") in ids:
                done[row["instance_id"]] = row
    inst_dir = target / "instances"
    if inst_dir.is_dir():
        for child in inst_dir.iterdir():
            if child.name not in done or child.name.startswith("."):
                shutil.rmtree(child, ignore_errors=True)
    for iid, row in list(done.items()):
        if row.get("run_dir") and not (target / row["run_dir"]).is_dir():
            del done[iid]  # its run folder is gone: run it again
    return done


def _batch(
    target: Path,
    items: list[Instance],
    settings: EvalSettings,
    resolved: Mapping[str, Any],
    done: dict[str, dict[str, Any]],
    workers: int | None,
    executor: str,
    ray_address: str | None,
    on_event: EventFn | None,
    durations: Mapping[str, float] | None = None,
) -> EvalOutcome:
    from treesearch.eval.executors import run_local, run_ray

    emit = on_event or (lambda e: None)
    todo = [i for i in items if i.instance_id not in done]
    if settings.mode == "predictions":
        # As the harness: an instance without a prediction is not run (``incomplete_ids``).
        todo = [i for i in todo if i.instance_id in (settings.predictions or {})]
    if durations is not None:
        todo = longest_first(todo, durations)
    setup_path = (resolved["config"].get("eval") or {}).get("setup")
    table = load_setup_table(setup_path) if setup_path else None
    known = look_up(todo, table)  # once here, not in every worker
    n_workers = workers or os.cpu_count() or 1
    skipped = [i.instance_id for i in items if i.instance_id in done]
    model = str((settings.config.get("output") or {}).get("model_name", "treesearch"))
    (target / "instances").mkdir(exist_ok=True)
    t0 = time.monotonic()
    new = 0
    emit(
        {
            "event": "eval_started",
            "out": str(target),
            "total": len(items),
            "todo": len(todo),
            "skipped": len(skipped),
            "executor": executor,
            "workers": n_workers,
            "steer": steer_of(settings),
            "mode": settings.mode,
            "order": "input" if durations is None else "longest_first",
            "time": time.time(),
        }
    )
    # The journal of this session starts from the committed rows (a torn line is dropped).
    _write_jsonl(
        target / "results.jsonl", [done[i.instance_id] for i in items if i.instance_id in done]
    )
    journal = open(target / "results.jsonl", "a", encoding="utf-8")  # noqa: SIM115

    def on_result(iid: str, result: InstanceReport | BaseException) -> None:
        nonlocal new
        received = time.monotonic()
        timing: dict[str, Any] = {}
        if isinstance(result, BaseException):
            row = _worker_error_row(iid, settings, result)
        else:
            timing = dict(result.timing)
            row = result.row
            if result.run_archive is not None:
                final = target / "instances" / iid
                tmp = target / "instances" / f".{iid}.partial"
                shutil.rmtree(tmp, ignore_errors=True)
                shutil.rmtree(final, ignore_errors=True)
                unpack(result.run_archive, tmp)
                (tmp / "eval-row.json").write_text(json.dumps(row, indent=2) + "\n")
                os.replace(tmp, final)
        # Done before the journal line: a Ctrl-C while it is written (the fsync can take a
        # while) must not drop a row the journal may already hold from the final rewrite.
        done[iid] = row
        new += 1
        journal.write(json.dumps(row, sort_keys=True) + "\n")
        journal.flush()
        os.fsync(journal.fileno())
        timing["commit"] = round(time.monotonic() - received, 3)  # the driver's share
        elapsed = time.monotonic() - t0
        left = len(items) - len(done)
        emit(
            {
                "event": "instance_finished",
                "row": row,
                "done": len(done),
                "total": len(items),
                "resolved": sum(1 for r in done.values() if r["status"] == "resolved"),
                "errors": sum(1 for r in done.values() if r["status"] == "error"),
                "elapsed": elapsed,
                "eta_seconds": (elapsed / new) * left if new else None,
                "timing": timing,
            }
        )

    interrupted = False
    try:
        if todo:
            if executor == "ray":
                run_ray(todo, settings, n_workers, ray_address, on_result, known)
            else:
                run_local(todo, settings, n_workers, on_result, known)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        journal.close()
    rows = [done[i.instance_id] for i in items if i.instance_id in done]
    _write_jsonl(target / "results.jsonl", rows)
    names = _model_names(target)
    predictions = [_prediction(target, r, names.get(r["instance_id"], model)) for r in rows]
    _write_jsonl(target / "predictions.jsonl", predictions)
    run_report = swebench_run_report(items, rows, settings)
    _atomic_write(target / "report.json", json.dumps(run_report, indent=4) + "\n")
    expected = len(items)
    if settings.mode == "predictions":
        expected = sum(1 for i in items if i.instance_id in (settings.predictions or {}))
    interrupted = interrupted or len(rows) < expected
    prior = 0.0
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
        prior = float(json.loads((target / "summary.json").read_text()).get("wall_seconds", 0.0))
    session = time.monotonic() - t0
    summary = summarize(rows, len(items), settings, resolved, interrupted, prior + session)
    summary["session_seconds"] = round(session, 3)
    _atomic_write(target / "summary.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")
    warning = try_write_batch_report(target)  # the page reads summary.json: written after it
    if warning is not None:
        summary["warnings"] = [*summary.get("warnings", []), warning]
        _atomic_write(target / "summary.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")
    emit({"event": "eval_finished", "summary": summary, "out": str(target)})
    return EvalOutcome(target, rows, summary, interrupted, skipped)


def _worker_error_row(iid: str, settings: EvalSettings, exc: BaseException) -> dict[str, Any]:
    return error_row(iid, settings, f"the worker running it failed: {type(exc).__name__}: {exc}")


def swebench_run_report(
    items: Sequence[Instance], rows: Sequence[Mapping[str, Any]], settings: EvalSettings
) -> dict[str, Any]:
    """The official harness's run report (``make_run_report``'s fields, schema 2) of a batch:
    an instance not run is ``incomplete``, an empty prediction ``empty_patch`` (graded by
    ``--empty`` all the same, to check the set, but listed as the harness lists it), an
    ``error`` row an error, the others completed and resolved or not."""
    by_id = {r["instance_id"]: r for r in rows}
    submitted = (
        sorted(settings.predictions or {}) if settings.mode == "predictions" else sorted(by_id)
    )
    ids: dict[str, set[str]] = {
        k: set()
        for k in ("completed", "incomplete", "empty_patch", "resolved", "unresolved", "error")
    }
    for inst in items:
        iid = inst.instance_id
        row = by_id.get(iid)
        if row is None or iid not in submitted:
            ids["incomplete"].add(iid)
        elif row.get("empty_patch"):
            ids["empty_patch"].add(iid)
        elif row["status"] == "error":
            ids["error"].add(iid)
        else:
            ids["completed"].add(iid)
            ids["resolved" if row["status"] == "resolved" else "unresolved"].add(iid)
    return {
        "total_instances": len(items),
        "submitted_instances": len(submitted),
        "completed_instances": len(ids["completed"]),
        "resolved_instances": len(ids["resolved"]),
        "unresolved_instances": len(ids["unresolved"]),
        "empty_patch_instances": len(ids["empty_patch"]),
        "error_instances": len(ids["error"]),
        "completed_ids": sorted(ids["completed"]),
        "incomplete_ids": sorted(ids["incomplete"]),
        "empty_patch_ids": sorted(ids["empty_patch"]),
        "submitted_ids": submitted,
        "resolved_ids": sorted(ids["resolved"]),
        "unresolved_ids": sorted(ids["unresolved"]),
        "error_ids": sorted(ids["error"]),
        "schema_version": 2,
    }


def _prediction(target: Path, row: Mapping[str, Any], model: str) -> dict[str, Any]:
    patch = ""
    if row.get("run_dir"):
        for name in ("best.patch", "patch.diff"):
            with contextlib.suppress(OSError):
                patch = (target / row["run_dir"] / name).read_text(encoding="utf-8")
                break
    return {
        "instance_id": row["instance_id"],
        "model_name_or_path": model,
        "model_patch": patch,
        "oracle": bool(row.get("oracle")),
    }


def summarize(
    rows: Sequence[Mapping[str, Any]],
    total: int,
    settings: EvalSettings,
    resolved_cfg: Mapping[str, Any],
    interrupted: bool,
    seconds: float,
) -> dict[str, Any]:
    """Totals of the finished rows (``summary.json``)."""
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in STATUSES}
    return {
        "status": "interrupted" if interrupted else "finished",
        "total": total,
        "done": len(rows),
        "not_run": total - len(rows),
        **counts,
        "resolved_rate": round(counts["resolved"] / total, 4) if total else 0.0,
        "mode": settings.mode,
        "no_signal": sum(1 for r in rows if r.get("no_signal")),
        "no_signal_ids": [r["instance_id"] for r in rows if r.get("no_signal")],
        "empty_patch": sum(1 for r in rows if r.get("empty_patch")),
        **_reproduction_totals(rows),
        "strict_resolved": sum(1 for r in rows if (r.get("strict") or {}).get("resolved")),
        "grade_seconds": round(sum(float(r.get("grade_seconds") or 0.0) for r in rows), 3),
        "steer": steer_of(settings),
        "oracle": settings.oracle,
        "test_runs": sum(int(r.get("test_runs") or 0) for r in rows),
        "tokens": sum(int(r.get("tokens") or 0) for r in rows),
        "usd": round(sum(float(r.get("usd") or 0.0) for r in rows), 6),
        "instance_seconds": round(sum(float(r.get("seconds") or 0.0) for r in rows), 3),
        "wall_seconds": round(seconds, 3),
        "executor": resolved_cfg.get("executor"),
        "config": resolved_cfg.get("source"),
        "instances": resolved_cfg.get("instances"),
    }


def _reproduction_totals(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """With ``search.reproduce``: rows steered by a kept reproduction, and rows whose kept
    reproduction passes with the gold patch (how often the writer reproduced the issue
    correctly); nothing without it."""
    repro = [r["reproduction"] for r in rows if r.get("reproduction") is not None]
    if not repro:
        return {}
    kept = [r for r in repro if r.get("kept")]
    checked = [r for r in kept if r.get("passes_with_gold") is not None]
    return {
        "reproduction": {
            "rows": len(repro),
            "kept": len(kept),
            "checked_with_gold": len(checked),
            "passes_with_gold": sum(1 for r in checked if any(r["passes_with_gold"].values())),
        }
    }


# ------------------------------------------------------------------------------ files


def _atomic_write(path: Path, text: str) -> None:
    write_text(path, text, fsync=True)


def _write_jsonl(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    _atomic_write(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
