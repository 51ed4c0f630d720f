#!/usr/bin/env python3
"""Repair benchmark: the ``mutation`` agent, old and new side by side, on a corpus of bugs.

Usage::

    python experiments/benchmarks/repair.py [--corpus bugs|refactory] [--corpus-dir DIR]
        [--agents old,new] [--old-code DIR] [--new-code DIR] [--budgets 30,100]
        [--policy best_first]
        [--jobs 2] [--seed 0] [--entries ID,ID,...] [--timeout 10]
        [--json results.json] [--report results.json] [--patches]

Corpora:

- ``bugs``: ``experiments/bugs/`` (one folder per bug: a module, ``tests/`` that steer the
  search, ``heldout/`` tests that grade its answer, ``bug.yaml``);
- ``refactory``: ``../shared/corpora/refactory`` (60 real student programs, one test file
  each). Each entry is copied into a temporary folder and its tests are split, seeded by
  ``--seed`` and the entry's name, into search tests (``tests/``) and held-out tests
  (``heldout/``, about two in five); the split keeps at least one test that fails on the buggy
  program among the search tests. The corpus itself is never written to.

Agents: ``new`` is the agent of this checkout in ranked mode (``order: ranked``, every fix
pattern, per-test time limit derived from the buggy program's measured test durations);
``old`` is the agent of another checkout (``--old-code``, e.g. a ``git worktree`` of the
commit before issue 17) with its sampling defaults, run with that checkout first on
``PYTHONPATH``. Every search runs in its own child process, so the two never mix.

Each (entry, agent, budget) is one search under one policy, stopping at the first plausible
fix (every search test passes); the held-out tests then say whether it is correct. The budget
is the search's own test runs (the agent's fault-localisation runs are extra and counted
apart). It prints, per agent and budget: entries with a plausible fix, with a correct one,
plausible-but-wrong ones, the median test runs and wall seconds to the first plausible fix
(over the entries fixed), the mean seconds per entry; then one row per entry. Nothing is
asserted: it is a measurement.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import platform
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CORPORA = {
    "bugs": HERE.parent / "bugs",
    "refactory": (REPO.parent.parent / "shared" / "corpora" / "refactory"),
}
if not CORPORA["refactory"].is_dir():
    CORPORA["refactory"] = Path("/work/shared/corpora/refactory")
TEST_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
HELD_OUT_SHARE = 0.4
# The refactory conftest reads its per-test time limit (SIGALRM) from this variable.
PER_TEST_ENV = "CORPUS_TEST_TIMEOUT"
POLICY_PARAMS: dict[str, dict[str, float]] = {"mcts": {"pw_k": 2.0, "pw_alpha": 0.6}}


@dataclass
class Outcome:
    entry: str
    agent: str
    budget: int
    plausible: bool
    correct: bool
    test_runs: int
    fl_runs: int
    expansions: int
    seconds: float
    stop_reason: str
    patch: str
    fix_size: str = ""
    error: str = ""
    breakdown: dict[str, float] = field(default_factory=dict)
    """Where the search's time went (``breakdown``), seconds summed over expansions."""


# --- workspaces -----------------------------------------------------------------------------------


@dataclass
class Prepared:
    entry: str
    path: str
    """Workspace folder (tests/ and heldout/ inside)."""
    fix_size: str
    per_test_timeout: float | None
    """Derived per-test limit (refactory only), from the buggy program's test durations."""
    search_tests: int
    heldout_tests: int


def _junit(folder: Path, args: list[str], env: dict[str, str]) -> dict[str, tuple[bool, float]]:
    """Run pytest once; test name -> (failed, seconds)."""
    with tempfile.TemporaryDirectory(prefix="repair-junit-") as tmp:
        report = Path(tmp) / "junit.xml"
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", f"--junitxml={report}", *args],
            cwd=folder,
            env={**os.environ, **env},
            capture_output=True,
            timeout=300,
            check=False,
        )
        out: dict[str, tuple[bool, float]] = {}
        if not report.exists():
            return out
        for case in ET.parse(report).getroot().iter("testcase"):
            failed = any(child.tag in ("failure", "error") for child in case)
            out[case.get("name", "")] = (failed, float(case.get("time", "0") or 0))
        return out


