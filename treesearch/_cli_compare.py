"""The ``compare`` command of the CLI. Part of the CLI (with ``treesearch.cli``, which registers
every group): one of the modules that may print, read environment variables or exit."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from treesearch._cli_common import _emit_json
from treesearch._cli_search import _sigterm_as_interrupt


def compare_event_line(event: dict[str, Any]) -> str | None:
    """One progress line for a compare event (eval events carry their cell)."""
    from treesearch.eval.report import event_line

    kind = event["event"]
    if kind == "compare_started":
        done = event["finished_cells"]
        return (
            f"compare {event['out']}: {len(event['contenders'])} contenders x "
            f"{event['instances']} instances x {len(event['seeds'])} seed(s) = {event['cells']} "
            f"eval batches" + (f", {done} already finished" if done else "")
        )
    if kind == "compare_finished":
        return None
    cell = f"[{event['contender']} seed {event['seed']} ({event['cell']}/{event['cells']})]"
    if kind == "cell_skipped":
        return f"{cell} already finished: not run again"
    if kind == "cell_started":
        return f"{cell} " + ("resuming its eval batch" if event["resume"] else "starting")
    line = event_line(event)
    return None if line is None else f"{cell} {line}"


def _compare_event(event: dict[str, Any]) -> None:
    line = compare_event_line(event)
    if line is not None:
        print(line, file=sys.stderr, flush=True)


def _cmd_compare(args: argparse.Namespace) -> int:
    from treesearch.compare import resume_compare, run_compare
    from treesearch.compare.outputs import table_lines

    if (args.resume is None) == (args.spec is None):
        print(
            "treesearch compare: error: give SPEC.yaml, or --resume DIR (not both)",
            file=sys.stderr,
        )
        return 2
    if args.workers is not None and args.workers < 1:
        print("treesearch compare: error: --workers must be at least 1", file=sys.stderr)
        return 2
    _sigterm_as_interrupt()
    on_event = None if args.quiet else _compare_event
    if args.resume is not None:
        outcome = resume_compare(
            args.resume,
            workers=args.workers,
            executor=args.executor,
            ray_address=args.ray_address,
            on_event=on_event,
        )
    else:
        outcome = run_compare(
            args.spec,
            out=args.out,
            workers=args.workers,
            executor=args.executor or "local",
            ray_address=args.ray_address,
            on_event=on_event,
        )
    if args.json:
        _emit_json(outcome.data)
    else:
        print("\n".join(table_lines(outcome.data, outcome.out)))
    return 130 if outcome.interrupted else 0


def add_compare(sub: Any) -> None:
    p = sub.add_parser(
        "compare",
        help="compare contenders (configs + overrides) on one instance set at one budget",
        description="Run every contender of SPEC.yaml over its instance set at each seed (one "
        "`treesearch eval` batch per contender and seed, on a local pool or on Ray) and write "
        "compare.json and compare.csv: resolved and plausible rates with 95%% bootstrap "
        "intervals, cost to the first plausible patch, paired wins/losses/ties with exact "
        "p-values, anytime curves. `treesearch compare --resume DIR` continues a comparison.",
    )
    p.add_argument("spec", nargs="?", metavar="SPEC.yaml", help="the comparison to run")
    p.add_argument(
        "--out",
        metavar="DIR",
        help="compare directory to create (default: compares/compare-<time>)",
    )
    p.add_argument(
        "--workers", type=int, metavar="N", help="parallel instances (default: the CPU count)"
    )
    p.add_argument("--executor", choices=("local", "ray"), help="local process pool or Ray")
    p.add_argument(
        "--ray-address", metavar="ADDR", help="join this Ray cluster (default: start a local Ray)"
    )
    p.add_argument("--resume", metavar="DIR", help="continue the comparison in a compare directory")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    p.add_argument("--json", action="store_true", help="print compare.json at the end")
    p.set_defaults(handler=_cmd_compare, config_usage=True)
