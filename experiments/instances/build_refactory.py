#!/usr/bin/env python3
"""Build a SWE-bench-format instance set from the refactory corpus (real student bugs).

Usage::

    python experiments/instances/build_refactory.py [--corpus ../shared/corpora/refactory]
        [--out experiments/instances/build/refactory] [--seed 0] [--entries ID,ID,...]

Each corpus entry (a student's buggy program, one test file, ``conftest.py``, ``pytest.ini``)
becomes one instance, as ``experiments/benchmarks/repair.py`` prepares it for a search:

* its tests are split, seeded by ``--seed`` and the entry's name, into search tests
  (``tests/test_<module>.py``) and held-out tests (about two in five, ``heldout/``); the search
  part keeps at least one test that fails on the buggy program (the same split as repair.py);
* the base commit (``OUT/repos/refactory__<entry>``, fixed author and date) holds the program,
  ``conftest.py``, ``pytest.ini`` and the search tests; ``test_patch`` adds the held-out tests;
* the per-test time limit of the corpus' ``conftest.py`` (``CORPUS_TEST_TIMEOUT``, 5 s by
  default) becomes 20 times the slowest passing test of the buggy program, at least 0.5 s, as
  repair.py's ``new`` agent sets it: written as that conftest's default in the base commit;
* ``FAIL_TO_PASS`` = the tests (search and held out) failing on the buggy program,
  ``PASS_TO_PASS`` = the others: the corpus verified that a correct program passes them all,
  so "resolved" is repair.py's "correct" (every search and every held-out test passes).

The corpus is never written to. Then ``treesearch compare experiments/benchmarks/
repair-compare.yaml`` runs the comparison. Only ``treesearch.store.source`` runs git.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

try:
    from treesearch.scoring import RunStatus, TestSpec, run_tests
    from treesearch.store.source import apply_patch, commit_folder, diff_commits
except ImportError as exc:  # pragma: no cover - set-up hint only
    sys.exit(f"cannot import treesearch ({exc}): run `pip install -e .` in the repository first")

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO / "experiments" / "benchmarks"))
from repair import _write_part as write_part  # noqa: E402 - the repair benchmark's split
from repair import split_tests  # noqa: E402

CORPUS = next(
    (
        p
        for p in (
            REPO.parent.parent / "shared/corpora/refactory",
            Path("/work/shared/corpora/refactory"),
        )
        if p.is_dir()
    ),
    REPO.parent.parent / "shared/corpora/refactory",
)
OWNER = "refactory"
TEST_SPEC = TestSpec(
    command=f"{sys.executable} -m pytest -q -p no:cacheprovider",
    timeout=300,
    env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"},
)
_TIMEOUT_LINE = re.compile(r'os\.environ\.get\("CORPUS_TEST_TIMEOUT", "[0-9.]+"\)')
_SKIP = shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.pyc")


def _run(folder: Path) -> dict[str, tuple[bool, float]]:
    """Test function name -> (passed, seconds), from one pytest run in ``folder``."""
    run = run_tests(TEST_SPEC, folder)
    if run.status not in (RunStatus.OK, RunStatus.ERROR) or not run.tests:
        raise RuntimeError(f"the tests of {folder} did not run: {run.problem or run.status.value}")
    return {t.id: (t.outcome.is_pass, t.seconds) for t in run.tests}


def build_one(entry: Path, meta: dict[str, Any], out: Path, tmp: Path, seed: int) -> dict[str, Any]:
    name = entry.name
    work = tmp / name / "probe"
    shutil.copytree(entry, work, ignore=_SKIP)
    test_files = sorted(work.glob("test_*.py"))
    if len(test_files) != 1:
        raise RuntimeError(f"{name}: expected one test_*.py, found {len(test_files)}")
    test_file = test_files[0]
    source = test_file.read_text(encoding="utf-8")
    tree = ast.parse(source)
    names = [
        s.name for s in tree.body if isinstance(s, ast.FunctionDef) and s.name.startswith("test")
    ]
    measured = {tid.rsplit("::", 1)[-1]: v for tid, v in _run(work).items()}
    failing = {n for n, (ok, _) in measured.items() if not ok}
    search, held = split_tests(names, failing, f"{seed}:{name}")
    passing = [secs for ok, secs in measured.values() if ok] or [0.0]
    per_test = max(0.5, round(20 * max(passing), 2))

    base = tmp / name / "base"
    shutil.copytree(
        entry,
        base,
        ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.pyc", test_file.name),
    )
    conftest = base / "conftest.py"
    text = conftest.read_text(encoding="utf-8")
    if not _TIMEOUT_LINE.search(text):
        raise RuntimeError(f"{name}: conftest.py does not read CORPUS_TEST_TIMEOUT as expected")
    conftest.write_text(
        _TIMEOUT_LINE.sub(f'os.environ.get("CORPUS_TEST_TIMEOUT", "{per_test:g}")', text),
        encoding="utf-8",
    )
    (base / "tests").mkdir()
    (base / "tests" / test_file.name).write_text(write_part(source, tree, set(search)), "utf-8")
    scratch = tmp / name / "scratch.git"
    base_commit = commit_folder(scratch, base, message=f"{name}: base")
    with_tests = tmp / name / "with-tests"
    shutil.copytree(base, with_tests)
    (with_tests / "heldout").mkdir()
    (with_tests / "heldout" / f"{test_file.stem}_heldout.py").write_text(
        write_part(source, tree, set(held)), "utf-8"
    )
    test_patch = diff_commits(
        scratch,
        base_commit,
        commit_folder(scratch, with_tests, message="tests", parent=base_commit, branch="t"),
    )
    repo = out / "repos" / f"{OWNER}__{name}"
    if repo.exists():
        shutil.rmtree(repo)
    assert commit_folder(repo, base, message=f"{name}: base") == base_commit
    # The graded ids, as pytest names them in the grading copy (base + test_patch).
    graded = tmp / name / "graded"
    shutil.copytree(base, graded)
    apply_patch(graded, test_patch)
    before = _run(graded)
    f2p = sorted(t for t, (ok, _) in before.items() if not ok)
    p2p = sorted(t for t, (ok, _) in before.items() if ok)
    if not f2p:
        raise RuntimeError(f"{name}: no test fails on the buggy program")
    return {
        "instance_id": f"{OWNER}__{name}",
        "repo": f"{OWNER}/{name}",
        "base_commit": base_commit,
        "environment_setup_commit": base_commit,
        "version": "0",
        "patch": "",
        "test_patch": test_patch,
        "FAIL_TO_PASS": f2p,
        "PASS_TO_PASS": p2p,
        "problem_statement": f"{meta.get('title', '')}: make the failing tests pass.".strip(),
        "hints_text": "",
        "module": meta.get("module"),
        "fix_size_lines": meta.get("fix_size_lines"),
        "per_test_timeout": per_test,
        "split_seed": seed,
        "search_test_count": len(search),
        "heldout_test_count": len(held),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--corpus", default=str(CORPUS), help="the refactory corpus folder")
    ap.add_argument("--out", default=str(HERE / "build" / "refactory"), help="output folder")
    ap.add_argument("--seed", type=int, default=0, help="seed of the search/held-out split")
    ap.add_argument("--entries", help="comma-separated entry names (default: every entry)")
    args = ap.parse_args(argv)
    corpus = Path(args.corpus)
    if not (corpus / "entries.json").is_file():
        print(f"build_refactory.py: {corpus} is not the refactory corpus", file=sys.stderr)
        return 2
    metas = {m["name"]: m for m in json.loads((corpus / "entries.json").read_text("utf-8"))}
    names = args.entries.split(",") if args.entries else sorted(metas)
    missing = [n for n in names if n not in metas or not (corpus / n).is_dir()]
    if missing:
        print(f"build_refactory.py: no such entry: {', '.join(missing)}", file=sys.stderr)
        return 2
    out = Path(args.out).resolve()
    (out / "repos").mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="treesearch-refactory-") as tmp_name:
        for n in names:
            try:
                row = build_one(corpus / n, metas[n], out, Path(tmp_name), args.seed)
            except RuntimeError as exc:
                print(f"  left out {n}: {exc}")
                continue
            rows.append(row)
            print(
                f"  {row['instance_id']}: {len(row['FAIL_TO_PASS'])} fail-to-pass, "
                f"{len(row['PASS_TO_PASS'])} pass-to-pass, per-test limit "
                f"{row['per_test_timeout']:g} s"
            )
    target = out / "instances.jsonl"
    target.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    print(f"{len(rows)} instances in {target}; repositories in {out / 'repos'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
