"""The ``score` and `cache`` commands of the CLI. Part of the CLI (with ``treesearch.cli``, which registers
every group): one of the modules that may print, read environment variables or exit."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from treesearch._cli_common import _emit_json, _open_store, _store_args


def _score_cache(store: Any) -> Any:
    from treesearch.scoring import ScoreCache

    return ScoreCache(store.path / "scores.sqlite")


def _cmd_score(args: argparse.Namespace) -> int:
    from treesearch.scoring import TestSpec, score_workspace

    store = _open_store(args)
    spec: dict[str, Any] = {"timeout": args.timeout}
    if args.tests:
        spec["command"] = args.tests
    cache = None if args.no_cache else _score_cache(store)
    result = score_workspace(
        store.workspace,
        TestSpec.from_config(spec, source="--tests"),
        cache=cache,
        ref=args.ref,
        store=store,
        score=args.score,
        warm=args.warm,
        on_note=lambda text: print(f"treesearch: note: {text}", file=sys.stderr),
    )
    broken = 0 if result.run.status.value == "ok" else 3  # the tests gave no usable result
    if args.json:
        _emit_json(result.to_dict())
        return broken
    run = result.run
    for test_id, outcome in result.rows():
        print(f"{str(getattr(outcome, 'value', outcome)):8}  {test_id}")
    totals = ", ".join(f"{n} {k}" for k, n in sorted(run.totals.items()) if n)
    source = "cache hit" if result.cached else f"ran in {run.seconds:.2f}s"
    print(f"status {run.status.value}; {totals or 'no tests'}; {source}")
    print(
        f"score {result.score:.3f} ({result.score_name})"
        + ("  resolved" if result.resolved else "")
    )
    if run.status.value != "ok" and run.problem:
        print(f"problem: {run.problem}")
    return broken


def _cmd_cache_list(args: argparse.Namespace) -> int:
    entries = _score_cache(_open_store(args)).entries(args.tree)
    if args.json:
        import dataclasses

        _emit_json([dataclasses.asdict(e) for e in entries])
        return 0
    if not entries:
        print("the score cache is empty")
    for e in entries:
        print(" ".join(str(v) for v in _cache_row(e)))
    return 0


def _cache_row(entry: Any) -> list[Any]:
    return [entry.tree[:12], entry.fingerprint[:12], f"{entry.status:8}", entry.summary]


def _cmd_cache_clear(args: argparse.Namespace) -> int:
    n = _score_cache(_open_store(args)).clear(args.tree)
    if args.json:
        _emit_json({"cleared": n})
    else:
        print(f"cleared {n} cached test runs")
    return 0


def add_score(sub: Any) -> None:
    p = sub.add_parser("score", help="run the tests on the workspace (or a snapshot) and score it")
    p.add_argument("ref", nargs="?", help="score this snapshot (materialized in a temp folder)")
    p.add_argument("--tests", metavar="CMD", help="test command (default: python -m pytest -q)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds (default 600)")
    p.add_argument(
        "--score",
        default="pass_fraction",
        help="score function: pass_fraction (default), resolved, swebench",
    )
    p.add_argument("--no-cache", action="store_true", help="run even if the result is cached")
    p.add_argument(
        "--warm",
        choices=("on", "off"),
        default="off",
        help="on: run a pytest command forked from a warm server, as a search does "
        "(default off: one run does not pay for starting one)",
    )
    _store_args(p)
    p.set_defaults(handler=_cmd_score)

    cache = sub.add_parser("cache", help="list or clear cached test results")
    cmds = cache.add_subparsers(dest="cache_command", metavar="SUBCOMMAND")
    cmds.required = True
    for name, handler, text in (
        ("list", _cmd_cache_list, "list cached test runs"),
        ("clear", _cmd_cache_clear, "delete cached test runs"),
    ):
        c = cmds.add_parser(name, help=text)
        c.add_argument("--tree", help="only entries whose tree hash starts with this")
        _store_args(c)
        c.set_defaults(handler=handler)


def _cmd_localize(args: argparse.Namespace) -> int:
    from treesearch.agents.mutation import localize
    from treesearch.agents.mutation.report import localization_data, localization_text
    from treesearch.scoring import TestSpec

    spec: dict[str, Any] = {"timeout": args.timeout}
    if args.tests:
        spec["command"] = args.tests
    loc = localize(
        args.workspace,
        TestSpec.from_config(spec, source="--tests"),
        formula=args.formula,
        use_coverage=not args.no_coverage,
    )
    if args.json:
        _emit_json(localization_data(loc, args.top, args.workspace))
    else:
        print(localization_text(loc, args.top, args.workspace))
    return 0 if loc.lines else 1


def add_localize(sub: Any) -> None:
    """``treesearch localize``: the lines the failing tests point at, ranked."""
    p = sub.add_parser("localize", help="rank the lines the failing tests point at")
    p.add_argument("--workspace", "-w", default=".", metavar="DIR", help="default: here")
    p.add_argument("--tests", metavar="CMD", help="test command (default: python -m pytest -q)")
    p.add_argument("--top", type=int, default=10, metavar="N", help="lines shown (default 10)")
    p.add_argument("--formula", choices=("ochiai", "tarantula", "dstar"), default="ochiai")
    p.add_argument("--no-coverage", action="store_true", help="rank by tracebacks only")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds (default 600)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_cmd_localize)
