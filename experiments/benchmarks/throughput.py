"""Throughput of a search (issue 15): the three figures, each against its baseline in one run.

    python experiments/benchmarks/throughput.py [--json FILE] [--only workers,warm,repair]
        [--repair-entries N] [--repair-budget 100]

1. ``warm``: test runs per second, warm pytest runner vs cold runs, on the demo project's
   10-test suite and on a bug of ``experiments/bugs/`` (``throughput_warm.py``). Target >= 4x.
2. ``workers``: expansions per second of the demo search, ``search.workers: 2`` vs 1
   (``throughput_workers.py``). Target >= 1.7x.
3. ``repair``: the repair benchmark (``repair.py``, the refactory corpus, the new agent, one
   search at a time so that parallelism comes from the search itself) at an equal test-run
   budget, correct fixes per wall-clock minute with all three of issue 15 (``search.workers: 2``,
   ``scoring.warm: auto``, ``scoring.order: failing_first``) vs none (``workers: 1``,
   ``warm: off``, ``order: all``), one after the other on the same entries. Target >= 3x.

Each part prints its own table; the last lines are the three ratios. A machine shared with other
work moves wall-clock ratios: read them with the load average printed beside.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import throughput_warm  # noqa: E402
import throughput_workers  # noqa: E402

NONE = ["search.workers=1", "scoring.warm=off", "scoring.order=all"]
ALL_THREE = ["search.workers=2", "scoring.warm=auto", "scoring.order=failing_first"]


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def measure_repair(entries: int, budget: int) -> dict[str, Any]:
    """``repair.py`` on the first ``entries`` refactory entries, none vs all three."""
    corpus = HERE.parents[1].parent / "shared" / "corpora" / "refactory"
    names = sorted(p.name for p in corpus.iterdir() if (p / "conftest.py").is_file())[:entries]
    out: dict[str, Any] = {"entries": names, "budget": budget}
    with tempfile.TemporaryDirectory(prefix="throughput-repair-") as tmp:
        for label, overrides in (("none", NONE), ("all_three", ALL_THREE)):
            dest = Path(tmp) / f"{label}.json"
            cmd = [
                sys.executable,
                str(HERE / "repair.py"),
                "--corpus",
                "refactory",
                "--agents",
                "new",
                "--budgets",
                str(budget),
                "--jobs",
                "1",
                "--entries",
                ",".join(names),
                "--json",
                str(dest),
            ]
            for o in overrides:
                cmd += ["-c", o]
            env = dict(os.environ)  # the tests' `python` is this interpreter, as in a venv
            env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
            wall = time.perf_counter() - t0
            if proc.returncode != 0 or not dest.is_file():
                raise SystemExit(f"repair.py ({label}) failed:\n{proc.stderr[-3000:]}")
            data = json.loads(dest.read_text())
            rows = data["results"]
            errors = [r for r in rows if r.get("error")]
            if errors:
                raise SystemExit(f"repair.py ({label}): {len(errors)} searches broke: {errors[0]}")
            correct = sum(1 for r in rows if r["correct"])
            out[label] = {
                "overrides": overrides,
                "searches": len(rows),
                "plausible": sum(1 for r in rows if r["plausible"]),
                "correct": correct,
                "test_runs": sum(r["test_runs"] for r in rows),
                "wall_seconds": round(wall, 1),
                "correct_per_minute": round(correct / (wall / 60), 3),
                "load": _load(),
            }
    none, three = out["none"], out["all_three"]
    out["ratio"] = (
        round(three["correct_per_minute"] / none["correct_per_minute"], 2)
        if none["correct_per_minute"]
        else None
    )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--only", default="warm,workers,repair")
    ap.add_argument("--warm-runs", type=int, default=10)
    ap.add_argument("--expansions", type=int, default=24)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--repair-entries", type=int, default=8)
    ap.add_argument("--repair-budget", type=int, default=100)
    ap.add_argument("--json", type=Path, metavar="FILE", help="also write the figures here")
    args = ap.parse_args(argv)
    parts = [p for p in args.only.split(",") if p]
    figures: dict[str, Any] = {"load_at_start": _load()}
    lines = []
    if "warm" in parts:
        w = throughput_warm.measure(runs=args.warm_runs)
        figures["warm"] = w
        print(throughput_warm.report(w), flush=True)
        for row in w["warm_vs_cold"]:
            lines.append(
                f"warm vs cold test runs per second, {row['suite']}: {row['ratio']:.2f}x "
                "(target >= 4x)"
            )
    if "workers" in parts:
        k = throughput_workers.measure(expansions=args.expansions, repeat=args.repeat)
        figures["workers"] = k
        print(
            f"demo: workers=1 {k['workers_1']['per_second']:.3f} expansions/s, workers=2 "
            f"{k['workers_2']['per_second']:.3f}; test runs/s ratio {k['test_runs_ratio']}",
            flush=True,
        )
        lines.append(f"demo expansions per second, workers=2 vs 1: {k['ratio']}x (target >= 1.7x)")
    if "repair" in parts:
        r = measure_repair(args.repair_entries, args.repair_budget)
        figures["repair"] = r
        for label in ("none", "all_three"):
            x = r[label]
            print(
                f"repair {label:<9}: {x['correct']} correct, {x['plausible']} plausible of "
                f"{x['searches']} in {x['wall_seconds']} s, {x['test_runs']} test runs "
                f"(load {x['load']})",
                flush=True,
            )
        lines.append(
            f"repair, correct fixes per minute at {r['budget']} test runs, all three vs none: "
            f"{r['all_three']['correct_per_minute']} vs {r['none']['correct_per_minute']} "
            f"= {r['ratio']}x (target >= 3x)"
        )
    figures["load_at_end"] = _load()
    print(f"\nload average at start {figures['load_at_start']}, at end {figures['load_at_end']}")
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
