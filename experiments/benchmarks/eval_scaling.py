#!/usr/bin/env python3
"""Eval scaling: wall time of the built-in instance set at 1 and 2 pool workers and on local Ray.

Usage::

    python experiments/benchmarks/eval_scaling.py [--bugs ID,ID,...] [--ray-cpus 2]
        [-c search.budget.test_runs=12 ...] [--keep DIR] [--repeat N] [--no-ray]

Builds the built-in set (``experiments/instances/build.py``) into a temporary folder, then runs
``treesearch.eval.run_eval`` with ``configs/eval-mutation.yaml`` over it, one run after the
other: a local pool of 1 worker; a local pool of 2 workers starting the instances in input order
(as without ``--durations-from``); a local pool of 2 workers starting them longest first by the
seconds the 1-worker run recorded (``--durations-from``); and Ray (a local Ray started in this
process with ``--ray-cpus`` CPUs; its start-up is timed apart and included in the Ray total).
``--repeat N`` runs the three pool runs N times (the spread of the speed-ups is printed). Each
run writes its own eval directory. It prints the wall times, the speed-up of 2 workers over 1
in both orders side by side (target >= 1.8x on 2 cores), Ray's overhead per instance over the
2-worker pool (target < 1 s), where each run's time went (worker start-up, the phases of the
instances, the driver's share, workers idle at the end, CPU seconds of the pool's processes),
and whether all runs gave the same per-instance results (timing fields aside). Nothing is
asserted: a missed target prints FAIL and the script exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

try:
    from treesearch.eval import run_eval
    from treesearch.eval.environment import _swebench_spec_map
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


PHASES = ("workspace", "env", "search", "grade", "pack", "cleanup")


class Timeline:
    """Collects the progress events of one run: when each worker started its first instance,
    the phases of every instance, the driver's share, when each worker went idle for good."""

    def __init__(self) -> None:
        self.called = time.time()
        self.started = 0.0
        self.timings: list[dict] = []
        self.order = "input"

    def __call__(self, event: dict) -> None:
        if event["event"] == "eval_started":
            self.started = event["time"]
            self.order = event.get("order", "input")
        elif event["event"] == "instance_finished" and event.get("timing"):
            self.timings.append(event["timing"])

    def lines(self, wall: float, cpu: float | None) -> list[str]:
        by_pid: dict[int, list[dict]] = {}
        for t in self.timings:
            by_pid.setdefault(t["pid"], []).append(t)
        end = self.called + wall
        first = [min(t["start"] for t in ts) - self.called for ts in by_pid.values()]
        idle = [end - max(t["end"] for t in ts) for ts in by_pid.values()]
        gaps = 0.0
        for ts in by_pid.values():
            ts.sort(key=lambda t: t["start"])
            gaps += sum(max(0.0, b["start"] - a["end"]) for a, b in zip(ts, ts[1:], strict=False))
        sums = {p: sum(t.get("phases", {}).get(p, 0.0) for t in self.timings) for p in PHASES}
        commit = sum(t.get("commit", 0.0) for t in self.timings)
        out = [
            "  start-up to first instance, per worker: "
            + ", ".join(f"{x:.2f}" for x in sorted(first))
            + f" s (driver before the batch: {self.started - self.called:.2f} s)",
            "  instance phases (s, summed): "
            + ", ".join(f"{p} {sums[p]:.1f}" for p in PHASES)
            + f"; driver commit {commit:.1f}",
            "  workers idle at the end: "
            + ", ".join(f"{x:.2f}" for x in sorted(idle))
            + f" s; between instances: {gaps:.2f} s",
        ]
        if cpu is not None:
            out.append(f"  CPU seconds (driver, workers and their children): {cpu:.1f}")
        work = [t["cpu"] for t in sorted(self.timings, key=lambda t: t["start"]) if "cpu" in t]
        if work:
            out.append(
                f"  instances' own CPU seconds: {sum(work):.1f}; were each instance to take just "
                f"its CPU seconds, in this run's start order 2 workers would need "
                f"{makespan(work, 2):.1f} s (half the sum: {sum(work) / 2:.1f} s)"
            )
        return out


