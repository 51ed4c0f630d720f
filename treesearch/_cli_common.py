"""What the CLI's command groups share: JSON output, the store opened from the command line and
the environment (with its notes on standard error), sizes and durations given as text. Part of
the CLI (see ``treesearch.cli``): it prints and reads environment variables."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any


def _emit_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")


def _store_home(given: str | None) -> Any:
    """The store home: ``given`` (``--home``), else from ``TREESEARCH_HOME``/``XDG_CACHE_HOME``.
    The environment is read here, and only here; the library takes the values as arguments."""
    from pathlib import Path

    from treesearch.store import default_home

    return Path(given).expanduser() if given else default_home(os.environ)


def _watch() -> bool:
    """``TREESEARCH_WATCH``: ``0``/``off``/``false``/``no`` turns the store's watcher off."""
    value = os.environ.get("TREESEARCH_WATCH", "1").strip().lower()
    return value not in ("0", "off", "false", "no")


def _store_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--workspace",
        "-w",
        metavar="DIR",
        help="the workspace folder (default: the nearest folder, from here up, that has a store "
        "in the store home; else the current folder)",
    )
    p.add_argument(
        "--home",
        metavar="DIR",
        help="store home (default: $TREESEARCH_HOME or ~/.cache/treesearch)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _open_store(args: argparse.Namespace) -> Any:
    from treesearch.store import ShadowStore, find_workspace

    home = _store_home(args.home)
    workspace = args.workspace if args.workspace is not None else find_workspace(".", home)
    store = ShadowStore.open(workspace, home=home, watch=_watch())
    for note in (store.repaired, store.recovered):
        if note:
            print(f"treesearch: note: {note}", file=sys.stderr)
    _say_notes(store)
    return store


def _say_notes(store: Any, warnings: Sequence[str] = ()) -> None:
    """Evidence of what was taken over (a dead holder's hold), and what went wrong but did not
    stop the operation: on standard error, whatever the output format."""
    for note in store.reclaimed:
        print(f"treesearch: note: {note}", file=sys.stderr)
    store.reclaimed.clear()
    for warning in warnings:
        print(f"treesearch: warning: {warning}", file=sys.stderr)


def _snap_dict(snap: Any) -> dict[str, Any]:
    import dataclasses

    d = dataclasses.asdict(snap)
    d["created_iso"] = snap.created_iso
    return d


def _short(h: str | None) -> str:
    return (h or "-")[:12]


def _parse_duration(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    text = text.strip().lower()
    try:
        if text and text[-1] in units:
            return float(text[:-1]) * units[text[-1]]
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid duration {text!r}: use seconds or a number with s/m/h/d/w, e.g. 7d"
        ) from None


def _parse_size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = text.strip().lower().removesuffix("b").removesuffix("i")
    try:
        if t and t[-1] in units:
            return int(float(t[:-1]) * units[t[-1]])
        return int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid size {text!r}: use bytes or a number with K/M/G, e.g. 500M"
        ) from None
