"""``run_compare``: the matrix contenders x seeds x instances, one eval batch per cell.

The compare directory::

    compare.yaml                  the checked SPEC (absolute paths, each config's sha256), the
                                  instance ids, the executor
    cells/<contender>/seed-<s>/   an eval directory each (``treesearch eval``'s own layout:
                                  results.jsonl, instances/<id>/ run directories, summary.json)
    compare.json, compare.csv     written at the end of every call (``outputs.write_outputs``)

A cell is one ``treesearch eval`` batch of one contender at one seed over every instance, run by
``eval.run_eval`` on its executor (local process pool or Ray): the eval machinery schedules the
instances, commits each finished one to disk and resumes. ``resume_compare`` skips the cells
whose batch finished, continues the one cut short (``eval.resume_eval``: its finished instances
are kept) and starts the others. Killing the driver loses at most the instances in flight.
Nothing here prints: progress goes to ``on_event``.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from treesearch import __version__
from treesearch._atomic import hold_folder
from treesearch.compare.layout import atomic_write, cell_dir, cell_finished
from treesearch.compare.outputs import build_compare, write_outputs
from treesearch.compare.spec import CompareSpec, Contender, load_spec
from treesearch.errors import TreesearchError
from treesearch.eval.batch import check_executor

__all__ = ["CompareError", "CompareOutcome", "resume_compare", "run_compare"]

EventFn = Callable[[dict[str, Any]], None]


class CompareError(TreesearchError):
    """The comparison cannot run (directory in use or not one, changed configs, bad arguments)."""


@dataclass
class CompareOutcome:
    out: Path
    data: dict[str, Any]
    """What ``compare.json`` holds."""
    interrupted: bool = False
    skipped_cells: list[str] = field(default_factory=list)
    """Cells (``contender/seed-S``) finished by an earlier call and not run again."""


def run_compare(
    spec: str | Path | CompareSpec,
    *,
    out: str | Path | None = None,
    workers: int | None = None,
    executor: str = "local",
    ray_address: str | None = None,
    on_event: EventFn | None = None,
) -> CompareOutcome:
    """Run every contender of ``spec`` (a SPEC file or a checked ``CompareSpec``) over its
    instances at each seed, into a new compare directory ``out``."""
    from treesearch.eval import load_instances

    checked = spec if isinstance(spec, CompareSpec) else load_spec(spec)
    check_executor(executor, workers, CompareError)
    items = load_instances(Path(checked.instances))
    target = Path(out) if out is not None else _default_out()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise CompareError(
            f"{target} already exists and is not empty: give a new --out, or continue it with "
            f"`treesearch compare --resume {target}`"
        )
    target.mkdir(parents=True, exist_ok=True)
    target = target.resolve()
    meta = {
        "treesearch": __version__,
        "spec": checked.to_json(),
        "instance_ids": [i.instance_id for i in items],
        "instances_sha256": hashlib.sha256(Path(checked.instances).read_bytes()).hexdigest(),
        "executor": executor,
        "workers": workers,
        "ray_address": ray_address,
    }
    with _locked(target):
        atomic_write(target / "compare.yaml", yaml.safe_dump(meta, sort_keys=False))
        return _matrix(target, checked, meta, workers, executor, ray_address, on_event)


def resume_compare(
    out: str | Path,
    *,
    workers: int | None = None,
    executor: str | None = None,
    ray_address: str | None = None,
    on_event: EventFn | None = None,
) -> CompareOutcome:
    """Continue the comparison in ``out``: finished cells are skipped, the cell cut short is
    resumed (its finished instances kept), the others run. Refuses when a contender's config
    file or the instances file changed since the comparison began."""
    target = Path(out).resolve()
    meta_path = target / "compare.yaml"
    if not meta_path.is_file():
        raise CompareError(f"{out}: not a compare directory (no compare.yaml)")
    try:
        meta = yaml.safe_load(meta_path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise CompareError(f"{meta_path}: cannot read: {exc}") from None
    checked = _spec_from_meta(meta, meta_path)
    executor = executor or meta.get("executor") or "local"
    workers = workers if workers is not None else meta.get("workers")
    ray_address = ray_address or meta.get("ray_address")
    check_executor(executor, workers, CompareError)
    with _locked(target):
        return _matrix(target, checked, meta, workers, executor, ray_address, on_event)


def _spec_from_meta(meta: dict[str, Any], where: Path) -> CompareSpec:
    s = meta["spec"]
    contenders = []
    for c in s["contenders"]:
        path = Path(c["config"])
        try:
            now = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError as exc:
            raise CompareError(
                f"{where}: contender {c['name']}: its config {path} cannot be read "
                f"({exc.strerror}): put it back to resume"
            ) from None
        if now != c["config_sha256"]:
            raise CompareError(
                f"{where}: contender {c['name']}: its config {path} changed since the "
                "comparison began: restore it, or start a new comparison (--out)"
            )
        contenders.append(Contender(c["name"], c["config"], tuple(c["overrides"]), now))
    inst = Path(s["instances"])
    try:
        digest = hashlib.sha256(inst.read_bytes()).hexdigest()
    except OSError as exc:
        raise CompareError(f"{where}: instances {inst} cannot be read ({exc.strerror})") from None
    if digest != meta.get("instances_sha256"):
        raise CompareError(
            f"{where}: the instances file {inst} changed since the comparison began: restore "
            "it, or start a new comparison (--out)"
        )
    return CompareSpec(
        source=s["source"],
        instances=s["instances"],
        repos=s.get("repos"),
        contenders=tuple(contenders),
        seeds=tuple(s["seeds"]),
        budget=dict(s["budget"]),
        raw=s.get("raw") or {},
    )


def _default_out() -> Path:
    return Path("compares") / time.strftime("compare-%Y%m%d-%H%M%S", time.gmtime())


def _matrix(
    target: Path,
    spec: CompareSpec,
    meta: dict[str, Any],
    workers: int | None,
    executor: str,
    ray_address: str | None,
    on_event: EventFn | None,
) -> CompareOutcome:
    from treesearch.eval import resume_eval, run_eval

    emit = on_event or (lambda e: None)
    cells = spec_cells(spec)
    finished = [cell_finished(cell_dir(target, c.name, s)) for c, s in cells]
    emit(
        {
            "event": "compare_started",
            "out": str(target),
            "contenders": [c.name for c in spec.contenders],
            "seeds": list(spec.seeds),
            "instances": len(meta["instance_ids"]),
            "cells": len(cells),
            "finished_cells": sum(finished),
            "executor": executor,
        }
    )
    skipped: list[str] = []
    interrupted = False
    t0 = time.monotonic()
    try:
        for index, ((contender, seed), done) in enumerate(zip(cells, finished, strict=True), 1):
            path = cell_dir(target, contender.name, seed)
            label = f"{contender.name}/seed-{seed}"
            info = {"contender": contender.name, "seed": seed, "cell": index, "cells": len(cells)}
            if done:
                skipped.append(label)
                emit({"event": "cell_skipped", **info})
                continue

            def forward(ev: dict[str, Any], info: dict[str, Any] = info) -> None:
                emit({**ev, **info})

            resume = (path / "eval.yaml").is_file()
            emit({"event": "cell_started", "resume": resume, **info})
            if resume:
                outcome = resume_eval(
                    path,
                    workers=workers,
                    executor=executor,
                    ray_address=ray_address,
                    on_event=forward,
                )
            else:
                _clear_unstarted(target, path)
                path.parent.mkdir(parents=True, exist_ok=True)
                outcome = run_eval(
                    contender.config,
                    spec.instances,
                    repos=spec.repos,
                    out=path,
                    workers=workers,
                    executor=executor,
                    ray_address=ray_address,
                    overrides=spec.overrides_for(contender, seed),
                    on_event=forward,
                )
            if outcome.interrupted:
                interrupted = True
                break
    except KeyboardInterrupt:
        interrupted = True
    data = build_compare(target, spec, meta, interrupted=interrupted)
    data["session_seconds"] = round(time.monotonic() - t0, 3)
    write_outputs(target, data)
    emit({"event": "compare_finished", "out": str(target), "status": data["status"]})
    return CompareOutcome(target, data, interrupted or data["status"] != "finished", skipped)


def _clear_unstarted(target: Path, path: Path) -> None:
    """A cell folder without ``eval.yaml`` was created by a driver that died before the batch
    began: nothing in it was run; it is removed so that the batch can start afresh."""
    if path.exists() and path.resolve().is_relative_to(target / "cells"):
        shutil.rmtree(path)


def _locked(target: Path) -> contextlib.AbstractContextManager[None]:
    return hold_folder(
        target / ".compare.lock",
        lambda pid: CompareError(f"{target} is in use by another treesearch compare (pid {pid})"),
    )


def spec_cells(spec: CompareSpec) -> Sequence[tuple[Contender, int]]:
    """The cells of ``spec`` in the order they run: seed by seed, contender by contender."""
    return [(c, s) for s in spec.seeds for c in spec.contenders]
