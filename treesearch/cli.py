"""Command-line interface: the only module that prints, reads environment variables or exits.

Each command group lives in an ``_add_<group>`` function that registers its sub-parser and handler;
handlers return an exit status (0 ok, 1 failed operation, 2 usage error, 3 a search whose agent
runs all failed or that stopped on repeated agent errors, 130 interrupted) and raise
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
from treesearch.errors import ConfigError, TreesearchError

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


def _register(add: Callable[[Any], None]) -> Callable[[Any], None]:
    _COMMAND_GROUPS.append(add)
    return add


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


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


# ------------------------------------------------------------------------------------ snap


def _store_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--workspace",
        "-w",
        default=".",
        metavar="DIR",
        help="the workspace folder (default: the current folder)",
    )
    p.add_argument(
        "--home",
        metavar="DIR",
        help="store home (default: $TREESEARCH_HOME or ~/.cache/treesearch)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _open_store(args: argparse.Namespace) -> Any:
    from treesearch.store import ShadowStore

    home = args.home or _env("TREESEARCH_HOME")
    store = ShadowStore.open(args.workspace, home=home)
    if store.recovered and not args.json:
        print(f"treesearch: note: {store.recovered}", file=sys.stderr)
    return store


def _snap_dict(snap: Any) -> dict[str, Any]:
    import dataclasses

    d = dataclasses.asdict(snap)
    d["created_iso"] = snap.created_iso
    return d


def _short(h: str | None) -> str:
    return (h or "-")[:12]


def _cmd_capture(args: argparse.Namespace) -> int:
    store = _open_store(args)
    meta = None
    if args.meta:
        try:
            meta = json.loads(args.meta)
        except ValueError as exc:
            print(f"treesearch: error: --meta is not valid JSON: {exc}", file=sys.stderr)
            return 2
        if not isinstance(meta, dict):
            print("treesearch: error: --meta must be a JSON object", file=sys.stderr)
            return 2
    snap = store.capture(label=args.label, meta=meta)
    if args.json:
        _emit_json(_snap_dict(snap))
        return 0
    st = snap.stats
    label = f" [{snap.label}]" if snap.label else ""
    print(f"snapshot {_short(snap.commit)}{label}  tree {snap.tree}")
    print(
        f"  {len(snap.changed)} changed, {len(snap.skipped)} skipped; "
        f"{st.files_seen} files seen, {st.files_hashed} hashed in {st.seconds:.3f}s"
    )
    for path in snap.changed[:20]:
        print(f"  ~ {path}")
    if len(snap.changed) > 20:
        print(f"  ... and {len(snap.changed) - 20} more")
    for sk in snap.skipped:
        print(f"  skipped {sk.path} ({sk.reason}: {sk.detail})")
    return 0


def _print_restore(args: argparse.Namespace, result: Any) -> int:
    if args.json:
        import dataclasses

        d = dataclasses.asdict(result)
        d["target"] = _snap_dict(result.target)
        d["safety"] = _snap_dict(result.safety)
        _emit_json(d)
        return 0
    t = result.target
    print(f"restored {_short(t.commit)}{' [' + t.label + ']' if t.label else ''}  tree {t.tree}")
    print(
        f"  wrote {len(result.written)}, deleted {len(result.deleted)}, "
        f"pruned {len(result.pruned)} folders, chmod {len(result.chmodded)} "
        f"in {result.seconds:.3f}s"
    )
    print(f"  safety snapshot {_short(result.safety.commit)}: `treesearch snap undo` goes back")
    return 0


def _cmd_restore(args: argparse.Namespace) -> int:
    return _print_restore(args, _open_store(args).restore(args.ref))


def _cmd_undo(args: argparse.Namespace) -> int:
    return _print_restore(args, _open_store(args).undo())


def _cmd_diff(args: argparse.Namespace) -> int:
    import dataclasses

    diff = _open_store(args).diff(args.a, args.b, max_patch_bytes=args.max_bytes)
    if args.json:
        d = dataclasses.asdict(diff)
        _emit_json(d)
        return 0
    if args.stat:
        print(diff.stat())
    elif args.name_status:
        if diff.files:
            print(diff.name_status())
    else:
        sys.stdout.write(diff.patch)
        if diff.truncated:
            print(f"[patch cut at {args.max_bytes} bytes]", file=sys.stderr)
    return 0


def _cmd_log(args: argparse.Namespace) -> int:
    snaps = _open_store(args).log(include_safety=not args.no_safety, limit=args.limit)
    if args.json:
        _emit_json([_snap_dict(s) for s in snaps])
        return 0
    if not snaps:
        print("no snapshots yet: `treesearch snap capture` records one")
        return 0
    print(f"{'commit':12}  {'tree':12}  {'kind':8}  {'created (UTC)':19}  {'changed':>7}  label")
    for s in snaps:
        created = s.created_iso[:19].replace("T", " ")
        print(
            f"{_short(s.commit):12}  {_short(s.tree):12}  {s.kind:8}  {created:19}  "
            f"{len(s.changed):>7}  {s.label or ''}"
        )
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    import dataclasses

    store = _open_store(args)
    snap = store.resolve(args.ref)
    entries = store.files(args.ref)
    if args.json:
        _emit_json(
            {"snapshot": _snap_dict(snap), "files": [dataclasses.asdict(e) for e in entries]}
        )
        return 0
    print(f"snapshot {_short(snap.commit)}  tree {snap.tree}  {len(entries)} files")
    for e in entries:
        kind = "link" if e.mode == 0o120000 else f"{e.perm:04o}"
        print(f"{kind:>5} {e.size:>10}  {e.path}")
    for d in snap.empty_dirs:
        print(f"{'dir':>5} {'':>10}  {d}/")
    return 0


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


def _cmd_gc(args: argparse.Namespace) -> int:
    import dataclasses

    result = _open_store(args).gc(
        keep_last=args.keep_last,
        max_age=args.max_age,
        max_bytes=args.max_bytes,
        keep_safety=args.keep_safety,
        dry_run=args.dry_run,
    )
    if args.json:
        _emit_json(dataclasses.asdict(result))
        return 0
    verb = "would drop" if result.dry_run else "dropped"
    print(
        f"{verb} {len(result.dropped)} snapshots, kept {result.kept}; "
        f"store {result.bytes_before / 1e6:.1f} MB -> {result.bytes_after / 1e6:.1f} MB"
    )
    return 0


@_register
def _add_snap(sub: Any) -> None:
    snap = sub.add_parser("snap", help="capture, restore and compare workspace snapshots")
    cmds = snap.add_subparsers(dest="snap_command", metavar="SUBCOMMAND")
    cmds.required = True

    p = cmds.add_parser("capture", help="record the workspace as a snapshot")
    p.add_argument("--label", "-l", help="a name to find the snapshot by")
    p.add_argument("--meta", help="JSON object stored with the snapshot")
    _store_args(p)
    p.set_defaults(handler=_cmd_capture)

    p = cmds.add_parser("restore", help="make the workspace equal to a snapshot")
    p.add_argument("ref", help="tree hash, commit, unique prefix, or label")
    _store_args(p)
    p.set_defaults(handler=_cmd_restore)

    p = cmds.add_parser("undo", help="restore the safety snapshot taken by the last restore")
    _store_args(p)
    p.set_defaults(handler=_cmd_undo)

    p = cmds.add_parser("diff", help="changes from snapshot A to B (default: the workspace now)")
    p.add_argument("a")
    p.add_argument("b", nargs="?")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--stat", action="store_true", help="per-file line counts")
    fmt.add_argument("--name-status", action="store_true", help="status letter and path")
    p.add_argument("--max-bytes", type=int, default=1_000_000, help="cut the patch at this size")
    _store_args(p)
    p.set_defaults(handler=_cmd_diff)

    p = cmds.add_parser("log", help="list snapshots, newest first")
    p.add_argument("--limit", type=int)
    p.add_argument("--no-safety", action="store_true", help="hide safety snapshots")
    _store_args(p)
    p.set_defaults(handler=_cmd_log)

    p = cmds.add_parser("show", help="list the files of a snapshot")
    p.add_argument("ref")
    _store_args(p)
    p.set_defaults(handler=_cmd_show)

    p = cmds.add_parser("gc", help="drop old snapshots and unreachable objects")
    p.add_argument("--keep-last", type=int, metavar="N", help="keep the newest N snapshots")
    p.add_argument(
        "--max-age",
        type=_parse_duration,
        metavar="AGE",
        help="drop snapshots older than AGE (e.g. 7d, 12h)",
    )
    p.add_argument(
        "--max-bytes",
        type=_parse_size,
        metavar="SIZE",
        help="drop the oldest snapshots until the store fits SIZE (e.g. 500M)",
    )
    p.add_argument(
        "--keep-safety",
        type=int,
        default=3,
        metavar="N",
        help="always keep the newest N safety snapshots (default 3)",
    )
    p.add_argument("--dry-run", action="store_true", help="say what would be dropped")
    _store_args(p)
    p.set_defaults(handler=_cmd_gc)


# ------------------------------------------------------------------------------------ score


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


@_register
def _add_score(sub: Any) -> None:
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


@_register
def _add_localize(sub: Any) -> None:
    p = sub.add_parser("localize", help="rank the lines the failing tests point at")
    p.add_argument("--workspace", "-w", default=".", metavar="DIR", help="default: here")
    p.add_argument("--tests", metavar="CMD", help="test command (default: python -m pytest -q)")
    p.add_argument("--top", type=int, default=10, metavar="N", help="lines shown (default 10)")
    p.add_argument("--formula", choices=("ochiai", "tarantula", "dstar"), default="ochiai")
    p.add_argument("--no-coverage", action="store_true", help="rank by tracebacks only")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds (default 600)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_cmd_localize)


# ------------------------------------------------------------------------------------ search


def _sigterm_as_interrupt() -> None:
    import signal

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


class _Progress:
    """One line per expansion (rewritten in place on a terminal)."""

    def __init__(self, budget: dict[str, Any] | None = None) -> None:
        self.tty = sys.stderr.isatty()
        self.budget = budget or {}

    def __call__(self, p: dict[str, Any]) -> None:
        left = p["remaining"]
        parts = [f"{k.replace('_', ' ')} left {_num(v)}" for k, v in left.items() if v is not None]
        score = "-" if p["score"] is None else f"{p['score']:.2f}"
        best = "-" if p["best_score"] is None else f"{p['best_score']:.2f}"
        from treesearch.search.render import expansion_result

        result = expansion_result(p["outcome"], score, p.get("status"), p.get("reason"))
        line = (
            f"[{p['k'] + 1:>3}] best {best} | {p['strategy']} -> {result} | "
            f"{p['nodes']} nodes | " + ", ".join(parts)
        )
        if self.tty:
            sys.stderr.write("\r\033[K" + line[:200])
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def done(self) -> None:
        if self.tty:
            sys.stderr.write("\n")


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.1f}"


def _print_outcome(out: Any, *, show_patch: bool = True) -> None:
    from treesearch.search import render

    print()
    print(render.tree_text(out.graph))
    print()
    best_score = "-" if out.best_score is None else f"{out.best_score:.3f}"
    path = " -> ".join(out.summary["best"]["path"]) or "(the root itself)"
    print(f"best node {out.best[:12]}  score {best_score}  via {path}")
    u = out.usage
    print(
        f"stopped: {out.stop_reason}; {u.expansions} expansions, {u.test_runs} test runs "
        f"({u.cache_hits} cached), {out.summary['seconds']:.1f}s"
    )
    for line in render.agent_lines(out.summary):
        print(line)
    if out.grade is not None:
        print(
            f"held-out grade: {out.grade.score:.3f}" + (" (resolved)" if out.grade.resolved else "")
        )
    if show_patch and out.patch:
        print()
        print("winning patch (also in best.patch):")
        sys.stdout.write(out.patch)
    print()
    print(f"workspace (now at the best node): {out.workspace}")
    if copy := out.summary.get("workspace_copy"):
        print(f"  a copy of {copy['source']}, kept {copy['kept']}")
    print(f"run directory: {out.run_dir}")
    if out.interrupted:
        print(f"interrupted: continue with `treesearch resume {out.run_dir}`")


def _search_status(out: Any) -> int:
    """The exit status of a finished search: 130 interrupted, 3 when every expansion failed
    with an agent error or the search stopped on repeated ones (said on stderr), else 0."""
    from treesearch.search.render import agent_failure

    if out.interrupted:
        return 130
    failure = agent_failure(out.summary, out.stop_reason)
    if failure is None:
        return 0
    print(f"treesearch: {failure}", file=sys.stderr)
    return 3


def _cmd_run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from treesearch.app import run_from_config
    from treesearch.config import load_config

    loaded = load_config(args.config, args.override)
    _sigterm_as_interrupt()
    progress = _Progress()

    def started(run: Any, workspace: Path) -> None:
        print(f"run {run.path.name}: searching {workspace}", file=sys.stderr)

    out = run_from_config(
        loaded,
        runs_dir=Path(args.runs_dir) if args.runs_dir else None,
        on_progress=None if args.quiet else progress,
        on_start=started,
    )
    progress.done()
    if args.json:
        _emit_json(out.summary)
    else:
        _print_outcome(out, show_patch=not args.no_patch)
    return _search_status(out)


def _cmd_resume(args: argparse.Namespace) -> int:
    from pathlib import Path

    from treesearch.app import resume

    _sigterm_as_interrupt()
    progress = _Progress()

    def note(text: str) -> None:  # why the search has nothing (left) to do
        print(f"treesearch: {text}", file=sys.stderr)

    quiet = args.quiet
    out = resume(Path(args.run_dir), args.override, None if quiet else progress, on_note=note)
    progress.done()
    if args.json:
        _emit_json(out.summary)
    else:
        _print_outcome(out, show_patch=not args.no_patch)
    return _search_status(out)


def _cmd_show_run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from treesearch.app import load_run_graph
    from treesearch.search import render

    _run, g, summary = load_run_graph(Path(args.run_dir))
    if args.json:
        from treesearch.search.graph import to_json

        sys.stdout.write(to_json(g))
        return 0
    print(render.tree_text(g))
    if summary:
        best = summary.get("best", {})
        print(
            f"\n{summary.get('status')} ({summary.get('stop_reason')}); best "
            f"{str(best.get('tree'))[:12]} score {best.get('score')}"
        )
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from treesearch.app import load_run_graph
    from treesearch.search import render

    _run, g, _ = load_run_graph(Path(args.run_dir))
    text = render.export(g, args.format)
    if args.output:
        target = Path(args.output)
        try:
            target.write_text(text)
        except OSError as exc:
            hint = "" if target.parent.is_dir() else f": create the folder {target.parent} first"
            print(f"treesearch: error: --output {target}: {exc.strerror}{hint}", file=sys.stderr)
            return 2
    else:
        sys.stdout.write(text)
    return 0


def _cmd_checkout(args: argparse.Namespace) -> int:
    from pathlib import Path

    from treesearch.app import checkout

    node, result, workspace = checkout(Path(args.run_dir), args.node)
    if args.json:
        _emit_json(
            {
                "node": node,
                "workspace": str(workspace),
                "written": list(result.written),
                "deleted": list(result.deleted),
                "safety": result.safety.commit,
            }
        )
        return 0
    print(
        f"{workspace} is now at node {node[:12]}: wrote {len(result.written)}, deleted "
        f"{len(result.deleted)} files"
    )
    print(f"`treesearch snap undo --workspace {workspace}` goes back")
    return 0


@_register
def _add_search(sub: Any) -> None:
    p = sub.add_parser("run", help="run a search from a YAML config")
    p.add_argument("config", help="YAML config (see configs/demo.yaml)")
    p.add_argument(
        "-c",
        dest="override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. -c search.policy=mcts (repeatable)",
    )
    p.add_argument("--runs-dir", help="where run directories go (default: output.runs_dir)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    p.add_argument("--no-patch", action="store_true", help="do not print the winning patch")
    p.add_argument("--json", action="store_true", help="print summary.json at the end")
    p.set_defaults(handler=_cmd_run, config_usage=True)

    p = sub.add_parser("resume", help="continue an interrupted (or finished) search")
    p.add_argument("run_dir")
    p.add_argument(
        "-c",
        dest="override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change the config first, e.g. -c search.budget.expansions=80",
    )
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    p.add_argument("--no-patch", action="store_true", help="do not print the winning patch")
    p.add_argument("--json", action="store_true", help="print summary.json at the end")
    p.set_defaults(handler=_cmd_resume, config_usage=True)

    p = sub.add_parser("show", help="print a run's search tree")
    p.add_argument("run_dir")
    p.add_argument("--json", action="store_true", help="the graph as node-link JSON")
    p.set_defaults(handler=_cmd_show_run)

    p = sub.add_parser("export", help="export a run's graph")
    p.add_argument("run_dir")
    p.add_argument("--format", choices=("graphml", "dot", "json"), default="json")
    p.add_argument("--output", "-o", help="file to write (default: standard output)")
    p.set_defaults(handler=_cmd_export)

    p = sub.add_parser("checkout", help="restore any node of a run into its workspace")
    p.add_argument("run_dir")
    p.add_argument("node", help="tree-hash prefix, or #N for the N-th node found")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_cmd_checkout)


def _cmd_clean(args: argparse.Namespace) -> int:
    from pathlib import Path

    from treesearch.runs import cleanup
    from treesearch.store import default_home

    home = Path(args.home or _env("TREESEARCH_HOME") or default_home())
    runs = Path(args.runs_dir) if args.runs_dir else None
    plan = cleanup.plan_clean(home, older_than=args.older_than, runs_dir=runs)
    if not args.dry_run:
        cleanup.apply_clean(plan)
    if args.json:
        _emit_json(plan.to_dict())
    else:
        print("\n".join(cleanup.describe(plan)))
    return 1 if any(i.removed is False for i in plan.items) else 0


@_register
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
