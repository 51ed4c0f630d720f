"""Warm run time with and without each of the warm runner's private-internals patches, in one run
(issue #32, item 1: which patches earn their keep).

It measures the warm runner as it was at 750ef54, where every patch could still be switched off
(later commits removed the ones that did not earn 10% of a warm run), so it runs with a checkout
of that commit first on the path::

    git worktree add --detach /tmp/ts-750ef54 750ef54
    PYTHONPATH=/tmp/ts-750ef54 python experiments/benchmarks/warm_patches.py --rounds 40 \
        --suite "demo=$(which python):/tmp/ts-750ef54/experiments/demo/project:-p no:cacheprovider"

``--suite NAME=PYTHON:FOLDER:ARGS`` (repeatable) names the interpreter and the pytest arguments;
``--variants "A;B"`` keeps "all on" and the variants named. Each variant is its own WarmRunner
(mode ``on``, two untimed runs first); the rounds interleave the variants in a shuffled order,
so they all see the same load. Per variant: median and mean wall seconds of one warm
``run_tests``, CPU seconds per run (server + its reaped children + this process's share), and
both as a ratio to the variant with every patch on.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from treesearch.scoring import TestSpec, _warm_server, _warm_speed, run_tests
from treesearch.scoring.warm import WarmRunner


def _cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _cpu_server(runner: WarmRunner) -> float:
    total = 0
    for server in runner._servers.values():
        fields = Path(f"/proc/{server.proc.pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
        total += sum(int(x) for x in fields[11:15])
    return total / os.sysconf("SC_CLK_TCK")


SPEED = Path(_warm_speed.__file__).read_text()
SERVER = Path(_warm_server.__file__).read_text()

NO_VARNAMES = SPEED.replace(
    "        memo = self\n", "        return False\n        memo = self\n", 1
)
assert NO_VARNAMES != SPEED
NO_PRIME = SPEED + (
    "\n\ndef prime_inspect(site_dirs):  # measurement: as if never primed\n"
    "    for name in ('_filesbymodname', 'modulesbyfile'):\n"
    "        table = getattr(inspect, name, None)\n"
    "        if isinstance(table, dict):\n"
    "            table.clear()\n"
)
NO_PLUGINS = SERVER.replace(
    "        from _pytest.config import default_plugins\n", "        default_plugins = ()\n", 1
)
assert NO_PLUGINS != SERVER

ALL = {"warm_up": True, "rewrite_cache": True, "premade": True, "tree_memo": True}
NONE = {"warm_up": False, "rewrite_cache": False, "premade": False, "tree_memo": False}
VARIANTS: dict[str, tuple[dict[str, bool], dict[str, str]]] = {
    "all on": (ALL, {}),
    "-PremadeConfig": ({**ALL, "premade": False}, {}),
    "-RewriteCache": ({**ALL, "rewrite_cache": False}, {}),
    "-TreeMemo": ({**ALL, "tree_memo": False}, {}),
    "-VarnamesMemo": (ALL, {"_treesearch_warm_speed.py": NO_VARNAMES}),
    "-prime_inspect": (ALL, {"_treesearch_warm_speed.py": NO_PRIME}),
    "-warm_up (and Varnames, prime)": ({**ALL, "warm_up": False}, {}),
    "none (default plugins preloaded)": (NONE, {}),
    "none, no default_plugins": (NONE, {"_treesearch_warm_server.py": NO_PLUGINS}),
    "kept + PremadeConfig": (
        {**ALL, "tree_memo": False},
        {"_treesearch_warm_speed.py": NO_VARNAMES, "_treesearch_warm_server.py": NO_PLUGINS},
    ),
    "kept only (warm_up, prime, RewriteCache)": (
        {**ALL, "premade": False, "tree_memo": False},
        {"_treesearch_warm_speed.py": NO_VARNAMES, "_treesearch_warm_server.py": NO_PLUGINS},
    ),
}


def outcomes(run):
    return sorted((t.id, t.outcome.value) for t in run.tests)


def measure(name, ws: Path, spec: TestSpec, rounds: int, seed: int = 0) -> dict:
    runners = {}
    expected = outcomes(run_tests(spec, ws))
    cold_times = []
    try:
        for label, (flags, files) in VARIANTS.items():
            runner = WarmRunner("on", **flags)
            scratch = runner._scratch_dir()
            for fname, text in files.items():
                (scratch / fname).write_text(text)
            runners[label] = runner
            for _ in range(2):
                run = run_tests(spec, ws, warm=runner)
                assert outcomes(run) == expected, (label, "differs from cold")
            assert runner.warm_runs == 2 and not runner.notes, (label, runner.notes)
        wall = {k: [] for k in runners}
        cpu = {k: [] for k in runners}
        rng = random.Random(seed)
        for _ in range(rounds):
            order = list(runners)
            rng.shuffle(order)
            t = time.perf_counter()
            run_tests(spec, ws)
            cold_times.append(time.perf_counter() - t)
            for label in order:
                runner = runners[label]
                c0, s0, t = _cpu_server(runner), _cpu_self(), time.perf_counter()
                run = run_tests(spec, ws, warm=runner)
                wall[label].append(time.perf_counter() - t)
                for server in runner._servers.values():
                    server.settle()
                cpu[label].append(_cpu_server(runner) - c0 + _cpu_self() - s0)
                assert outcomes(run) == expected, label
        base_w = statistics.median(wall["all on"])
        base_c = statistics.mean(cpu["all on"])
        rows = []
        for label in runners:
            w, c = statistics.median(wall[label]), statistics.mean(cpu[label])
            rows.append(
                {
                    "variant": label,
                    "median_wall_ms": round(w * 1000, 1),
                    "mean_wall_ms": round(statistics.mean(wall[label]) * 1000, 1),
                    "cpu_ms": round(c * 1000, 1),
                    "wall_vs_all_on": round(w / base_w, 3),
                    "cpu_vs_all_on": round(c / base_c, 3),
                    "notes": runners[label].notes,
                    "premade_runs": runners[label].premade_runs,
                }
            )
        server = next(iter(runners["all on"]._servers.values()))
        status = {
            "rewrite_cache": server.rewrite_cache or "used",
            "tree_memo": server.tree_memo or "used",
            "premade": server.premade or "used",
        }
        return {
            "suite": name,
            "tests": len(expected),
            "rounds": rounds,
            "cold_median_ms": round(statistics.median(cold_times) * 1000, 1),
            "patch_status_in_all_on": status,
            "rows": rows,
        }
    finally:
        for runner in runners.values():
            runner.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", action="append", required=True, help="NAME=PYTHON:FOLDER:ARGS")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--variants", help="comma-separated labels (default: all)")
    args = ap.parse_args()
    if args.variants:
        keep = ["all on"] + [v for v in args.variants.split(";") if v != "all on"]
        for label in list(VARIANTS):
            if label not in keep:
                del VARIANTS[label]
    results = []
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="w1-measure-") as tmp:
        for item in args.suite:
            name, rest = item.split("=", 1)
            python, folder, extra = rest.split(":", 2)
            env = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
            if (Path(folder) / "src").is_dir():
                env["PYTHONPATH"] = "src"
            ws = Path(tmp) / name
            shutil.copytree(folder, ws)
            spec = TestSpec(
                command=(python, "-m", "pytest", "-q", *extra.split()), timeout=300, env=env
            )
            result = measure(name, ws, spec, args.rounds)
            result["python"] = python
            results.append(result)
            print(
                f"== {name}: {result['tests']} tests, {args.rounds} rounds, "
                f"cold median {result['cold_median_ms']} ms; {result['patch_status_in_all_on']}"
            )
            print(
                f"{'variant':<34} {'median ms':>9} {'mean ms':>8} {'cpu ms':>7} {'wall x':>7} {'cpu x':>6}"
            )
            for r in result["rows"]:
                print(
                    f"{r['variant']:<34} {r['median_wall_ms']:>9} {r['mean_wall_ms']:>8} "
                    f"{r['cpu_ms']:>7} {r['wall_vs_all_on']:>7} {r['cpu_vs_all_on']:>6}"
                    + (f"  notes: {r['notes']}" if r["notes"] else "")
                )
            sys.stdout.flush()
    print(f"load before {load}, after {os.getloadavg()}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
