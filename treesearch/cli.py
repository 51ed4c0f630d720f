"""Command-line interface: the only code that prints, reads environment variables or exits.

The CLI is this module (``main``, the parser, ``clean``), one module per command group
(``treesearch._cli_snap``, ``_cli_score``, ``_cli_search``, ``_cli_eval``, ``_cli_compare``,
``_cli_report``) and the helpers the groups share (``_cli_common``); all of them count as "the
CLI" for that rule. Each group has an ``add_<group>`` function that registers
its sub-parsers and handlers; handlers return an exit status (0 ok, 1 failed operation, 2 usage
error, 3 a search whose agent runs all failed or that stopped on repeated agent errors, 4 a
search whose root's test run could not be scored, 130 interrupted) and raise ``TreesearchError`` for failures, which ``main`` turns into a one-line
message.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from treesearch import __version__
from treesearch._cli_common import _emit_json, _parse_duration, _store_home
from treesearch.errors import ConfigError, TreesearchError

Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="treesearch",
        description="Branch search over a real codebase; every workspace state is a git tree hash.",
    )
    parser.add_argument("--version", action="version", version=f"treesearch {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    from treesearch import (
        _cli_compare,
        _cli_eval,
        _cli_report,
        _cli_score,
        _cli_search,
        _cli_snap,
    )

    for add in (
        _cli_snap.add_snap,
        _cli_score.add_score,
        _cli_score.add_localize,
        _cli_search.add_search,
        _cli_eval.add_eval,
        _cli_eval.add_grade,
        _cli_compare.add_compare,
        _cli_report.add_report,
        _add_clean,
    ):
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):
        # Paths may hold bytes that are not UTF-8 (kept as surrogate escapes): print them as is.
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="surrogateescape")
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    handler: Handler = args.handler
    try:
        return handler(args)
    except TreesearchError as exc:
        print(f"treesearch: error: {exc}", file=sys.stderr)
        # A bad config file or -c override of a search is a usage error.
        return 2 if isinstance(exc, ConfigError) and getattr(args, "config_usage", False) else 1
    except KeyboardInterrupt:
        print("treesearch: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`); say nothing more and do not trip on flushing.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


# ------------------------------------------------------------------------------------ clean


def _cmd_clean(args: argparse.Namespace) -> int:
    from pathlib import Path

    from treesearch.runs import cleanup

    home = _store_home(args.home)
    runs = Path(args.runs_dir) if args.runs_dir else None
    plan = cleanup.plan_clean(home, older_than=args.older_than, runs_dir=runs)
    if not args.dry_run:
        cleanup.apply_clean(plan)
    if args.json:
        _emit_json(plan.to_dict())
    else:
        print("\n".join(cleanup.describe(plan)))
    return 1 if any(i.removed is False for i in plan.items) else 0


def _add_clean(sub: Any) -> None:
    p = sub.add_parser("clean", help="remove old runs' workspace copies, orphan stores, leftovers")
    p.add_argument("--dry-run", "-n", action="store_true", help="list, remove nothing")
    p.add_argument(
        "--older-than",
        type=_parse_duration,
        default=7 * 86400,
        metavar="AGE",
        help="copies and orphan stores unused for this long (default 7d; 0: all)",
    )
    p.add_argument("--runs-dir", metavar="DIR", help="only the copies of runs in DIR")
    p.add_argument("--home", metavar="DIR", help="store home (default: $TREESEARCH_HOME or cache)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_cmd_clean)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
