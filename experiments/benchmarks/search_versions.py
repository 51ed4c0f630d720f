"""A search's wall time with two or more versions of treesearch, interleaved, in one run.

    python experiments/benchmarks/search_versions.py --treesearch-path OLD --treesearch-path NEW
        [--config configs/demo.yaml] [--rounds 8] [--json FILE] [-c KEY=VALUE ...]

Each search is a fresh ``python -m treesearch run CONFIG`` (the README demo by default) in its own
process: ``PYTHONPATH`` = the version's folder (a checkout, or ``git archive REV | tar -x``), the
working folder a scratch one (``python -m`` would import a checkout found there first), a fresh
``TREESEARCH_HOME``. Its wall time is timed around the process (start-up, imports, root test,
search, final restore), with the CPU seconds of the process and its children beside it. The
versions run in turn within each round, the first of a round rotating, so a busy machine slows
all alike; every search of a config must find the same best tree with the same test runs (else
the versions do not run the same search and the line says so). Printed: the medians, the ratio
of each version's median to the first version's, and the median of the per-round ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_once(code: Path, config: Path, overrides: list[str], scratch: Path) -> dict[str, Any]:
    """One search with the treesearch of ``code``: wall and CPU seconds, and what it found."""
    home = scratch / "home"
    shutil.rmtree(home, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=str(code), TREESEARCH_HOME=str(home))
    cmd = [sys.executable, "-m", "treesearch", "run", str(config), "--runs-dir", str(home / "runs")]
    cmd += [*(a for o in overrides for a in ("-c", o)), "-q", "--no-patch", "--json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    shutil.rmtree(home, ignore_errors=True)
    try:
        summary = json.loads(proc.stdout[proc.stdout.index("{") :])
    except ValueError:
        summary = {}
    best = summary.get("best")
    return {
        "wall": wall,
        "cpu": cpu,
        "exit": proc.returncode,
        "best": best.get("tree") if isinstance(best, dict) else best,
        "test_runs": (summary.get("usage") or {}).get("test_runs"),
        "load": os.getloadavg()[0],
        **({"stderr": proc.stderr[-2000:]} if proc.returncode else {}),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--treesearch-path", action="append", type=Path, required=True)
    ap.add_argument("--config", type=Path, default=None, help="default: each version's demo")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("-c", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--json", type=Path, help="also write every search's figures here")
    args = ap.parse_args()
    versions = [p.resolve() for p in args.treesearch_path]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ts-versions-") as tmp:
        scratch = Path(tmp)
        for r in range(args.rounds):
            turn = r % len(versions)
            for code in versions[turn:] + versions[:turn]:
                config = args.config or code / "configs" / "demo.yaml"
                row = {"round": r, "version": str(code)}
                row.update(run_once(code, config.resolve(), args.overrides, scratch))
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    first = str(versions[0])
    walls = {str(v): [x["wall"] for x in rows if x["version"] == str(v)] for v in versions}
    cpus = {str(v): [x["cpu"] for x in rows if x["version"] == str(v)] for v in versions}
    failed = [x for x in rows if x["exit"] or x["best"] is None]
    if failed:
        print(
            f"FAIL: {len(failed)} of {len(rows)} searches failed (exit or no best tree); the"
            f" first: {failed[0]['version']} exit {failed[0]['exit']}:"
            f" {failed[0].get('stderr', '').strip()}",
            file=sys.stderr,
        )
    same = not failed and len({(x["best"], x["test_runs"]) for x in rows}) == 1
    print(f"same search in every run (best tree, test runs): {'yes' if same else 'NO'}")
    for v in map(str, versions):
        wall, cpu = statistics.median(walls[v]), statistics.median(cpus[v])
        paired = [b / a for a, b in zip(walls[first], walls[v], strict=True)]
        print(
            f"{v}: wall {wall:.2f} s (x{wall / statistics.median(walls[first]):.3f}, per round"
            f" x{statistics.median(paired):.3f}), CPU {cpu:.2f} s"
            f" (x{cpu / statistics.median(cpus[first]):.3f})"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
