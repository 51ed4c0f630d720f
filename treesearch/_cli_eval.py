"""The ``eval`` command of the CLI. Part of the CLI (with ``treesearch.cli``, which registers
every group): one of the modules that may print, read environment variables or exit."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from treesearch._cli_common import _emit_json
from treesearch._cli_search import _sigterm_as_interrupt


def _eval_event(event: dict[str, Any]) -> None:
    from treesearch.eval.report import event_line

    line = event_line(event)
    if line is not None:
        print(line, file=sys.stderr, flush=True)


def _cmd_eval(args: argparse.Namespace) -> int:
    mode = "gold" if args.gold else "empty" if args.empty else "search"
    if args.resume is not None:
        if (
            args.config is not None
            or args.instances is not None
            or args.override
            or mode != "search"
            or args.setup is not None
        ):
            return _usage(
                "eval",
                "--resume DIR takes no CONFIG, --instances, -c, --setup, --gold or --empty "
                "(the eval directory has them)",
            )
    elif args.instances is None or (args.config is None and mode == "search"):
        return _usage(
            "eval",
            "give CONFIG and --instances FILE (or --resume DIR; --gold and --empty need "
            "--instances only)",
        )
    return _run(args, "eval", args.config, mode, None, args.durations_from)


def _cmd_grade(args: argparse.Namespace) -> int:
    if args.resume is not None:
        if args.predictions is not None or args.instances is not None or args.setup:
            return _usage(
                "grade",
                "--resume DIR takes no PREDICTIONS, --instances or --setup (the grade directory "
                "has them)",
            )
    elif args.predictions is None or args.instances is None:
        return _usage("grade", "give PREDICTIONS and --instances FILE (or --resume DIR)")
    mode = "predictions" if args.resume is None else "search"  # a resume reads its own
    return _run(args, "grade", None, mode, args.predictions, None)


def _usage(command: str, text: str) -> int:
    print(f"treesearch {command}: error: {text}", file=sys.stderr)
    return 2


def _run(
    args: argparse.Namespace,
    command: str,
    config: str | None,
    mode: str,
    predictions: str | None,
    durations_from: str | None,
) -> int:
    """Run the batch of ``eval`` or ``grade``, then print its table (or summary.json). Exit
    status: 130 interrupted with instances not run, 1 when any instance is an ``error`` row
    (said on stderr), 2 bad arguments, else 0."""
    from treesearch.eval import run_eval
    from treesearch.eval.report import summary_lines

    if args.workers is not None and args.workers < 1:
        return _usage(command, "--workers must be at least 1")
    _sigterm_as_interrupt()
    out = run_eval(
        config,
        args.instances,
        repos=args.repos,
        out=args.out,
        workers=args.workers,
        executor=args.executor or "local",
        ray_address=args.ray_address,
        overrides=args.override,
        resume=args.resume,
        on_event=None if args.quiet else _eval_event,
        durations_from=durations_from,
        mode=mode,
        setup=args.setup,
        predictions=predictions,
    )
    if args.json:
        _emit_json(out.summary)
    else:
        print("\n".join(summary_lines(out)))
    if out.interrupted and out.summary["not_run"]:
        return 130
    errors = [r for r in out.rows if r["status"] == "error"]
    if errors:
        print(
            f"treesearch: {len(errors)} instance(s) ended in an error, not a grade "
            f"(first: {errors[0]['instance_id']}: {errors[0]['reason']})",
            file=sys.stderr,
        )
        return 1
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--instances", metavar="FILE", help="instances file (SWE-bench JSON or JSONL)")
    p.add_argument(
        "--repos",
        metavar="DIR",
        help="folder of local repositories: owner__name or owner/name[.git]",
    )
    p.add_argument(
        "--setup",
        metavar="FILE",
        help="set-up table (YAML, per repository and version: packages, pre-install and "
        "install steps, shims, test command) for instances without set-up of their own; "
        "overrides eval.setup",
    )
    p.add_argument(
        "--workers", type=int, metavar="N", help="parallel instances (default: the CPU count)"
    )
    p.add_argument("--executor", choices=("local", "ray"), help="local process pool or Ray")
    p.add_argument(
        "--ray-address", metavar="ADDR", help="join this Ray cluster (default: start a local Ray)"
    )
    p.add_argument(
        "-c",
        dest="override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. -c search.budget.test_runs=10 or "
        "-c eval.env_dir=DIR (repeatable)",
    )
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    p.add_argument("--json", action="store_true", help="print summary.json at the end")


def add_grade(sub: Any) -> None:
    p = sub.add_parser(
        "grade",
        help="grade any system's predictions (SWE-bench format) with the eval's environments",
        description="Grade a predictions file (SWE-bench's format: instance_id, "
        "model_name_or_path, model_patch) against an instance set, as SWE-bench's harness "
        "grades: each patch applied to its base commit with git apply (one that does not apply "
        "is an error row with git's message), the test files of test_patch run, the official "
        "log parser and report. Writes results.jsonl, report.json (the harness's run report "
        "fields) and per-instance logs into a grade directory. Exit status: 0 all graded, "
        "1 some instance is an error row, 2 bad arguments, 130 interrupted.",
    )
    p.add_argument("predictions", nargs="?", help="predictions file (JSON or JSONL)")
    p.add_argument(
        "--out", metavar="DIR", help="grade directory to create (default: evals/eval-<time>)"
    )
    p.add_argument("--resume", metavar="DIR", help="continue the grading in a grade directory")
    _common(p)
    p.set_defaults(handler=_cmd_grade)


def add_eval(sub: Any) -> None:
    p = sub.add_parser(
        "eval",
        help="run one search per instance of a SWE-bench-style instance set",
        description="Run one search per instance (SWE-bench JSON/JSONL) on a local process pool "
        "or on Ray; write predictions.jsonl, results.jsonl, report.json and summary.json into an "
        "eval directory. `treesearch eval --resume DIR` continues an interrupted batch. "
        "--gold and --empty validate an instance set without a search: every row should be "
        "resolved with its gold patch and none without a patch. Exit status: 0, 1 when some "
        "instance is an error row, 2 bad arguments, 130 interrupted.",
    )
    p.add_argument("config", nargs="?", help="search config without a workspace")
    p.add_argument(
        "--out", metavar="DIR", help="eval directory to create (default: evals/eval-<time>)"
    )
    p.add_argument("--resume", metavar="DIR", help="continue the batch of an eval directory")
    p.add_argument(
        "--durations-from",
        metavar="DIR",
        help="an earlier eval of these instances (its directory or results.jsonl): start them "
        "longest first by the seconds it recorded, so that no long one starts last",
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--gold",
        action="store_true",
        help="no search: grade each instance's own patch (checks the set and its environments)",
    )
    which.add_argument(
        "--empty", action="store_true", help="no search: grade each base commit without a patch"
    )
    _common(p)
    p.set_defaults(handler=_cmd_eval)
