"""The search controller's own cost per expansion, against a test run of known length.

Builds the demo project padded with N generated files (default 10,000), scores it with a "test
suite" that takes a fixed time (default 1 s) and exits 0 or 1 depending on the files, and runs a
breadth-first search over scripted strategies that each write two files (two session steps).

Two accountings of each expansion, side by side (medians over the expansions):

- old: the controller's own ``Timing`` (restore + final capture + bookkeeping). It bills the
  session's store work (a capture before and after each step, the diff of each step, the capture
  that starts the session) to the agent, and leaves some of it out of every field;
- honest: every store operation of the expansion (each public ``ShadowStore`` call, timed by
  wrapping it here, nested calls counted once) plus the rest of the machinery (event log, graph,
  transcripts, session log): the expansion's wall time minus the test run and minus the agent's
  own work, which for a scripted agent is the tool calls themselves (writing the files).

    python experiments/benchmarks/search_overhead.py [--files 10000] [--test-seconds 1.0]
    python experiments/benchmarks/search_overhead.py --baseline OLD_CHECKOUT [--rounds 2]

``--baseline`` runs the same search with the code of another checkout too (make one with
``git archive main | tar -x -C /tmp/main``), alternating, and prints old and new side by side.

Target (issues 5 and 13): overhead under 5% of a 1-second test run, counted honestly.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import inspect
import io
import json
import os
import pstats
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import treesearch.search.controller as controller_module
from treesearch import session as session_module
from treesearch.app import run_from_config
from treesearch.search.controller import Controller
from treesearch.store import ShadowStore

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "experiments" / "demo" / "project"


def pad(workspace: Path, n: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    for i in range(n):
        d = workspace / "assets" / f"group{i // 40:04d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"item{i:05d}.txt").write_text(f"asset {i}\n" + "x" * rng.randint(50, 2000) + "\n")


@dataclass
class Expansion:
    """What one expansion spent, as the meter saw it (seconds)."""

    wall: float = 0.0
    store: dict[str, float] = field(default_factory=dict)
    """Per ``phase:method``: phase ``session`` inside the agent's run, ``controller`` outside."""
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds of the store operations per ``phase:method``: this process's and its git
    processes' (a figure that other load on the machine changes less than wall time)."""
    calls: int = 0
    tools: float = 0.0
    """The agent's own work: the tool calls (for the scripted agent, writing the files)."""

    @property
    def store_total(self) -> float:
        return sum(self.store.values())

    @property
    def store_cpu(self) -> float:
        return sum(self.cpu.values())