def split_tests(names: list[str], failing: set[str], key: str) -> tuple[list[str], list[str]]:
    """Seeded split of test names into (search, held-out); the search part keeps a failing
    test when there is one. Deterministic for a given ``key``."""
    order = list(names)
    random.Random(key).shuffle(order)
    n_held = max(1, round(len(order) * HELD_OUT_SHARE)) if len(order) > 1 else 0
    held, search = order[:n_held], order[n_held:]
    if failing and not failing & set(search):
        moved = next(t for t in held if t in failing)
        held.remove(moved)
        search.append(moved)
        back = next((t for t in search if t not in failing), None)
        if back is not None and len(search) > 1:
            search.remove(back)
            held.append(back)
    return sorted(search, key=names.index), sorted(held, key=names.index)


def _write_part(source: str, tree: ast.Module, keep: set[str]) -> str:
    """The test file with only the test functions in ``keep`` (everything else kept)."""
    lines = source.splitlines(keepends=True)
    drop: list[tuple[int, int]] = []
    for stmt in tree.body:
        if (
            isinstance(stmt, ast.FunctionDef)
            and stmt.name.startswith("test")
            and stmt.name not in keep
        ):
            first = min([stmt.lineno, *(d.lineno for d in stmt.decorator_list)])
            drop.append((first, stmt.end_lineno or stmt.lineno))
    out = []
    for i, line in enumerate(lines, start=1):
        if not any(a <= i <= b for a, b in drop):
            out.append(line)
    return "".join(out)


def prepare(corpus: str, corpus_dir: Path, entry: str, tmp: Path, seed: int) -> Prepared:
    src = corpus_dir / entry
    if corpus == "bugs":
        meta = _yaml(src / "bug.yaml")
        return Prepared(entry, str(src), str(meta.get("operator", "")), None, 0, 0)
    dest = tmp / entry
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    test_files = sorted(dest.glob("test_*.py"))
    if len(test_files) != 1:
        raise RuntimeError(f"{entry}: expected one test_*.py, found {len(test_files)}")
    test_file = test_files[0]
    source = test_file.read_text(encoding="utf-8")
    tree = ast.parse(source)
    names = [
        s.name for s in tree.body if isinstance(s, ast.FunctionDef) and s.name.startswith("test")
    ]
    measured = _junit(dest, [test_file.name], TEST_ENV)
    failing = {n for n, (failed, _) in measured.items() if failed}
    search, held = split_tests(names, failing, f"{seed}:{entry}")
    (dest / "tests").mkdir()
    (dest / "heldout").mkdir()
    stem = test_file.stem
    (dest / "tests" / test_file.name).write_text(_write_part(source, tree, set(search)), "utf-8")
    (dest / "heldout" / f"{stem}_heldout.py").write_text(
        _write_part(source, tree, set(held)), "utf-8"
    )
    test_file.unlink()
    # Per-test limit: 20 times the slowest passing test of the buggy program, at least 0.5 s
    # (a looping mutant then costs that per test instead of the corpus default of 5 s).
    passing = [secs for failed, secs in measured.values() if not failed] or [0.0]
    per_test = max(0.5, round(20 * max(passing), 2))
    size = ""
    with open(corpus_dir / "entries.json", encoding="utf-8") as handle:
        for row in json.load(handle):
            if row.get("name") == entry:
                size = str(row.get("fix_size_lines", ""))
    return Prepared(entry, str(dest), size, per_test, len(search), len(held))


def _yaml(path: Path) -> dict[str, Any]:
    import yaml

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


# --- one search (in a child process) --------------------------------------------------------------


