"""Grading one tree the way SWE-bench's harness grades it, in a grading copy of its own.

The grading copy holds the tree to grade (the search's best node, a prediction applied to the
base commit, or the base commit itself). As the harness's eval script does, the files that
``test_patch`` touches are first put back as they are at the base commit (a prediction may not
change the held-out tests), then ``test_patch`` is applied. Before any test runs, the copy is
checked to be what the tests import (``environment.check_tree_imports``): an environment whose
set-up installed the repository elsewhere is an ``error`` row naming the path it imports.

The grading command is, in this order: ``eval.grade_tests`` when the config names it (an
explicit override, run as it is), the environment's test command (the set-up table's or the
``swebench`` package's ``test_cmd``) followed by the test files ``test_patch`` touches (SWE-bench's
test directives), else ``python -m pytest -rA`` followed by those files. Its output, wrapped in
the harness's log markers, is graded by SWE-bench's rule (``swebench_grading.official_report``:
the package's own log parser and report function where the extra is installed, our port of them
otherwise). The per-test outcomes from pytest's JUnit report give a second, labelled verdict,
``strict`` (a FAIL_TO_PASS test that was skipped or never ran is not a pass there).
"""

from __future__ import annotations

import re
import shlex
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from treesearch.errors import TreesearchError
from treesearch.eval import swebench_grading as official
from treesearch.eval.instances import Instance
from treesearch.scoring import RunStatus, TestRun, TestSpec, run_tests
from treesearch.store.source import apply_patch

__all__ = [
    "DEFAULT_GRADE_COMMAND",
    "GRADE_OUTPUT_LIMIT",
    "GradePlan",
    "grade_plan",
    "grade_tree",
    "patch_paths",
]

DEFAULT_GRADE_COMMAND = "python -m pytest -rA"
DEFAULT_GRADE_TIMEOUT = 1800.0
GRADE_OUTPUT_LIMIT = 64 * 1024 * 1024
"""Bytes of a grading run's output kept: the harness reads the whole log, so nothing may be cut
from the middle of a long ``-rA`` summary."""

_DIFF_PATHS = re.compile(r"^diff --git a/(.*) b/(.*)$", re.MULTILINE)


@dataclass(frozen=True)
class GradePlan:
    """How an instance is graded."""

    spec: TestSpec
    source: str
    """Where the command came from: ``eval.grade_tests``, ``setup table``, ``swebench spec`` or
    ``default``."""
    directives: tuple[str, ...]
    """The test files of ``test_patch`` on the command line (empty with ``eval.grade_tests``)."""


def patch_paths(patch: str) -> list[str]:
    """Every path a unified diff names (both sides of each ``diff --git`` header, once each)."""
    out: list[str] = []
    for a, b in _DIFF_PATHS.findall(patch):
        for p in (a, b):
            if p not in out:
                out.append(p)
    return out


def _with_rA(command: str) -> str:
    words = shlex.split(command)
    if any(w == "-rA" or (w.startswith("-r") and "A" in w[2:]) for w in words):
        return command
    return command + " -rA"


def grade_plan(
    inst: Instance,
    grade_tests: Mapping[str, Any],
    *,
    explicit: bool,
    env_test_cmd: str | None,
    env_source: str,
    env_vars: Mapping[str, str],
    source: str = "<eval>",
) -> GradePlan:
    """The grading command of ``inst`` (see the module's docstring for the order)."""
    spec_map: dict[str, Any] = dict(grade_tests)
    spec_map["env"] = {**dict(env_vars), **(spec_map.get("env") or {})}
    if explicit:
        spec = TestSpec.from_config(spec_map, source, where="eval.grade_tests")
        if spec.is_pytest and isinstance(spec.command, str):
            # The official log parser reads pytest's -rA summary lines.
            spec = TestSpec.from_config(
                {**spec_map, "command": _with_rA(spec.command)}, source, where="eval.grade_tests"
            )
        return GradePlan(spec, "eval.grade_tests", ())
    directives = tuple(official.test_directives(inst.repo or "", inst.test_patch))
    if env_test_cmd:
        command, origin = env_test_cmd, env_source
    else:
        command, origin = DEFAULT_GRADE_COMMAND, "default"
    full = " ".join([command, *(shlex.quote(d) for d in directives)])
    spec_map["command"] = full
    spec_map.setdefault("timeout", DEFAULT_GRADE_TIMEOUT)
    spec_map.pop("tests", None)
    spec = TestSpec.from_config(spec_map, source, where="eval.grade_tests")
    return GradePlan(spec, origin, directives)


def reset_test_files(
    grade_dir: Path, inst: Instance, changed: list[str], base_tree: Callable[[], Path]
) -> list[str]:
    """Put the files ``test_patch`` touches back as they are at the base commit, where the graded
    tree changed them (the harness's ``git checkout <base> <test files>``). ``base_tree()``
    gives a folder holding the base commit (made only when needed). Returns the paths reset."""
    touched = set(patch_paths(inst.test_patch))
    hit = [p for p in changed if p in touched]
    if not hit:
        return []
    base = base_tree()
    for rel in hit:
        src, dest = base / rel, grade_dir / rel
        if dest.is_symlink() or dest.is_file():
            dest.unlink()
        if src.is_symlink() or src.is_file():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest, follow_symlinks=False)
    return hit