class StoreMeter:
    """Times every store call, the agent's tool calls and the whole of each expansion.

    Wraps (for the duration of ``installed``) every public method of ``ShadowStore``,
    ``Controller.expand``, the controller's ``run_agent`` and the session's built-in tools (the
    agent's own work). A store call made by another store call is counted once, in the outer one.
    """

    def __init__(self, profile: bool = False) -> None:
        self.profiles: dict[str, cProfile.Profile] | None = {} if profile else None
        """Per ``phase:method``: a profile of every call (``--profile``)."""
        self.expansions: list[Expansion] = []
        self.current: Expansion | None = None
        self.depth = 0
        self.phase = "controller"

    def _store_method(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)  # keeps the signature, which the session reads (``if_changed``)
        def wrapped(*a: Any, **kw: Any) -> Any:
            if self.depth or self.current is None:
                return fn(*a, **kw)
            self.depth += 1
            key = f"{self.phase}:{name}"
            prof = None
            if self.profiles is not None:
                prof = self.profiles.setdefault(key, cProfile.Profile())
                prof.enable()
            c0 = _cpu()
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                if prof is not None:
                    prof.disable()
                self.depth -= 1
                cur = self.current
                cur.store[key] = cur.store.get(key, 0.0) + time.perf_counter() - t0
                cur.cpu[key] = cur.cpu.get(key, 0.0) + _cpu() - c0
                cur.calls += 1

        return wrapped

    def _expand(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*a: Any, **kw: Any) -> Any:
            self.current = seen = Expansion()
            t0 = time.perf_counter()
            try:
                result = fn(*a, **kw)
            finally:
                self.current = None
            seen.wall = time.perf_counter() - t0
            self.expansions.append(seen)  # only expansions that end (and so have a Timing)
            return result

        return wrapped

    def _run_agent(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*a: Any, **kw: Any) -> Any:
            self.phase = "session"
            try:
                return fn(*a, **kw)
            finally:
                self.phase = "controller"

        return wrapped

    def _tool(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                if self.current is not None:
                    self.current.tools += time.perf_counter() - t0

        return wrapped

    @contextmanager
    def installed(self) -> Iterator[None]:
        patches: list[tuple[Any, str, Any]] = [
            (Controller, "expand", self._expand(Controller.expand)),
            (controller_module, "run_agent", self._run_agent(controller_module.run_agent)),
        ]
        # The tools themselves (write_file, ...): the agent's own work. The table is a dict every
        # step copies, so its entries are replaced in place.
        tools = session_module.BUILTIN_TOOLS
        patches += [(tools, name, self._tool(fn)) for name, fn in tools.items()]
        for name, value in list(vars(ShadowStore).items()):
            if not name.startswith("_") and inspect.isfunction(value):
                patches.append((ShadowStore, name, self._store_method(name, value)))
        saved = [(obj, name, _get(obj, name)) for obj, name, _ in patches]
        try:
            for obj, name, value in patches:
                _set(obj, name, value)
            yield
        finally:
            for obj, name, value in saved:
                _set(obj, name, value)


def _cpu() -> float:
    """CPU seconds used so far by this process, its waited-for children (git) and its live
    ``git`` children (the store's long-lived ``cat-file --batch``: never waited for until the
    store closes, so ``RUSAGE_CHILDREN`` would leave its work out)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime + _live_git_cpu()


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _live_git_cpu() -> float:
    """CPU seconds of this process's live ``git`` children (from ``/proc``; 0 elsewhere)."""
    total = 0
    try:
        with open(f"/proc/self/task/{os.getpid()}/children") as fh:
            pids = fh.read().split()
    except OSError:
        return 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        if comm == "git":
            fields = stat[stat.rindex(")") + 2 :].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return total / _TICK


def _get(obj: Any, name: str) -> Any:
    return obj[name] if isinstance(obj, dict) else getattr(obj, name)


def _set(obj: Any, name: str, value: Any) -> None:
    if isinstance(obj, dict):
        obj[name] = value
    else:
        setattr(obj, name, value)


def report(timings: list[Any], seen: list[Expansion], test_seconds: float) -> str:
    """Both accountings side by side, in medians over the expansions (ms)."""

    def med(xs: Iterator[float] | list[float]) -> float:
        return statistics.median(list(xs)) * 1000

    scored = [t.score for t in timings if t.score > 0]
    test_run = statistics.median(scored) if scored else test_seconds
    pairs = list(zip(timings, seen, strict=True))
    old = med(t.overhead for t in timings)
    honest = med(e.wall - t.score - e.tools for t, e in pairs)
    store = med(e.store_total for e in seen)
    keys = sorted({k for e in seen for k in e.store})
    calls = statistics.median(e.calls for e in seen)
    rows: list[tuple[str, float | None]] = [
        ("old accounting (the controller's Timing)", None),
        ("  restore", med(t.restore for t in timings)),
        ("  capture (the child)", med(t.capture for t in timings)),
        ("  bookkeeping (events, graph, diffs)", med(t.bookkeeping for t in timings)),
        ("  agent (session store work included)", med(t.agent for t in timings)),
        ("  overhead = restore + capture + bookkeeping", old),
        ("", None),
        ("honest accounting (every store operation is overhead)", None),
        ("  expansion wall time", med(e.wall for e in seen)),
        ("  test run (score)", med(t.score for t in timings)),
        ("  agent's own work (its tool calls)", med(e.tools for e in seen)),
        (f"  store operations, all ({calls:.0f} calls)", store),
        *((f"    {k}", med(e.store.get(k, 0.0) for e in seen)) for k in keys),
        ("  store operations, CPU time (incl. git)", med(e.store_cpu for e in seen)),
        *((f"    {k}", med(e.cpu.get(k, 0.0) for e in seen)) for k in keys),
        (
            "  other machinery (logs, graph, transcripts)",
            med(e.wall - t.score - e.tools - e.store_total for t, e in pairs),
        ),
        ("  overhead = wall - test run - agent's own work", honest),
        (
            "  same, mean (a pack every few expansions counts)",
            statistics.mean(e.wall - t.score - e.tools for t, e in pairs) * 1000,
        ),
        ("", None),
        ("test run (median of the scored expansions)", test_run * 1000),
    ]
    lines = [f"{label:<52}{'' if v is None else f'{v:9.1f}'}".rstrip() for label, v in rows]
    lines[0] += " median ms"
    for name, value in (("old", old), ("honest", honest)):
        share = value / 1000 / test_run
        verdict = "PASS" if share < 0.05 else "FAIL"
        lines.append(
            f"overhead / test run, {name:<6} = {share:6.1%}   target < 5%: {verdict}"
            f"   ({value:.0f} ms / {test_run * 1000:.0f} ms)"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=10_000, help="generated files added (10000)")
    ap.add_argument("--test-seconds", type=float, default=1.0, help="test run length (1.0)")
    ap.add_argument("--expansions", type=int, default=16)
    ap.add_argument(
        "--profile", action="store_true", help="profile each kind of store call (cProfile)"
    )
    ap.add_argument(
        "--baseline",
        type=Path,
        help="a checkout of other code (e.g. `git archive main`): run the search with it and "
        "with this checkout, alternately, and print their figures side by side",
    )
    ap.add_argument("--rounds", type=int, default=2, help="searches per side with --baseline")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = ap.parse_args()
    if args.baseline is not None:
        return side_by_side(args)

    tmp = Path(tempfile.mkdtemp(prefix="ts-overhead-"))
    try:
        ws = tmp / "project"
        shutil.copytree(DEMO, ws)
        pad(ws, args.files)
        # A "test suite" of known length: sleeps, then passes when the parse bug is fixed.
        (ws / "known_length_test.py").write_text(
            "import sys, time\n"
            f"time.sleep({args.test_seconds})\n"
            "src = open('invoice/parse.py').read()\n"
            "sys.exit(0 if 'splitlines()[1:]' not in src else 1)\n"
        )
        strategies = {}
        for i in range(8):
            strategies[f"touch-{i}"] = {
                "kind": "scripted",
                "steps": [
                    {"write": f"notes/note{i}.txt", "content": f"note {i}\n"},
                    {
                        "write": f"assets/group{i:04d}/item{i * 40:05d}.txt",
                        "content": f"edited {i}\n",
                    },
                ],
            }
        cfg = {
            "workspace": {"path": str(ws)},
            "store": {"home": str(tmp / "home")},
            "strategies": strategies,
            "scoring": {
                "search_tests": {
                    "command": f"{sys.executable} known_length_test.py",
                    "timeout": 60,
                },
                "score": "resolved",
            },
            "search": {
                "policy": "bfs",
                "seed": 0,
                "stop_on_perfect": False,
                "budget": {"expansions": args.expansions},
            },
            "output": {"runs_dir": str(tmp / "runs")},
        }
        meter = StoreMeter(profile=args.profile)
        t0 = time.perf_counter()
        with meter.installed():
            out = run_from_config(cfg, base_dir=tmp)
        total = time.perf_counter() - t0
        timings = out_timings(out)
        if len(meter.expansions) != len(timings):
            raise SystemExit("the meter saw a different number of expansions than the search")
        if args.json:
            print(json.dumps(figures(timings, meter.expansions)))
            return 0
        files = sum(1 for _ in ws.rglob("*") if _.is_file())
        print(f"workspace: {files} files; {len(timings)} expansions; whole search {total:.1f}s")
        print(report(timings, meter.expansions, args.test_seconds))
        for key, prof in sorted((meter.profiles or {}).items()):
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(25)
            print(f"\n==== profile of {key} (all calls) ====\n{buf.getvalue()}")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def figures(timings: list[Any], seen: list[Expansion]) -> dict[str, float]:
    """The honest accounting's medians (ms), for ``--json``."""

    def med(xs: Iterator[float] | list[float]) -> float:
        return statistics.median(list(xs)) * 1000

    pairs = list(zip(timings, seen, strict=True))
    keys = sorted({k for e in seen for k in e.store})
    out = {
        "test run": med(t.score for t in timings),
        "overhead": med(e.wall - t.score - e.tools for t, e in pairs),
        "overhead, mean": statistics.mean(e.wall - t.score - e.tools for t, e in pairs) * 1000,
        "store CPU, mean": statistics.mean(e.store_cpu for e in seen) * 1000,
        "store operations": med(e.store_total for e in seen),
        "store CPU (incl. git)": med(e.store_cpu for e in seen),
    }
    out.update({k: med(e.store.get(k, 0.0) for e in seen) for k in keys})
    out.update({f"{k} CPU": med(e.cpu.get(k, 0.0) for e in seen) for k in keys})
    return out


def side_by_side(args: argparse.Namespace) -> int:
    """Run the search ``--rounds`` times with each checkout, alternating (old, new, new, old,
    ...), and print the medians over the rounds side by side."""
    sides = {"old": args.baseline.resolve(), "new": ROOT}
    runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for r in range(args.rounds):
        for side in ("old", "new") if r % 2 == 0 else ("new", "old"):
            cmd = [sys.executable, str(Path(__file__).resolve()), "--json"]
            cmd += ["--files", str(args.files), "--test-seconds", str(args.test_seconds)]
            cmd += ["--expansions", str(args.expansions)]
            env = dict(os.environ, PYTHONPATH=str(sides[side]))
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(done.stderr, file=sys.stderr)
                raise SystemExit(f"the {side} search failed (exit {done.returncode})")
            runs[side].append(json.loads(done.stdout.strip().splitlines()[-1]))
    keys = list(dict.fromkeys(k for side in runs.values() for run in side for k in run))
    print(f"old: {sides['old']}\nnew: {sides['new']}")
    print(f"{args.rounds} searches each, alternating; medians over them of per-expansion medians")
    print(f"{'median ms':<40}{'old':>9}{'new':>9}")
    for k in keys:
        old, new = (statistics.median(r.get(k, 0.0) for r in runs[s]) for s in ("old", "new"))
        print(f"{k:<40}{old:9.1f}{new:9.1f}")
    for side in ("old", "new"):
        over = statistics.median(r["overhead"] for r in runs[side])
        test = statistics.median(r["test run"] for r in runs[side])
        verdict = "PASS" if over / test < 0.05 else "FAIL"
        print(
            f"overhead / test run, honest, {side} = {over / test:6.1%}   target < 5%: {verdict}"
            f"   ({over:.0f} ms / {test:.0f} ms)"
        )
    for side in ("old", "new"):
        mean = statistics.median(r.get("overhead, mean", 0.0) for r in runs[side])
        test = statistics.median(r["test run"] for r in runs[side])
        print(f"  (mean over expansions, packing included, {side} = {mean / test:6.1%})")
    return 0


def out_timings(out: object) -> list:
    timings = getattr(out, "timings", None)
    if not timings:
        raise SystemExit("the search recorded no expansion timings")
    return list(timings)


if __name__ == "__main__":
    raise SystemExit(main())