def strategy_for(agent: str, seed: int) -> dict[str, Any]:
    if agent == "old":
        return {"kind": "mutation", "samples": 50, "max_steps": 1, "seed": seed}
    return {"kind": "mutation", "samples": 200, "max_steps": 1, "seed": seed, "order": "ranked"}


def config_for(task: dict[str, Any], tmp: Path) -> dict[str, Any]:
    env = dict(TEST_ENV)
    if task["agent"] == "new" and task.get("per_test_timeout"):
        env[PER_TEST_ENV] = f"{task['per_test_timeout']:g}"
    budget = int(task["budget"])
    config = {
        "workspace": {"path": task["path"], "copy": True},
        "store": {
            "home": str(tmp / "home"),
            "excludes": ["__pycache__/", ".pytest_cache/", "*.pyc", ".coverage*"],
        },
        "task": "Make the failing tests pass.",
        "strategies": {"mutate": strategy_for(task["agent"], int(task["seed"]))},
        "scoring": {
            "search_tests": {
                "command": f"{shlex.quote(sys.executable)} -m pytest -q tests",
                "timeout": task["timeout"],
                "env": env,
            },
            "grade_tests": {
                "command": f"{shlex.quote(sys.executable)} -m pytest -q heldout",
                "timeout": task["timeout"],
                "env": env,
            },
            "score": "pass_fraction",
        },
        "search": {
            "policy": task["policy"],
            "params": POLICY_PARAMS.get(task["policy"], {}),
            "seed": task["seed"],
            "stop_on_perfect": True,
            "budget": {"test_runs": budget, "expansions": budget * 10},
        },
        "output": {"runs_dir": str(tmp / "runs")},
    }
    from treesearch.config import apply_overrides

    return apply_overrides(config, task.get("overrides", []))


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


def breakdown(run_dir: Path, seconds: float) -> dict[str, float]:
    """Where a search's ``seconds`` went, from its run folder: ``before`` (up to the first
    expansion's start: the root's test run, workers and warm servers starting), the expansions'
    ``restore``, ``agent``, ``capture``, ``score`` and ``bookkeeping`` seconds summed (with
    workers, the workers' seconds add up to more than the wall clock), the agent's seconds in
    expansions that changed nothing (``noop_agent``, counted in ``agent`` too) and their number
    (``noops``), the partial nodes' completing runs (``completions``, their restore and score
    seconds counted in ``restore`` and ``score``), and ``outside`` (the search's seconds outside
    the controller's clock: the workspace copy and store before it, the final grade and report
    after it)."""
    out: dict[str, float] = {}
    noop_ks: set[int] = set()
    try:
        for ev in read_jsonl(run_dir / "events.jsonl"):
            if ev.get("event") == "expansion" and ev.get("outcome") == "noop":
                noop_ks.add(int(ev["k"]))
        rows = read_jsonl(run_dir / "timings.jsonl")
    except (OSError, ValueError):
        return out
    for name in ("restore", "agent", "capture", "score", "bookkeeping"):
        out[name] = round(sum(float(r.get(f"{name}_seconds", 0.0)) for r in rows), 2)
    # A partial node's completing run has a row of its own, without "k" (restore and score).
    out["noop_agent"] = round(
        sum(float(r.get("agent_seconds", 0.0)) for r in rows if r.get("k") in noop_ks), 2
    )
    out["noops"] = len(noop_ks)
    out["expansions"] = sum(1 for r in rows if "k" in r)
    out["completions"] = sum(1 for r in rows if "completed" in r)
    if rows:
        first = min(float(r["elapsed"]) - float(r["seconds"]) for r in rows)
        last = max(float(r["elapsed"]) for r in rows)
        out["before"] = round(first, 2)
        out["outside"] = round(seconds - last, 2)
    return out


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def run_child(task: dict[str, Any]) -> dict[str, Any]:
    """One search, in this process (the child): returns the Outcome as a dict."""
    from treesearch.app import run_from_config

    base = Outcome(
        task["entry"], task["agent"], int(task["budget"]), False, False, 0, 0, 0, 0.0, "", ""
    )
    base.fix_size = task.get("fix_size", "")
    with tempfile.TemporaryDirectory(prefix="repair-bench-") as tmp_name:
        tmp = Path(tmp_name)
        t0 = time.perf_counter()
        try:
            out = run_from_config(config_for(task, tmp), base_dir=tmp)
        except Exception as exc:  # noqa: BLE001 - a broken run is reported, not fatal
            base.seconds = time.perf_counter() - t0
            base.stop_reason = "error"
            base.error = f"{type(exc).__name__}: {exc}"
            return asdict(base)
        base.seconds = time.perf_counter() - t0
        base.plausible = (out.best_score or 0.0) >= 1.0
        grade = out.grade
        base.correct = base.plausible and grade is not None and bool(grade.resolved)
        base.test_runs = out.usage.test_runs
        base.fl_runs = fl_runs(out.run_dir)
        base.breakdown = breakdown(out.run_dir, base.seconds)
        base.expansions = out.usage.expansions
        base.stop_reason = str(out.stop_reason)
        base.patch = out.patch or ""
        copy = Path(out.workspace)
        if copy.parent.name.startswith("treesearch-") and str(copy) != task["path"]:
            shutil.rmtree(copy.parent, ignore_errors=True)
    return asdict(base)


