"""Command-line interface: the only module that prints, reads environment variables or exits.

Each command group lives in an ``_add_<group>`` function that registers its sub-parser and handler;
handlers return an exit status (0 ok, 1 failed operation, 2 usage error) and raise
``TreesearchError`` for failures, which ``main`` turns into a one-line message.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from treesearch import __version__
from treesearch.errors import TreesearchError

Handler = Callable[[argparse.Namespace], int]


def _emit_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="treesearch",
        description="Branch search over a real codebase; every workspace state is a git tree hash.",
    )
    parser.add_argument("--version", action="version", version=f"treesearch {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for add in _COMMAND_GROUPS:
        add(sub)
    return parser


_COMMAND_GROUPS: list[Callable[[Any], None]] = []


def main(argv: Sequence[str] | None = None) -> int:
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
        return 1
    except KeyboardInterrupt:
        print("treesearch: interrupted", file=sys.stderr)
        return 130


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
