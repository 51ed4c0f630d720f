#!/usr/bin/env python3
"""Build the built-in SWE-bench-format instance set from ``experiments/bugs/``.

Usage::

    python experiments/instances/build.py [--out experiments/instances/build] [--bugs ID,ID,...]

For each bug folder (a module, ``tests/`` that may steer a search, ``heldout/`` tests that grade,
``bug.yaml``) it writes a small bare repository ``OUT/repos/treesearch-bugs__<id>`` whose one
commit (fixed author and date: the same content always gives the same id) holds the folder
without ``heldout/`` and ``bug.yaml``, and one row of ``OUT/instances.jsonl``:

* ``patch`` (gold): the one-line fix of ``bug.yaml``'s ``fix:`` (``FILE line N: `old` -> `new```);
  bugs whose fix is not written that way are left out (said on the terminal);
* ``test_patch``: adds the ``heldout/`` tests;
* ``FAIL_TO_PASS`` / ``PASS_TO_PASS``: computed by running every test (visible and held out)
  on the base commit and again with the gold patch: fails before and passes after, or passes
  both times. A bug whose gold patch leaves a test failing, or makes none pass, is left out.

Then ``treesearch eval configs/eval-mutation.yaml --instances OUT/instances.jsonl --repos
OUT/repos`` runs the set. Nothing is fetched; only ``treesearch.store.source`` runs git.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

try:
    from treesearch.scoring import Outcome, RunStatus, TestSpec, run_tests
    from treesearch.store.source import apply_patch, commit_folder, diff_commits, materialize_commit
except ImportError as exc:  # pragma: no cover - set-up hint only
    sys.exit(f"cannot import treesearch ({exc}): run `pip install -e .` in the repository first")

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent / "bugs"
OWNER = "treesearch-bugs"
TEST_SPEC = TestSpec(
    command="python -m pytest -q -p no:cacheprovider",
    timeout=120,
    env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"},
)
_FIX = re.compile(r"^(?P<file>[\w./-]+) line (?P<line>\d+): `(?P<old>[^`]+)` -> `(?P<new>[^`]+)`$")
_SKIP = shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.pyc", "heldout", "bug.yaml")


def gold_edit(folder: Path, fix: str) -> str | None:
    """Apply the ``fix:`` line to ``folder``; the reason when it cannot be applied."""
    m = _FIX.match(fix.strip())
    if m is None or "..." in m["new"]:
        return f"fix {fix!r} is not a one-line `old` -> `new` edit"
    path = folder / m["file"]
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    i = int(m["line"]) - 1
    if not 0 <= i < len(lines) or lines[i].count(m["old"]) != 1:
        return f"`{m['old']}` is not once on line {i + 1} of {m['file']}"
    lines[i] = lines[i].replace(m["old"], m["new"])
    path.write_text("".join(lines), encoding="utf-8")
    return None


def outcomes(folder: Path) -> dict[str, Outcome]:
    run = run_tests(TEST_SPEC, folder)
    if run.status not in (RunStatus.OK, RunStatus.ERROR) or not run.tests:
        raise RuntimeError(f"the tests of {folder} did not run: {run.problem or run.status.value}")
    return {t.id: t.outcome for t in run.tests}


def build_one(bug: Path, out: Path, tmp: Path) -> tuple[dict[str, Any] | None, str]:
    meta = yaml.safe_load((bug / "bug.yaml").read_text(encoding="utf-8"))
    name = str(meta["id"])
    scratch_repo = tmp / name / "scratch.git"
    base = tmp / name / "base"
    shutil.copytree(bug, base, ignore=_SKIP)
    base_commit = commit_folder(scratch_repo, base, message=f"{name}: base")
    fixed = tmp / name / "fixed"
    shutil.copytree(base, fixed)
    why = gold_edit(fixed, str(meta.get("fix", "")))
    if why is not None:
        return None, why
    gold = diff_commits(
        scratch_repo,
        base_commit,
        commit_folder(scratch_repo, fixed, message="gold", parent=base_commit, branch="gold"),
    )
    with_tests = tmp / name / "with-tests"
    shutil.copytree(base, with_tests)
    shutil.copytree(bug / "heldout", with_tests / "heldout", ignore=_SKIP)
    test_patch = diff_commits(
        scratch_repo,
        base_commit,
        commit_folder(scratch_repo, with_tests, message="tests", parent=base_commit, branch="t"),
    )
    # The published repository holds the base commit only.
    repo = out / "repos" / f"{OWNER}__{name}"
    if repo.exists():
        shutil.rmtree(repo)
    assert commit_folder(repo, base, message=f"{name}: base") == base_commit
    # FAIL_TO_PASS / PASS_TO_PASS by running the tests before and after the gold patch.
    before_dir = tmp / name / "before"
    materialize_commit(repo, base_commit, before_dir)
    apply_patch(before_dir, test_patch)
    before = outcomes(before_dir)
    after_dir = tmp / name / "after"
    materialize_commit(repo, base_commit, after_dir)
    apply_patch(after_dir, test_patch)
    apply_patch(after_dir, gold)
    after = outcomes(after_dir)
    still = sorted(t for t, o in after.items() if not o.is_pass)
    if still:
        return None, f"the gold patch leaves {len(still)} test(s) failing, e.g. {still[0]}"
    f2p = sorted(t for t, o in after.items() if not before.get(t, Outcome.FAILED).is_pass)
    p2p = sorted(t for t, o in after.items() if before.get(t, Outcome.FAILED).is_pass)
    if not f2p:
        return None, "no test fails before the gold patch"
    return {
        "instance_id": f"{OWNER}__{name}",
        "repo": f"{OWNER}/{name}",
        "base_commit": base_commit,
        "environment_setup_commit": base_commit,
        "version": "0",
        "patch": gold,
        "test_patch": test_patch,
        "FAIL_TO_PASS": f2p,
        "PASS_TO_PASS": p2p,
        "problem_statement": str(meta.get("description", "")).strip(),
        "hints_text": "",
        "operator": meta.get("operator"),
        "module": meta.get("module"),
    }, ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(HERE / "build"), help="output folder")
    ap.add_argument("--bugs", help="comma-separated bug ids (default: every bug)")
    args = ap.parse_args(argv)
    out = Path(args.out).resolve()
    names = (
        args.bugs.split(",")
        if args.bugs
        else sorted(p.name for p in CORPUS.iterdir() if (p / "bug.yaml").is_file())
    )
    missing = [n for n in names if not (CORPUS / n / "bug.yaml").is_file()]
    if missing:
        print(f"build.py: no such bug: {', '.join(missing)} (see {CORPUS})", file=sys.stderr)
        return 2
    (out / "repos").mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="treesearch-build-") as tmp_name:
        for n in names:
            row, why = build_one(CORPUS / n, out, Path(tmp_name))
            if row is None:
                print(f"  left out {n}: {why}")
                continue
            rows.append(row)
            print(
                f"  {row['instance_id']}: {len(row['FAIL_TO_PASS'])} fail-to-pass, "
                f"{len(row['PASS_TO_PASS'])} pass-to-pass"
            )
    target = out / "instances.jsonl"
    target.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    print(f"{len(rows)} instances in {target}; repositories in {out / 'repos'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
