"""The ``report`` command of the CLI. Part of the CLI (with ``treesearch.cli``, which registers
every group): one of the modules that may print, read environment variables or exit."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from treesearch._cli_common import _emit_json


def _cmd_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from treesearch.report import write_report

    written = write_report(Path(args.dir))
    if args.json:
        _emit_json({"path": str(written.path), "kind": written.kind, "notes": written.notes})
        return 0
    for note in written.notes:
        print(f"treesearch: note: {note}", file=sys.stderr)
    print(f"{written.kind} report: {written.path}")
    return 0


def add_report(sub: Any) -> None:
    p = sub.add_parser(
        "report",
        help="write (or rewrite) report.html of a run, eval or compare directory",
        description="Write DIR/report.html: a self-contained page (no network needed to view "
        "it). A run's page draws its search tree; an eval's or a compare's page shows its "
        "tables and anytime curves and links to each run's page (written when missing).",
    )
    p.add_argument("dir", metavar="DIR", help="a run, eval or compare directory")
    p.add_argument("--json", action="store_true", help="print the page's path and notes as JSON")
    p.set_defaults(handler=_cmd_report)
