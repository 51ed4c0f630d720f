"""Throughput of a search (issue 15): the three figures, each against its baseline in one run.

    python experiments/benchmarks/throughput.py [--json FILE] [--only workers,warm,repair]
        [--repair-entries N] [--repair-budget 100]

1. ``warm``: test runs per second, warm pytest runner vs cold runs, on the demo project's
   10-test suite and on a bug of ``experiments/bugs/`` (``throughput_warm.py``). Target >= 4x.
2. ``workers``: expansions per second of the demo search, ``search.workers: 2`` vs 1
   (``throughput_workers.py``), at 24 expansions (start-up bound: the root's serial test caps
   any parallel speed-up near 1.5x there, printed as the ceiling) and at 120 (throughput, what a
   user running hundreds of expansions gets; every cost counted, start-up included). Target
   >= 1.7x, judged at the longer budget. Beside it, measured alternating with both: two
   ``workers: 1`` searches at once, sharing nothing but the machine, against one alone (what
   the machine itself gives a second search: the ceiling of any parallel search here).
3. ``repair``: the repair benchmark (``repair.py``, the refactory corpus, the new agent, one
   search at a time so that parallelism comes from the search itself) at an equal test-run
   budget, correct fixes per wall-clock minute with all three of issue 15 vs none
   (``workers: 1``, ``warm: off``, ``order: all``). Target >= 3x. "All three" is what a user
   gets by default in a repair search: ``search.workers: 2``, ``scoring.warm: auto`` and
   ``scoring.order: auto``, which is ``progress_first`` there (the screen runs every test the
   parent failed, and the whole suite follows when one of them passes now). Strict
   ``failing_first`` (stop at the first still-failing test) is measured beside it
   (``all_three_strict``) and is not the headline: it loses fixes that need a candidate fixing
   one of several failing tests first (refactory ``q1_007``: such a candidate is stopped at a
   failing test, and its lower-bound score falls below its parent's, so the search never
   climbs through it), and a figure that trades fixes for speed is not what users get.
   Each entry is prepared once (``repair.prepare``: copy, test split, one cold test run of
   the buggy program) and then searched under every setting in turn, the order rotating from
   entry to entry (a busy machine slows all settings alike). A setting's minutes are the sum
   of its searches' wall-clock times, each measured around the search's own process (start
   of the interpreter to its exit: imports, root test, workers, warm servers, final grade);
   the preparation, the same for every setting and not part of any search, is timed apart.
   CPU seconds (the search processes and everything they waited for) are printed beside.
   Each search's seconds are split (``repair.breakdown``, from its run folder): ``start``
   (the interpreter and imports), ``root`` (up to the first expansion: the root's test run,
   the warm check, workers and warm servers starting), the expansions' ``score``, ``agent``
   (mutation and fault localisation; with the no-op expansions' share and count), ``restore``,
   ``capture`` and ``book`` (bookkeeping), each summed over the workers, and ``outside`` (the
   workspace copy and store before the search's clock, the held-out grade and the workers'
   exit after it): every second that is not a test run costs both sides alike.

Each part prints its own table; the last lines are the three ratios. A machine shared with other
work moves wall-clock ratios: read them with the load average printed beside.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
ALL_THREE = ["search.workers=2", "scoring.warm=auto", "scoring.order=auto"]
"""What a repair search gets by default with two workers (``order: auto`` is
``progress_first`` in a repair search): the headline figure."""
ALL_THREE_STRICT = ["search.workers=2", "scoring.warm=auto", "scoring.order=failing_first"]
"""The issue's literal failing-first order, measured beside (see the module docstring)."""
SETTINGS = {"none": NONE, "all_three": ALL_THREE, "all_three_strict": ALL_THREE_STRICT}
EXTRA = {"workers_warm": ["search.workers=2", "scoring.warm=auto", "scoring.order=all"]}
"""Settings measured only when asked for (``--repair-settings``): workers and warm runs with
every run a full one, to see what the order adds."""


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _entries(spec: str, corpus: Path) -> list[str]:
    """``--repair-entries``: a count (the first N entries) or comma-separated names."""
    names = sorted(p.name for p in corpus.iterdir() if (p / "conftest.py").is_file())
    if spec.isdigit():
        return names[: int(spec)]
    wanted = [e for e in spec.split(",") if e]
    unknown = [e for e in wanted if e not in names]
    if unknown:
        raise SystemExit(f"--repair-entries: not in {corpus}: {', '.join(unknown)}")
    return wanted


