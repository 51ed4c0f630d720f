"""Expansions per second of the demo search with ``search.workers: 2`` against 1 (issue 15).

Runs the README's demo (``configs/demo.yaml``: the ``invoice`` project, scripted fixes and the
mutation agent, real pytest runs) with a fixed number of expansions and no early stop, so both
settings do the same amount of work: ``-c search.stop_on_perfect=false``, ``expansions`` as
given, no test-run limit. Each setting runs ``--repeat`` times, alternating (1, 2, 1, 2, ...) so
that a busy machine slows both alike; the figure is the median. Wall time is the whole search
(root test, worker start, final restore), measured around ``run_from_config``.

    python experiments/benchmarks/throughput_workers.py [--expansions 24] [--repeat 2] [--json FILE]

Target: ratio >= 1.7 on a 2-core machine. Also printed: test runs per second (a parallel
search chooses ahead, so its expansions are fewer no-ops and more test runs than a sequential
one's: expansions per second undercounts the work it does), and the CPU seconds per expansion
of the whole search (this process, the workers, the warm test servers, every test run and git
process: ``getrusage`` of this process and of its children, which are all waited for by the
time ``run_from_config`` returns). On a busy machine the wall-clock ratio is distorted; the CPU
seconds are not, and say what parallelism costs: with 2 cores the ratio can reach at most
``2 * cpu(1) / cpu(2)`` per expansion.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from treesearch.app import run_from_config

ROOT = Path(__file__).resolve().parents[2]
DEMO_CONFIG = ROOT / "configs" / "demo.yaml"


def demo_config(base: Path, *, workers: int, expansions: int) -> dict[str, Any]:
    """The demo's config with its paths made absolute and the budget fixed."""
    cfg = yaml.safe_load(DEMO_CONFIG.read_text())
    cfg["workspace"]["path"] = str((DEMO_CONFIG.parent / cfg["workspace"]["path"]).resolve())
    cfg["store"] = {**cfg.get("store", {}), "home": str(base / "home")}
    cfg["output"]["runs_dir"] = str(base / "runs")
    cfg["search"]["stop_on_perfect"] = False
    cfg["search"]["budget"] = {"expansions": expansions}
    cfg["search"]["workers"] = workers
    return cfg


def one_run(workers: int, expansions: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="throughput-") as tmp:
        cfg = demo_config(Path(tmp), workers=workers, expansions=expansions)
        cpu0 = _cpu_seconds()
        t0 = time.perf_counter()
        out = run_from_config(cfg, base_dir=DEMO_CONFIG.parent)
        seconds = time.perf_counter() - t0
        cpu = _cpu_seconds() - cpu0
    return {
        "expansions": out.usage.expansions,
        "test_runs": out.usage.test_runs,
        "seconds": round(seconds, 3),
        "per_second": round(out.usage.expansions / seconds, 4),
        "test_runs_per_second": round(out.usage.test_runs / seconds, 4),
        "best_score": out.best_score,
        "cpu_seconds": round(cpu, 3),
        "cpu_per_expansion": round(cpu / max(out.usage.expansions, 1), 4),
    }


def _cpu_seconds() -> float:
    """CPU seconds (user and system) of this process and of its children waited for so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def measure(expansions: int = 24, repeat: int = 2) -> dict[str, Any]:
    """Expansions per second of the demo with 1 and 2 workers, and their ratio.

    The demo's test command is ``python -m pytest``: this interpreter's folder goes first on
    ``PATH`` meanwhile, so the tests (and the mutation agent's coverage runs) use the packages
    installed with treesearch, as in an activated virtual environment."""
    runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    old_path = os.environ.get("PATH", "")
    os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), old_path])
    try:
        for _ in range(repeat):
            for workers in (1, 2):
                runs[workers].append(one_run(workers, expansions))
    finally:
        os.environ["PATH"] = old_path
    med = {w: statistics.median(r["per_second"] for r in rs) for w, rs in runs.items()}
    tests = {w: statistics.median(r["test_runs_per_second"] for r in rs) for w, rs in runs.items()}
    cpu = {w: statistics.median(r["cpu_per_expansion"] for r in rs) for w, rs in runs.items()}
    return {
        "benchmark": "demo expansions per second, search.workers 2 vs 1",
        "expansions": expansions,
        "repeat": repeat,
        "workers_1": {
            "per_second": med[1],
            "test_runs_per_second": tests[1],
            "cpu_per_expansion": cpu[1],
            "runs": runs[1],
        },
        "workers_2": {
            "per_second": med[2],
            "test_runs_per_second": tests[2],
            "cpu_per_expansion": cpu[2],
            "runs": runs[2],
        },
        "ratio": round(med[2] / med[1], 3),
        "test_runs_ratio": round(tests[2] / tests[1], 3),
        "target": 1.7,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--expansions", type=int, default=24)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", type=Path, help="also write the figures to this file")
    args = ap.parse_args(argv)
    result = measure(args.expansions, args.repeat)
    for w in (1, 2):
        r = result[f"workers_{w}"]
        secs = ", ".join(f"{x['seconds']:.1f} s" for x in r["runs"])
        print(
            f"workers={w}: {r['per_second']:.3f} expansions/s (median; runs: {secs}); "
            f"{r['cpu_per_expansion']:.3f} CPU s per expansion, "
            f"{statistics.median(x['test_runs'] for x in r['runs']):g} test runs"
        )
    print(f"ratio workers=2 / workers=1: {result['ratio']:.2f}x (target >= {result['target']}x)")
    print(
        f"test runs per second, workers=2 / workers=1: {result['test_runs_ratio']:.2f}x "
        "(the searches differ: choosing ahead finds fewer no-ops and transpositions)"
    )
    c1, c2 = result["workers_1"]["cpu_per_expansion"], result["workers_2"]["cpu_per_expansion"]
    print(
        f"CPU s per expansion, workers=2 / workers=1: {c2 / c1:.2f}x (with 2 idle cores the "
        f"wall-clock ratio can reach at most {2 * c1 / c2:.2f}x)"
    )
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