def run_one(task: dict[str, Any]) -> Outcome:
    """One search in a child process whose PYTHONPATH starts with the agent's code."""
    code = task["code"]
    env = {**os.environ, "PYTHONPATH": code + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(task)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    last = proc.stdout.strip().splitlines()[-1:] or [""]
    try:
        data = json.loads(last[0])
        return Outcome(**{f.name: data[f.name] for f in fields(Outcome) if f.name in data})
    except (ValueError, TypeError, KeyError):
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return Outcome(
            task["entry"],
            task["agent"],
            int(task["budget"]),
            False,
            False,
            0,
            0,
            0,
            time.perf_counter() - t0,
            "error",
            "",
            task.get("fix_size", ""),
            error=f"child exited {proc.returncode}: {tail[:300]}",
        )


# --- report ---------------------------------------------------------------------------------------


def _median(values: list[float], fmt: str = "g") -> str:
    return format(statistics.median(values), fmt) if values else "-"


def _mean_seconds(rows: list[Outcome], agent: str) -> str:
    if not rows or agent.endswith("~"):
        return "-"  # a derived row has no seconds of its own
    return f"{statistics.mean(r.seconds for r in rows):.1f}"


def report(results: list[Outcome], entries: list[str], corpus: str, policy: str) -> str:
    combos = sorted({(r.agent, r.budget) for r in results}, key=lambda c: (c[1], c[0] != "old"))
    lines = [
        f"repair benchmark: corpus {corpus}, {len(entries)} entries, policy {policy}",
        "",
        f"{'agent':<6} {'budget':>6} {'plausible':>10} {'correct':>8} {'wrong':>6} "
        f"{'runs to P':>10} {'s to P':>7} {'s/entry':>8} {'errors':>6}",
    ]
    for agent, budget in combos:
        rows = [r for r in results if r.agent == agent and r.budget == budget]
        plausible = [r for r in rows if r.plausible]
        correct = [r for r in rows if r.correct]
        lines.append(
            f"{agent:<6} {budget:>6} {len(plausible):>5}/{len(rows):<4} {len(correct):>8} "
            f"{len(plausible) - len(correct):>6} "
            f"{_median([r.test_runs for r in plausible]):>10} "
            f"{_median([r.seconds for r in plausible], '.1f'):>7} "
            f"{_mean_seconds(rows, agent):>8} "
            f"{sum(1 for r in rows if r.error):>6}"
        )
    lines += [
        "",
        "plausible = all search tests pass; correct = plausible and all held-out tests pass;",
        "wrong = plausible but a held-out test fails; runs/s to P = median test runs / wall",
        "seconds until the first plausible fix (entries with one); agent~ = read off the",
        "larger-budget searches (--derive).",
        "",
        "per entry: C correct, P plausible but wrong, - none; the number is the test runs used",
        f"{'entry':<18} {'fix':>4}" + "".join(f" {a + '@' + str(b):>10}" for a, b in combos),
    ]
    by_key = {(r.entry, r.agent, r.budget): r for r in results}
    for entry in entries:
        cells = []
        for agent, budget in combos:
            r = by_key.get((entry, agent, budget))
            if r is None:
                cells.append("?")
            elif r.error:
                cells.append("error")
            else:
                mark = "C" if r.correct else "P" if r.plausible else "-"
                cells.append(f"{mark} {r.test_runs}")
        size = next((r.fix_size for r in results if r.entry == entry), "")
        lines.append(f"{entry:<18} {size:>4}" + "".join(f" {c:>10}" for c in cells))
    for r in results:
        if r.error:
            lines.append(f"error: {r.entry} / {r.agent}@{r.budget}: {r.error}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="bugs")
    parser.add_argument("--corpus-dir", type=Path, help="the corpus folder (default: per corpus)")
    parser.add_argument("--agents", default="new", help="old,new (old needs --old-code)")
    parser.add_argument("--old-code", type=Path, help="checkout holding the old agent")
    parser.add_argument(
        "--new-code", type=Path, help="checkout holding the new agent (default: this one)"
    )
    parser.add_argument("--budgets", default="30,100", help="test runs per search")
    parser.add_argument("--policy", default="best_first")
    parser.add_argument("--jobs", type=int, default=2, help="searches run in parallel")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per test run")
    parser.add_argument("--entries", default="", help="comma-separated entry ids (default: all)")
    parser.add_argument("--json", type=Path, help="write every result to this file")
    parser.add_argument("--patches", action="store_true", help="print each plausible patch")
    parser.add_argument(
        "--report", help="only print the report of --json files (comma-separated: merged)"
    )
    parser.add_argument(
        "--derive",
        default="",
        help="with --report: budgets (e.g. 30) read off larger-budget searches (see derived)",
    )
    parser.add_argument(
        "-c",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config override for every search (as `treesearch run -c`), e.g. search.workers=2",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        print(json.dumps(run_child(json.loads(args.child))))
        return 0
    if args.report:
        saved: list[Outcome] = []
        entries: list[str] = []
        walls = []
        for name in args.report.split(","):
            data = json.loads(Path(name).read_text(encoding="utf-8"))
            saved += [Outcome(**row) for row in data["results"]]
            entries += [e for e in data["entries"] if e not in entries]
            walls.append(
                f"{name}: {data['searches']} of {data.get('planned', data['searches'])} "
                f"searches in {data['wall']:.0f} s wall ({data['where']})"
            )
        if args.derive:
            saved += derived(saved, [int(b) for b in args.derive.split(",") if b])
        print(report(saved, entries, data["corpus"], data["policy"]))
        print("\n" + "\n".join(walls))
        if args.patches:
            _print_patches(saved)
        return 0
    corpus_dir = args.corpus_dir or CORPORA[args.corpus]
    agents = [a for a in args.agents.split(",") if a]
    if "old" in agents and args.old_code is None:
        parser.error("--agents old needs --old-code DIR (a checkout of the old agent)")
    codes = {
        "new": str((args.new_code or REPO).resolve()),
        "old": str(args.old_code.resolve()) if args.old_code else "",
    }
    budgets = [int(b) for b in args.budgets.split(",") if b]
    marker = "bug.yaml" if args.corpus == "bugs" else "conftest.py"
    entries = sorted(p.name for p in corpus_dir.iterdir() if (p / marker).is_file())
    if args.entries:
        wanted = args.entries.split(",")
        entries = [e for e in entries if e in wanted]
    t0 = time.perf_counter()
    results: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="repair-corpus-") as tmp_name:
        tmp = Path(tmp_name)
        prepared = {e: prepare(args.corpus, corpus_dir, e, tmp, args.seed) for e in entries}
        tasks = [
            {
                "entry": e,
                "path": prepared[e].path,
                "fix_size": prepared[e].fix_size,
                "per_test_timeout": prepared[e].per_test_timeout,
                "agent": agent,
                "code": codes[agent],
                "budget": budget,
                "seed": args.seed,
                "policy": args.policy,
                "timeout": args.timeout,
                "overrides": args.overrides,
            }
            for budget in sorted(budgets, reverse=True)
            for e in entries
            for agent in agents
        ]
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = [pool.submit(run_one, task) for task in tasks]
            for future in as_completed(futures):
                r = future.result()
                results.append(r)
                mark = "correct" if r.correct else "plausible" if r.plausible else "-"
                print(
                    f"[{len(results)}/{len(tasks)} {time.perf_counter() - t0:.0f}s] {r.entry} / "
                    f"{r.agent}@{r.budget}: {mark}, {r.test_runs} test runs, {r.seconds:.1f} s"
                    + (f" ({r.error})" if r.error else ""),
                    file=sys.stderr,
                    flush=True,
                )
                if args.json:  # kept up to date, so a cut-short run still leaves its results
                    _save(args, results, entries, len(tasks), time.perf_counter() - t0)
    wall = time.perf_counter() - t0
    print(report(results, entries, args.corpus, args.policy))
    print(f"\n{len(results)} searches in {wall:.0f} s wall ({_where(args)})")
    if args.patches:
        _print_patches(results)
    if args.json:
        _save(args, results, entries, len(tasks), wall)
    return 0


def _print_patches(results: list[Outcome]) -> None:
    for r in results:
        if r.plausible and r.patch:
            verdict = "correct" if r.correct else "WRONG"
            print(f"\n--- {r.entry} / {r.agent}@{r.budget} ({verdict})")
            print(r.patch.rstrip())


def derived(results: list[Outcome], budgets: list[int]) -> list[Outcome]:
    """Results at a smaller budget read off searches with a larger one (agent ``X~``).

    A search stops at its first plausible fix and no policy or agent here looks at the budget
    left, so a search with budget B spends its first b < B test runs as a search with budget b
    would: it has a plausible fix at budget b exactly when its first one came within b runs.
    Seconds are those of the larger search (an upper bound when no fix came in time)."""
    out = []
    for b in budgets:
        for r in results:
            if r.budget <= b or r.agent.endswith("~"):
                continue
            hit = r.plausible and r.test_runs <= b
            out.append(
                Outcome(
                    r.entry,
                    r.agent + "~",
                    b,
                    hit,
                    hit and r.correct,
                    r.test_runs if hit else b,
                    r.fl_runs,
                    r.expansions,
                    r.seconds,
                    r.stop_reason if hit else "test_runs (derived)",
                    r.patch if hit else "",
                    r.fix_size,
                    r.error,
                )
            )
    return out


def _where(args: argparse.Namespace) -> str:
    return f"{args.jobs} jobs, python {platform.python_version()}, {os.cpu_count()} CPUs"


def _save(
    args: argparse.Namespace, results: list[Outcome], entries: list[str], total: int, wall: float
) -> None:
    data = {
        "corpus": args.corpus,
        "policy": args.policy,
        "seed": args.seed,
        "agents": args.agents,
        "budgets": args.budgets,
        "overrides": args.overrides,
        "entries": entries,
        "searches": len(results),
        "planned": total,
        "wall": wall,
        "where": _where(args),
        "results": [asdict(r) for r in results],
    }
    temp = args.json.with_suffix(".tmp")
    temp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    temp.replace(args.json)


if __name__ == "__main__":
    raise SystemExit(main())
