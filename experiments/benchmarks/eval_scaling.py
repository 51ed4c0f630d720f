#!/usr/bin/env python3
"""Eval scaling: wall time of the built-in instance set at 1 and 2 pool workers and on local Ray.

Usage::

    python experiments/benchmarks/eval_scaling.py [--bugs ID,ID,...] [--ray-cpus 2]
        [-c search.budget.test_runs=12 ...] [--keep DIR]

Builds the built-in set (``experiments/instances/build.py``) into a temporary folder, then runs
``treesearch.eval.run_eval`` with ``configs/eval-mutation.yaml`` three times over it, one after
the other: a local pool of 1 worker, a local pool of 2 workers, and Ray (a local Ray started in
this process with ``--ray-cpus`` CPUs; its start-up is timed apart and included in the Ray
total). Each run writes its own eval directory. It prints the wall times, the speed-up of 2
workers over 1 (target >= 1.8x on 2 cores), Ray's overhead per instance over the 2-worker pool
(target < 1 s), and whether the three runs gave the same per-instance results (timing fields
aside). Nothing is asserted: a missed target prints FAIL and the script exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:
    from treesearch.eval import run_eval
except ImportError:  # pragma: no cover - set-up hint only
    sys.exit("cannot import treesearch: run `pip install -e '.[ray]'` in the repository first")

ROOT = Path(__file__).resolve().parent.parent.parent
CONFIG = ROOT / "configs" / "eval-mutation.yaml"


def rows(out: Path) -> list[dict]:
    result = []
    for line in (out / "results.jsonl").read_text().splitlines():
        row = json.loads(line)
        row.pop("seconds", None)
        row.pop("env_log", None)
        result.append(row)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bugs", help="comma-separated bug ids (default: every buildable bug)")
    ap.add_argument("--ray-cpus", type=int, default=2)
    ap.add_argument("-c", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--keep", help="write the built set and the eval directories here")
    args = ap.parse_args()
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="eval-scaling-"))
    build = base / "build"
    cmd = [sys.executable, str(ROOT / "experiments/instances/build.py"), "--out", str(build)]
    if args.bugs:
        cmd += ["--bugs", args.bugs]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    instances = build / "instances.jsonl"
    n = len(instances.read_text().splitlines())
    common = dict(
        config=CONFIG, instances=instances, repos=build / "repos", overrides=args.overrides
    )
    times: dict[str, float] = {}
    outs: dict[str, Path] = {}
    for label, workers in (("pool, 1 worker", 1), ("pool, 2 workers", 2)):
        out = base / f"pool-{workers}"
        t0 = time.perf_counter()
        run_eval(**common, out=out, workers=workers, executor="local")  # type: ignore[arg-type]
        times[label] = time.perf_counter() - t0
        outs[label] = out
        print(f"{label:<18} {times[label]:8.1f} s", flush=True)
    try:
        import ray
    except ImportError:
        print("ray                (not installed: pip install -e '.[ray]')")
        ray = None
    ray_init = 0.0
    if ray is not None:
        t0 = time.perf_counter()
        ray.init(num_cpus=args.ray_cpus, include_dashboard=False, log_to_driver=False)
        ray_init = time.perf_counter() - t0
        out = base / "ray"
        t1 = time.perf_counter()
        run_eval(**common, out=out, workers=args.ray_cpus, executor="ray")  # type: ignore[arg-type]
        tasks = time.perf_counter() - t1
        times["ray"] = ray_init + tasks
        ray.shutdown()
        outs["ray"] = out
        print(
            f"{'ray':<18} {times['ray']:8.1f} s (start-up {ray_init:.1f} s + batch {tasks:.1f} s)"
        )
    one, two = times["pool, 1 worker"], times["pool, 2 workers"]
    speedup = one / two
    print()
    print(f"{n} instances; python {platform.python_version()}, {os.cpu_count()} CPUs")
    print(
        f"speed-up, 2 workers over 1: {speedup:.2f}x  {'PASS' if speedup >= 1.8 else 'FAIL'}"
        " (target >= 1.8x)"
    )
    if "ray" in times:
        over = (times["ray"] - two) / n
        print(
            f"ray overhead per instance over the 2-worker pool: {over:+.2f} s  "
            f"{'PASS' if over < 1.0 else 'FAIL'} (target < 1 s; start-up included)"
        )
        print(f"  without Ray's start-up: {(times['ray'] - ray_init - two) / n:+.2f} s")
    first = rows(outs["pool, 1 worker"])
    same = all(rows(o) == first for o in outs.values())
    print(f"same per-instance results in every run: {'yes' if same else 'NO'}")
    print(f"resolved: {sum(r['status'] == 'resolved' for r in first)}/{n}")
    print(f"eval directories under {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
