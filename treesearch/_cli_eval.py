"""The ``eval`` command of the CLI. Part of the CLI (with ``treesearch.cli``, which registers
every group): one of the modules that may print, read environment variables or exit."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from treesearch._cli_search import _sigterm_as_interrupt
from treesearch.cli import _emit_json


def _eval_event(event: dict[str, Any]) -> None:
    from treesearch.eval.report import event_line

    line = event_line(event)
    if line is not None:
        print(line, file=sys.stderr, flush=True)


def _cmd_eval(args: argparse.Namespace) -> int:
    from treesearch.eval import run_eval

    if args.resume is not None:
        if args.config is not None or args.instances is not None or args.override:
            print(
                "treesearch eval: error: --resume DIR takes no CONFIG, --instances or -c",
                file=sys.stderr,
            )
            return 2
    elif args.config is None or args.instances is None:
        print(
            "treesearch eval: error: give CONFIG and --instances FILE (or --resume DIR)",
            file=sys.stderr,
        )
        return 2
    if args.workers is not None and args.workers < 1:
        print("treesearch eval: error: --workers must be at least 1", file=sys.stderr)
        return 2
    _sigterm_as_interrupt()
    out = run_eval(
        args.config,
        args.instances,
        repos=args.repos,
        out=args.out,
        workers=args.workers,
        executor=args.executor or "local",
        ray_address=args.ray_address,
        overrides=args.override,
        resume=args.resume,
        on_event=None if args.quiet else _eval_event,
        durations_from=args.durations_from,
    )
    if args.json:
        _emit_json(out.summary)
    else:
        from treesearch.eval.report import summary_lines

        print("\n".join(summary_lines(out)))
    return 130 if out.interrupted and out.summary["not_run"] else 0


def add_eval(sub: Any) -> None:
    p = sub.add_parser(
        "eval",
        help="run one search per instance of a SWE-bench-style instance set",
        description="Run one search per instance (SWE-bench JSON/JSONL) on a local process pool "
        "or on Ray; write predictions.jsonl, results.jsonl and summary.json into an eval "
        "directory. `treesearch eval --resume DIR` continues an interrupted batch.",
    )
    p.add_argument("config", nargs="?", help="search config without a workspace")
    p.add_argument("--instances", metavar="FILE", help="instances file (SWE-bench JSON or JSONL)")
    p.add_argument(
        "--repos",
        metavar="DIR",
        help="folder of local repositories: owner__name or owner/name[.git]",
    )
    p.add_argument(
        "--out", metavar="DIR", help="eval directory to create (default: evals/eval-<time>)"
    )
    p.add_argument(
        "--workers", type=int, metavar="N", help="parallel instances (default: the CPU count)"
    )
    p.add_argument("--executor", choices=("local", "ray"), help="local process pool or Ray")
    p.add_argument(
        "--ray-address", metavar="ADDR", help="join this Ray cluster (default: start a local Ray)"
    )
    p.add_argument("--resume", metavar="DIR", help="continue the batch of an eval directory")
    p.add_argument(
        "--durations-from",
        metavar="DIR",
        help="an earlier eval of these instances (its directory or results.jsonl): start them "
        "longest first by the seconds it recorded, so that no long one starts last",
    )
    p.add_argument(
        "-c",
        dest="override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. -c search.budget.test_runs=10 (repeatable)",
    )
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    p.add_argument("--json", action="store_true", help="print summary.json at the end")
    p.set_defaults(handler=_cmd_eval)
