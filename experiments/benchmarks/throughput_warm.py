"""Test runs per second: the warm pytest runner against cold ``python -m pytest`` runs.

Two suites: the demo project (10 tests) and one bug of ``experiments/bugs/`` (default
``arith_bisect``), each copied to a scratch folder. Per suite, ``--runs`` rounds of one cold run
(``run_tests`` as a search makes it) and one warm run (``run_tests`` with a ``WarmRunner`` in
mode ``on``, its server started before the clock: a search pays that once), interleaved so that
both see the same load. Every warm run's outcomes are checked against the cold ones.

    python experiments/benchmarks/throughput_warm.py [--runs 10] [--bug arith_bisect] [--json FILE]

Target (issue 15): warm >= 4x the cold runs per second on both. On a shared machine the figure is
noisy; ``measure`` is what ``throughput.py`` combines with the other throughput figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from treesearch.scoring import TestSpec, run_tests
from treesearch.scoring.warm import WarmRunner

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "experiments" / "demo" / "project"
BUGS = ROOT / "experiments" / "bugs"
TARGET = 4.0
SPEC = TestSpec(
    command="python -m pytest -q", timeout=120, env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
)


def _outcomes(run: Any) -> list[tuple[str, str]]:
    return sorted((t.id, t.outcome.value) for t in run.tests)


def _cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _cpu_server(runner: WarmRunner) -> float:
    """CPU seconds of the warm servers and of the children they reaped (``/proc``)."""
    total = 0
    for server in runner._servers.values():
        fields = Path(f"/proc/{server.proc.pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
        total += sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    return total / os.sysconf("SC_CLK_TCK")


def _settle(runner: WarmRunner) -> None:
    """Wait for the servers to reap the run's child (the client sends ``reap`` and returns): a
    zombie's CPU time shows nowhere until its parent reaps it, which would put it outside the
    measured span."""
    for server in runner._servers.values():
        server.settle()


def measure_suite(source: Path, runs: int, scratch: Path) -> dict[str, Any]:
    """Cold and warm runs per second of the suite in ``source`` (copied), interleaved; and the
    CPU seconds per run, which the load of a shared machine changes less."""
    ws = scratch / source.name
    shutil.copytree(source, ws)
    cold_seconds = warm_seconds = cold_cpu = warm_cpu = 0.0
    with WarmRunner("on") as runner:
        expected = _outcomes(run_tests(SPEC, ws))  # untimed: page cache, the server's start
        if _outcomes(run_tests(SPEC, ws, warm=runner)) != expected:
            raise SystemExit(f"{source.name}: warm outcomes differ from cold ones")
        run_tests(SPEC, ws, warm=runner)  # the server imports what the first run taught it
        for _ in range(runs):
            c0, s0, t = _cpu_children(), _cpu_self(), time.perf_counter()
            cold = run_tests(SPEC, ws)
            cold_seconds += time.perf_counter() - t
            cold_cpu += _cpu_children() - c0 + _cpu_self() - s0
            w0, s0, t = _cpu_server(runner), _cpu_self(), time.perf_counter()
            warm = run_tests(SPEC, ws, warm=runner)
            warm_seconds += time.perf_counter() - t
            _settle(runner)
            warm_cpu += _cpu_server(runner) - w0 + _cpu_self() - s0
            if _outcomes(cold) != expected or _outcomes(warm) != expected:
                raise SystemExit(f"{source.name}: outcomes changed between runs")
        notes = list(runner.notes)
    cold_rate, warm_rate = runs / cold_seconds, runs / warm_seconds
    return {
        "cold_cpu_seconds_per_run": round(cold_cpu / runs, 4),
        "warm_cpu_seconds_per_run": round(warm_cpu / runs, 4),
        "cpu_ratio": round(cold_cpu / warm_cpu, 2) if warm_cpu else None,
        "suite": source.name,
        "tests": len(expected),
        "runs": runs,
        "cold_runs_per_second": round(cold_rate, 3),
        "warm_runs_per_second": round(warm_rate, 3),
        "ratio": round(warm_rate / cold_rate, 2),
        "target": TARGET,
        "pass": warm_rate / cold_rate >= TARGET,
        "notes": notes,
    }


def measure(runs: int = 10, bug: str = "arith_bisect") -> dict[str, Any]:
    """Warm against cold test runs per second on the demo's 10 tests and on one bug."""
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="throughput-warm-") as tmp:
        rows = [measure_suite(DEMO, runs, Path(tmp)), measure_suite(BUGS / bug, runs, Path(tmp))]
    return {
        "warm_vs_cold": rows,
        "python": sys.version.split()[0],
        "load_before": [round(x, 2) for x in load],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }


def report(result: dict[str, Any]) -> str:
    lines = [
        f"{'suite':<14} {'tests':>5} {'cold/s':>8} {'warm/s':>8} {'ratio':>6}  target"
        f"          cpu/run cold  warm  ratio"
    ]
    for row in result["warm_vs_cold"]:
        verdict = "PASS" if row["pass"] else "FAIL"
        lines.append(
            f"{row['suite']:<14} {row['tests']:>5} {row['cold_runs_per_second']:>8.2f} "
            f"{row['warm_runs_per_second']:>8.2f} {row['ratio']:>5.2f}x  >= {TARGET:g}x {verdict}"
            f"  {row['cold_cpu_seconds_per_run']:>14.3f} {row['warm_cpu_seconds_per_run']:>5.3f}"
            f" {row['cpu_ratio']:>5}x"
        )
        lines += [f"  note: {n}" for n in row["notes"]]
    if "load_before" in result:
        lines.append(
            f"load average (1, 5, 15 min) before {result['load_before']}, "
            f"after {result['load_after']} on {os.cpu_count()} cores"
        )
    lines.append("(a shared machine: the figures are noisy; compare ratios of one run)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10, help="timed rounds per suite (default 10)")
    ap.add_argument("--bug", default="arith_bisect", help="the bug of experiments/bugs/ to run")
    ap.add_argument("--json", type=Path, metavar="FILE", help="also write the figures here")
    args = ap.parse_args(argv)
    result = measure(args.runs, args.bug)
    print(report(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