def grade_tree(
    inst: Instance,
    grade_dir: Path,
    plan: GradePlan,
    out: Path,
    row: dict[str, Any],
    *,
    check_imports: Callable[[Path], Any] | None,
    test_patch_applied: bool = False,
) -> TestRun | None:
    """Grade the tree in ``grade_dir`` into ``row`` (``status``, ``resolved``, ``tests``,
    ``strict``, ``grade_seconds``, ...) and write ``out/test_output.txt`` (the harness's log),
    ``out/report.json`` (the harness's per-instance report, with ours beside it).

    ``check_imports(tree)`` returns an ``ImportCheck`` (``None``: not checked).
    Returns the grading run (``None`` when none ran)."""
    t0 = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    row["grade_command"] = (
        plan.spec.command if isinstance(plan.spec.command, str) else shlex.join(plan.spec.command)
    )
    row["grade_source"] = plan.source
    try:
        if not test_patch_applied:
            apply_patch(grade_dir, inst.test_patch)
    except TreesearchError as exc:
        row["status"], row["reason"] = "error", f"test_patch: {exc}"
        _write_error(out, row)
        return None
    if check_imports is not None:
        check = check_imports(grade_dir)
        row["import_check"] = _check_json(check)
        if not check.ok:
            row["status"], row["reason"] = "error", check.reason()
            _write_error(out, row)
            row["grade_seconds"] = round(time.monotonic() - t0, 3)
            return None
    run = run_tests(plan.spec, grade_dir, output_limit=GRADE_OUTPUT_LIMIT)
    row["grade_test_runs"] = int(row.get("grade_test_runs") or 0) + 1
    timed_out = run.status is RunStatus.TIMEOUT
    log = official.harness_log(run.output or "", timed_out=timed_out)
    (out / "test_output.txt").write_text(log, encoding="utf-8", errors="replace")
    report = official.official_report(
        inst.instance_id,
        inst.repo or "",
        inst.fail_to_pass,
        inst.pass_to_pass,
        log,
        version=inst.version,
    )
    outcomes = {t.id: t.outcome.value for t in run.tests}
    strict = official.strict_report(outcomes, inst.fail_to_pass, inst.pass_to_pass)
    row["grade_seconds"] = round(time.monotonic() - t0, 3)
    row["grade_parser"] = report.get("parser")
    row["tests"] = report.get("tests_status")
    row["resolution"] = report.get("resolution")
    row["strict"] = {"resolved": bool(strict["resolved"]), "reason": strict.get("reason") or ""}
    _write_report(out, inst, report, strict, run, row)
    statuses_found = bool(report.get("tests_status")) and _any_status(report)
    if timed_out:
        row["status"] = "error"
        row["reason"] = f"grading run timed out after {plan.spec.timeout:g}s"
        return run
    if not statuses_found and run.status is not RunStatus.OK:
        row["status"] = "error"
        row["reason"] = (
            f"grading run {run.status.value}: {run.problem or 'no usable report'}; "
            "the log parser found no test results (see grade/test_output.txt)"
        )
        return run
    resolved = bool(report.get("resolved"))
    row["resolved"] = resolved
    row["status"] = "resolved" if resolved else "unresolved"
    if resolved:
        row["reason"] = ""
    else:
        status = report.get("tests_status") or {}
        failed = [
            *(status.get("FAIL_TO_PASS") or {}).get("failure", []),
            *(status.get("PASS_TO_PASS") or {}).get("failure", []),
        ]
        row["reason"] = f"{len(failed)} graded test(s) not passing ({report.get('resolution')})"
    return run


def _any_status(report: Mapping[str, Any]) -> bool:
    status = report.get("tests_status") or {}
    return bool(report.get("found_tests")) or any(
        (status.get(k) or {}).get("success") for k in ("FAIL_TO_PASS", "PASS_TO_PASS")
    )


def _check_json(check: Any) -> dict[str, Any]:
    return {
        "ok": bool(check.ok),
        "imported": dict(check.imported),
        "outside": dict(check.outside),
        "failed": dict(check.failed),
    }


def _write_error(out: Path, row: Mapping[str, Any]) -> None:
    (out / "error.txt").write_text(str(row.get("reason")) + "\n", encoding="utf-8")


def _write_report(
    out: Path,
    inst: Instance,
    report: Mapping[str, Any],
    strict: Mapping[str, Any],
    run: TestRun,
    row: Mapping[str, Any],
) -> None:
    import json

    harness = {
        inst.instance_id: {
            k: report[k]
            for k in (
                "patch_is_None",
                "patch_exists",
                "patch_successfully_applied",
                "resolved",
                "tests_status",
            )
            if k in report
        }
    }
    ours = {
        "resolution": report.get("resolution"),
        "parser": report.get("parser"),
        "strict": dict(strict),
        "run": {
            "command": row.get("grade_command"),
            "status": run.status.value,
            "exit_code": run.exit_code,
            "problem": run.problem,
            "seconds": round(run.seconds, 3),
        },
        "outcomes": {t.id: t.outcome.value for t in run.tests},
    }
    (out / "report.json").write_text(
        json.dumps({**harness, "treesearch": ours}, indent=2, sort_keys=True) + "\n",
        encoding="utf-8",
    )