def makespan(durations: list[float], workers: int) -> float:
    """When the last job ends, jobs taken in order by the first free worker."""
    free = [0.0] * workers
    for d in durations:
        i = free.index(min(free))
        free[i] += d
    return max(free)


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bugs", help="comma-separated bug ids (default: every buildable bug)")
    ap.add_argument("--ray-cpus", type=int, default=2)
    ap.add_argument("-c", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--keep", help="write the built set and the eval directories here")
    ap.add_argument("--repeat", type=int, default=1, help="run the pool runs N times")
    ap.add_argument("--no-ray", action="store_true", help="leave out the Ray run")
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
    # The driver's one-time costs stay out of every timed run alike: treesearch is imported
    # above, and swebench's specs (which the driver looks up once per process) are read here.
    _swebench_spec_map()
    times: dict[str, float] = {}
    outs: dict[str, Path] = {}
    ratios: dict[str, list[float]] = {"input": [], "longest_first": []}
    runs = (
        ("pool, 1 worker", 1, None),
        ("pool, 2 workers, input order", 2, None),
        ("pool, 2 workers, longest first", 2, "pool-1"),
    )
    for rep in range(1, args.repeat + 1):
        for label, workers, durations in runs:
            name = f"pool-{workers}" + ("-longest" if durations else "")
            out = base / (name if rep == 1 else f"{name}.{rep}")
            earlier = base / ("pool-1" if rep == 1 else f"pool-1.{rep}")
            timeline = Timeline()
            c0, t0 = cpu_seconds(), time.perf_counter()
            run_eval(
                **common,  # type: ignore[arg-type]
                out=out,
                workers=workers,
                executor="local",
                on_event=timeline,
                durations_from=earlier if durations else None,
            )
            wall = time.perf_counter() - t0
            times[label] = wall
            outs[f"{label} #{rep}"] = out
            print(f"{label:<32} {wall:8.1f} s   (load {os.getloadavg()[0]:.1f})", flush=True)
            print("\n".join(timeline.lines(wall, cpu_seconds() - c0)), flush=True)
        one = times["pool, 1 worker"]
        ratios["input"].append(one / times["pool, 2 workers, input order"])
        ratios["longest_first"].append(one / times["pool, 2 workers, longest first"])
        print(
            f"run {rep}: speed-up of 2 workers over 1: input order "
            f"{ratios['input'][-1]:.2f}x, longest first {ratios['longest_first'][-1]:.2f}x",
            flush=True,
        )
    ray: Any = None
    if not args.no_ray:
        try:
            import ray
        except ImportError:
            print("ray                (not installed: pip install -e '.[ray]')")
    ray_init = 0.0
    if ray is not None:
        t0 = time.perf_counter()
        ray.init(num_cpus=args.ray_cpus, include_dashboard=False, log_to_driver=False)
        ray_init = time.perf_counter() - t0
        out = base / "ray"
        timeline = Timeline()
        t1 = time.perf_counter()
        run_eval(
            **common,  # type: ignore[arg-type]
            out=out,
            workers=args.ray_cpus,
            executor="ray",
            on_event=timeline,
        )
        tasks = time.perf_counter() - t1
        times["ray"] = ray_init + tasks
        ray.shutdown()
        outs["ray"] = out
        print(
            f"{'ray':<32} {times['ray']:8.1f} s (start-up {ray_init:.1f} s + batch {tasks:.1f} s)"
        )
        print("\n".join(timeline.lines(tasks, None)))
    two = times["pool, 2 workers, input order"]
    print()
    print(
        f"{n} instances; python {platform.python_version()}, {os.cpu_count()} CPUs; "
        f"load average now {os.getloadavg()[0]:.1f} (figures move with other work on the machine)"
    )
    print("speed-up, 2 workers over 1 (target >= 1.8x):")
    for order, label in (("input", "input order (old)"), ("longest_first", "longest first (new)")):
        got = ratios[order]
        spread = (
            f" (min {min(got):.2f}, max {max(got):.2f}, {len(got)} runs)" if len(got) > 1 else ""
        )
        mid = statistics.median(got)
        print(f"  {label:<22} {mid:.2f}x{spread}  {'PASS' if mid >= 1.8 else 'FAIL'}")
    if "ray" in times:
        over = (times["ray"] - two) / n
        print(
            f"ray overhead per instance over the 2-worker pool: {over:+.2f} s  "
            f"{'PASS' if over < 1.0 else 'FAIL'} (target < 1 s; start-up included)"
        )
        print(f"  without Ray's start-up: {(times['ray'] - ray_init - two) / n:+.2f} s")
    reference = rows(outs["pool, 1 worker #1"])
    same = all(rows(o) == reference for o in outs.values())
    print(f"same per-instance results in every run: {'yes' if same else 'NO'}")
    print(f"resolved: {sum(r['status'] == 'resolved' for r in reference)}/{n}")
    print(f"eval directories under {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