def _split(startup: float, b: dict[str, float]) -> str:
    """One search's time, split (``repair.breakdown``): interpreter start-up, up to the first
    expansion (root test run, workers and servers starting), then the expansions' parts."""
    if not b:
        return f"start {startup:.1f}"
    return (
        f"start {startup:.1f} root {b.get('before', 0):.1f} score {b['score']:.1f}"
        f" agent {b['agent']:.1f} (no-op {b['noop_agent']:.1f} in {int(b['noops'])} of"
        f" {int(b['expansions'])}) restore {b['restore']:.1f} capture {b['capture']:.1f}"
        f" book {b['bookkeeping']:.1f} outside {b.get('outside', 0):.1f}"
    )


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure_repair(
    entries: str | int, budget: int, settings: list[str] | None = None
) -> dict[str, Any]:
    """``repair.py``'s searches on refactory entries, every setting of ``settings`` (default:
    none, all_three, all_three_strict) per entry, interleaved; see the module docstring."""
    import repair

    known = {**SETTINGS, **EXTRA}
    labels = settings or list(SETTINGS)
    corpus = repair.CORPORA["refactory"]
    names = _entries(str(entries), corpus)
    out: dict[str, Any] = {"entries": names, "budget": budget, "settings": labels}
    old_path = os.environ.get("PATH", "")
    # The tests' `python` is this interpreter, as in a venv.
    os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), old_path])
    rows: dict[str, list[dict[str, Any]]] = {label: [] for label in labels}
    t_all = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="throughput-repair-") as tmp:
            t0 = time.perf_counter()
            prepared = {e: repair.prepare("refactory", corpus, e, Path(tmp), 0) for e in names}
            out["prepare_seconds"] = round(time.perf_counter() - t0, 1)
            for i, entry in enumerate(names):
                prep = prepared[entry]
                for label in labels[i % len(labels) :] + labels[: i % len(labels)]:
                    task = {
                        "entry": entry,
                        "path": prep.path,
                        "fix_size": prep.fix_size,
                        "per_test_timeout": prep.per_test_timeout,
                        "agent": "new",
                        "code": str(HERE.parents[1]),
                        "budget": budget,
                        "seed": 0,
                        "policy": "best_first",
                        "timeout": 10.0,
                        "overrides": known[label],
                    }
                    cpu0, w0 = _children_cpu(), time.perf_counter()
                    r = repair.run_one(task)
                    wall, cpu = time.perf_counter() - w0, _children_cpu() - cpu0
                    if r.error:
                        raise SystemExit(f"repair search {entry} ({label}) broke: {r.error}")
                    rows[label].append(
                        {
                            "entry": entry,
                            "correct": r.correct,
                            "plausible": r.plausible,
                            "test_runs": r.test_runs,
                            "fl_runs": r.fl_runs,
                            "search_seconds": round(r.seconds, 2),
                            "wall": round(wall, 2),
                            "cpu": round(cpu, 2),
                            "startup": round(wall - r.seconds, 2),
                            "breakdown": r.breakdown,
                        }
                    )
                    print(
                        f"  {entry} {label:<16} {'C' if r.correct else 'P' if r.plausible else '-'}"
                        f" {r.test_runs:>3} runs {wall:6.1f} s wall {cpu:6.1f} s CPU"
                        f" | {_split(wall - r.seconds, r.breakdown)}",
                        file=sys.stderr,
                        flush=True,
                    )
    finally:
        os.environ["PATH"] = old_path
    out["wall_seconds"] = round(time.perf_counter() - t_all, 1)
    for label in labels:
        done = rows[label]
        wall = sum(x["wall"] for x in done)
        cpu = sum(x["cpu"] for x in done)
        correct = sum(1 for x in done if x["correct"])
        out[label] = {
            "overrides": known[label],
            "searches": len(done),
            "plausible": sum(1 for x in done if x["plausible"]),
            "correct": correct,
            "test_runs": sum(x["test_runs"] for x in done),
            "fl_runs": sum(x["fl_runs"] for x in done),
            "wall_seconds": round(wall, 1),
            "cpu_seconds": round(cpu, 1),
            "correct_per_minute": round(correct / (wall / 60), 3) if wall else 0.0,
            "correct_per_cpu_minute": round(correct / (cpu / 60), 3) if cpu else 0.0,
            "startup": round(sum(x["startup"] for x in done), 1),
            "breakdown": {
                key: round(sum(x["breakdown"].get(key, 0.0) for x in done), 1)
                for key in sorted({k for x in done for k in x["breakdown"]})
            },
            "rows": done,
        }
    out["load"] = _load()
    base = out.get("none")
    for label in labels:
        if label == "none" or base is None:
            continue
        x = out[label]
        x["ratio"] = (
            round(x["correct_per_minute"] / base["correct_per_minute"], 2)
            if base["correct_per_minute"]
            else None
        )
        x["cpu_ratio"] = (
            round(x["correct_per_cpu_minute"] / base["correct_per_cpu_minute"], 2)
            if base["correct_per_cpu_minute"]
            else None
        )
    out["ratio"] = out.get("all_three", {}).get("ratio")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--only", default="warm,workers,repair")
    ap.add_argument("--warm-runs", type=int, default=10)
    ap.add_argument(
        "--expansions",
        default="24,120",
        help="the workers part's budgets, comma-separated (the target is judged on the last)",
    )
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument(
        "--repair-entries", default="8", help="a count (the first N) or comma-separated names"
    )
    ap.add_argument(
        "--repair-settings",
        default=",".join(SETTINGS),
        help=f"comma-separated, of {', '.join([*SETTINGS, *EXTRA])}",
    )
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
        budgets = [int(x) for x in args.expansions.split(",") if x]
        figures["workers"] = {}
        for i, n in enumerate(budgets):
            k = throughput_workers.measure(expansions=n, repeat=args.repeat)
            figures["workers"][str(n)] = k
            print(
                f"demo, {n} expansions: workers=1 {k['workers_1']['per_second']:.3f} "
                f"expansions/s ({k['workers_1']['cpu_seconds']} CPU s), workers=2 "
                f"{k['workers_2']['per_second']:.3f} ({k['workers_2']['cpu_seconds']} CPU s); "
                f"test runs/s ratio {k['test_runs_ratio']}",
                flush=True,
            )
            judged = " (target >= 1.7x)" if i == len(budgets) - 1 else ""
            lines.append(
                f"demo expansions per second at {n} expansions, workers=2 vs 1: {k['ratio']}x"
                f"{judged}; ceiling with the root's test serial {k['ceiling']}x; two workers=1 "
                f"searches at once vs one: {k['pair_ratio']}x (this machine's own ceiling), "
                f"workers=2 reaches {k['of_pair']:.0%} of it; both limits at once (the root's "
                f"test serial, the rest at the pair's ratio): {k['machine_ceiling']}x"
            )
    if "repair" in parts:
        chosen = [x for x in args.repair_settings.split(",") if x]
        bad = [x for x in chosen if x not in SETTINGS and x not in EXTRA]
        if bad:
            known = ", ".join([*SETTINGS, *EXTRA])
            ap.error(f"--repair-settings: unknown {', '.join(bad)}; known: {known}")
        r = measure_repair(args.repair_entries, args.repair_budget, chosen)
        figures["repair"] = r
        print(
            f"repair: {len(r['entries'])} refactory entries, {r['budget']} test runs each; "
            f"preparation {r['prepare_seconds']} s (not counted), whole part {r['wall_seconds']} s",
            flush=True,
        )
        for label in chosen:
            x = r[label]
            print(
                f"repair {label:<16}: {x['correct']} correct, {x['plausible']} plausible of "
                f"{x['searches']} in {x['wall_seconds']} s wall, {x['cpu_seconds']} s CPU, "
                f"{x['test_runs']} test runs, {x['fl_runs']} localisation runs",
                flush=True,
            )
            print(f"  {'':<16}  time: {_split(x['startup'], x['breakdown'])}", flush=True)
        for label in chosen:
            if label == "none" or "none" not in chosen:
                continue
            x, base = r[label], r["none"]
            tag = {
                "all_three": "all three",
                "all_three_strict": "all three, strict failing_first",
            }.get(label, label)
            lines.append(
                f"repair, correct fixes per minute at {r['budget']} test runs, {tag} vs none: "
                f"{x['correct_per_minute']} vs {base['correct_per_minute']} = {x['ratio']}x "
                f"(per CPU minute {x['cpu_ratio']}x)"
                + (" (target >= 3x)" if label == "all_three" else "")
            )
    figures["load_at_end"] = _load()
    print(f"\nload average at start {figures['load_at_start']}, at end {figures['load_at_end']}")
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
