#!/usr/bin/env python3
"""Repair benchmark: the ``mutation`` agent under every search policy, on the bug corpus.

Usage::

    python experiments/benchmarks/repair.py [--budget 15] [--jobs 2] [--seed 0]
        [--policies bfs,best_first,beam,mcts,random] [--bugs ID,ID,...] [--timeout 10]
        [--json results.json] [--report results.json] [--patches]

Each bug of ``experiments/bugs/`` (one folder: a module, ``tests/`` that steer the search,
``heldout/`` tests that grade its answer, ``bug.yaml``) is searched once per policy with the same
budget of test runs (the search's own scoring runs; the agent's fault-localisation runs, one per
expanded node, are extra and counted apart) and the same seed. The search stops at the first
plausible fix (every search test passes); the held-out tests then say whether it is correct.

It prints, per policy: bugs with a plausible fix, bugs with a correct fix (held-out tests pass
too), the median number of test runs to the first plausible fix (over the bugs fixed), the median
number of localisation runs, and the mean seconds per bug; then one row per bug. Nothing is
asserted: it is a measurement. Each search works on a temporary copy of the bug folder.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

try:
    from treesearch.app import run_from_config
except ImportError:  # pragma: no cover - set-up hint only
    sys.exit("cannot import treesearch.app: run `pip install -e '.[dev]'` in the repository first")

CORPUS = Path(__file__).resolve().parent.parent / "bugs"
POLICIES = ("bfs", "best_first", "beam", "mcts", "random")
TEST_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
# Policy parameters: the controller's defaults, except that progressive widening under MCTS
# opens children faster (a sampled strategy's first edits are as good as its later ones).
POLICY_PARAMS: dict[str, dict[str, float]] = {"mcts": {"pw_k": 2.0, "pw_alpha": 0.6}}


@dataclass
class Outcome:
    bug: str
    operator: str
    fixable: bool
    policy: str
    plausible: bool
    correct: bool
    test_runs: int
    fl_runs: int
    expansions: int
    seconds: float
    stop_reason: str
    patch: str
    error: str = ""


def config_for(bug: Path, policy: str, tmp: Path, budget: int, seed: int, timeout: float) -> dict:
    """The search config of one (bug, policy) run, as a YAML file would give it.

    The searched folder is a copy of the bug without its ``heldout/`` tests: they are laid over
    the grading copy only (``grade_files``), so the search cannot read them."""
    src = tmp / "src" / bug.name
    if not src.exists():
        shutil.copytree(bug, src, ignore=shutil.ignore_patterns("heldout", "__pycache__"))
    return {
        "workspace": {"path": str(src), "copy": False},
        "store": {
            "home": str(tmp / "home"),
            "excludes": ["__pycache__/", ".pytest_cache/", "*.pyc", ".coverage*"],
        },
        "task": "Make the failing tests pass.",
        "strategies": {"mutate": {"kind": "mutation", "samples": 50, "max_steps": 1, "seed": seed}},
        "scoring": {
            "search_tests": {
                "command": "python -m pytest -q tests",
                "timeout": timeout,
                "env": TEST_ENV,
            },
            "grade_tests": {
                "command": "python -m pytest -q heldout",
                "timeout": timeout,
                "env": TEST_ENV,
            },
            "grade_files": {"heldout": str(bug / "heldout")},
            "score": "pass_fraction",
        },
        "search": {
            "policy": policy,
            "params": POLICY_PARAMS.get(policy, {}),
            "seed": seed,
            "stop_on_perfect": True,
            # Test runs are the budget; the expansion cap only stops a search whose expansions
            # all end without a test run (every edit already tried).
            "budget": {"test_runs": budget, "expansions": budget * 10},
        },
        "output": {"runs_dir": str(tmp / "runs")},
    }


def fl_runs(run_dir: Path) -> int:
    """Localisation runs of a search (transcripts whose ranking did not come from the cache)."""
    count = 0
    for file in (run_dir / "transcripts").glob("*.json"):
        try:
            events = json.loads(file.read_text(encoding="utf-8")).get("transcript", [])
        except (OSError, ValueError):
            continue
        count += sum(1 for e in events if e.get("event") == "localize" and not e.get("cached"))
    return count


def run_one(task: tuple[str, str, int, int, float]) -> Outcome:
    name, policy, budget, seed, timeout = task
    bug = CORPUS / name
    meta = yaml.safe_load((bug / "bug.yaml").read_text(encoding="utf-8"))
    operator, fixable = str(meta["operator"]), bool(meta["fixable"])
    with tempfile.TemporaryDirectory(prefix="repair-bench-") as tmp_name:
        tmp = Path(tmp_name)
        t0 = time.perf_counter()
        try:
            out = run_from_config(config_for(bug, policy, tmp, budget, seed, timeout), base_dir=tmp)
        except Exception as exc:  # noqa: BLE001 - a broken run is reported, not fatal
            return Outcome(
                name,
                operator,
                fixable,
                policy,
                plausible=False,
                correct=False,
                test_runs=0,
                fl_runs=0,
                expansions=0,
                seconds=time.perf_counter() - t0,
                stop_reason="error",
                patch="",
                error=f"{type(exc).__name__}: {exc}",
            )
        seconds = time.perf_counter() - t0
        plausible = (out.best_score or 0.0) >= 1.0
        grade = out.grade
        correct = plausible and grade is not None and bool(grade.resolved)
        result = Outcome(
            name,
            operator,
            fixable,
            policy,
            plausible=plausible,
            correct=correct,
            test_runs=out.usage.test_runs,
            fl_runs=fl_runs(out.run_dir),
            expansions=out.usage.expansions,
            seconds=seconds,
            stop_reason=out.stop_reason,
            patch=out.patch,
        )
        copy = Path(out.workspace)
        if copy.parent.name.startswith("treesearch-") and copy.resolve() != bug.resolve():
            shutil.rmtree(copy.parent, ignore_errors=True)
    return result


def _median(values: list[int]) -> str:
    return f"{statistics.median(values):g}" if values else "-"


def report(results: list[Outcome], policies: list[str], bugs: list[str], budget: int) -> str:
    fixable = {r.bug: r.fixable for r in results}
    n_fixable = sum(1 for b in bugs if fixable.get(b))
    lines = [
        f"repair benchmark: {len(bugs)} bugs ({n_fixable} fixable by one edit of the agent's "
        f"operators, {len(bugs) - n_fixable} not), mutation agent, budget {budget} test runs "
        "per bug and policy",
        "",
        f"{'policy':<11} {'plausible':>9} {'correct':>8} {'vs random':>9} "
        f"{'runs to plausible':>18} {'FL runs':>8} {'s/bug':>6}",
    ]
    baseline = sum(1 for r in results if r.policy == "random" and r.correct)
    for policy in policies:
        rows = [r for r in results if r.policy == policy]
        plausible = [r for r in rows if r.plausible]
        correct = [r for r in rows if r.correct]
        ratio = f"{len(correct) / baseline:.2f}x" if baseline else "-"
        lines.append(
            f"{policy:<11} {len(plausible):>4}/{len(rows):<4} {len(correct):>3}/{len(rows):<4} "
            f"{ratio:>9} {_median([r.test_runs for r in plausible]):>18} "
            f"{_median([r.fl_runs for r in rows]):>8} "
            f"{statistics.mean(r.seconds for r in rows) if rows else 0:>6.1f}"
        )
    lines += [
        "",
        "plausible = all search tests pass; correct = plausible and all held-out tests pass;",
        "vs random = correct fixes against the random policy (the baseline) in the same run;",
        "runs to plausible = median test runs until the first plausible fix (bugs fixed only);",
        "FL runs = median fault-localisation runs per search (outside the budget).",
        "",
        "per bug: C correct, P plausible but wrong (held-out tests fail), - none; "
        "the number is the test runs used",
        f"{'bug':<20} {'operator':<9}" + "".join(f" {p:>11}" for p in policies),
    ]
    by_key = {(r.bug, r.policy): r for r in results}
    for bug in bugs:
        cells = []
        for policy in policies:
            r = by_key.get((bug, policy))
            if r is None:
                cells.append("?")
            elif r.error:
                cells.append("error")
            else:
                mark = "C" if r.correct else "P" if r.plausible else "-"
                cells.append(f"{mark} {r.test_runs}")
        op = next((r.operator for r in results if r.bug == bug), "?")
        lines.append(f"{bug:<20} {op:<9}" + "".join(f" {c:>11}" for c in cells))
    errors = [r for r in results if r.error]
    for r in errors:
        lines.append(f"error: {r.bug} / {r.policy}: {r.error}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=15, help="test runs per bug and policy")
    parser.add_argument("--jobs", type=int, default=2, help="searches run in parallel")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per test run")
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--bugs", default="", help="comma-separated bug ids (default: all)")
    parser.add_argument("--json", type=Path, help="also write every result to this file")
    parser.add_argument("--patches", action="store_true", help="print each plausible patch")
    parser.add_argument(
        "--report", type=Path, help="only print the report of results saved with --json"
    )
    args = parser.parse_args(argv)

    policies = [p for p in args.policies.split(",") if p]
    bugs = sorted(p.name for p in CORPUS.iterdir() if (p / "bug.yaml").is_file())
    if args.bugs:
        wanted = set(args.bugs.split(","))
        bugs = [b for b in bugs if b in wanted]
    if args.report:
        data = json.loads(args.report.read_text(encoding="utf-8"))
        rows = data["results"] if isinstance(data, dict) else data
        saved = [Outcome(**row) for row in rows]
        saved = [r for r in saved if r.bug in bugs and r.policy in policies]
        budget = data.get("budget", args.budget) if isinstance(data, dict) else args.budget
        print(report(saved, policies, bugs, budget))
        if isinstance(data, dict):
            print(f"\n{data['searches']} searches in {data['wall']:.0f} s wall ({data['where']})")
        return 0
    tasks = [(b, p, args.budget, args.seed, args.timeout) for b in bugs for p in policies]
    t0 = time.perf_counter()
    results: list[Outcome] = []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(run_one, task) for task in tasks]
        for future in as_completed(futures):
            r = future.result()
            results.append(r)
            mark = "correct" if r.correct else "plausible" if r.plausible else "-"
            print(
                f"[{len(results)}/{len(tasks)} {time.perf_counter() - t0:.0f}s] {r.bug} / "
                f"{r.policy}: {mark}, {r.test_runs} test runs, {r.seconds:.1f} s",
                file=sys.stderr,
                flush=True,
            )
    wall = time.perf_counter() - t0
    where = f"{args.jobs} jobs, python {platform.python_version()}, {os.cpu_count()} CPUs"
    print(report(results, policies, bugs, args.budget))
    print(f"\n{len(tasks)} searches in {wall:.0f} s wall ({where})")
    if args.patches:
        for r in results:
            if r.plausible:
                print(f"\n--- {r.bug} / {r.policy} ({'correct' if r.correct else 'WRONG'})")
                print(r.patch.rstrip())
    if args.json:
        saved_data = {
            "budget": args.budget,
            "seed": args.seed,
            "searches": len(tasks),
            "wall": wall,
            "where": where,
            "results": [asdict(r) for r in results],
        }
        args.json.write_text(json.dumps(saved_data, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
