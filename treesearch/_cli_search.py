"""The ``run`, `resume`, `show`, `export` and `checkout`` commands of the CLI. Part of the CLI (with ``treesearch.cli``, which registers
every group): one of the modules that may print, read environment variables or exit."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from treesearch._cli_common import _emit_json, _store_home, _watch


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
    judge = out.summary.get("judge")
    if judge is not None:  # scoring.judge: a failed verdict is said, never taken as a 0
        kinds = "; ".join(f"{n} x {k}" for k, n in judge["errors_by_kind"].items())
        print(
            f"judge {judge['model']} ({judge['combine']}): {judge['calls']} states judged"
            + (
                f", {judge['errors']} FAILED ({kinds}): those kept their tests' score"
                if kinds
                else ""
            )
        )
    repro = out.summary.get("reproduce")
    if repro is not None:  # search.reproduce: what steered the search beside the tests
        kept = ", ".join(str(k["from"]) for k in repro["kept"]) or "none (no signal from them)"
        print(
            f"reproduction tests kept: {kept}; dropped {len(repro['dropped'])} "
            f"(reasons in {out.run_dir / 'reproduce' / 'reproduce.json'})"
        )
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
    if (out.run_dir / "report.html").is_file():
        print(f"report: {out.run_dir / 'report.html'}")
    if out.interrupted:
        print(f"interrupted: continue with `treesearch resume {out.run_dir}`")


def _search_status(out: Any) -> int:
    """The exit status of a finished search: 130 interrupted, 4 when the root's test run could
    not be scored (nothing was searched), 3 when every expansion failed with an agent error, the
    search stopped on repeated ones, or every verdict of a value judge failed (4 and 3 are said
    on stderr), else 0."""
    from treesearch.search.render import agent_failure, root_failure

    if out.interrupted:
        return 130
    unscorable = root_failure(out.summary, out.stop_reason)
    if unscorable is not None:
        print(f"treesearch: {unscorable}", file=sys.stderr)
        return 4
    failure = agent_failure(out.summary, out.stop_reason)
    judge = out.summary.get("judge") or {}
    if failure is None and judge.get("calls") and judge.get("errors") == judge.get("calls"):
        failure = (
            f"every verdict of the value judge failed ({judge['errors']} of {judge['calls']}; "
            "scoring.judge): the search ran on its tests alone"
        )
    if failure is None:
        return 0
    print(f"treesearch: {failure}", file=sys.stderr)
    return 3


def _report_search(args: argparse.Namespace, out: Any, progress: _Progress) -> int:
    """The end of ``run`` and ``resume``: the outcome (or ``summary.json`` with ``--json``)."""
    progress.done()
    for warning in out.summary.get("warnings") or []:
        print(f"treesearch: warning: {warning}", file=sys.stderr)
    if args.json:
        _emit_json(out.summary)
    else:
        _print_outcome(out, show_patch=not args.no_patch)
    return _search_status(out)


def _cmd_run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from treesearch.app import run_from_config
    from treesearch.config import load_config

    loaded = load_config(args.config, args.override)
    _sigterm_as_interrupt()
    progress = _Progress()

    def started(run: Any, workspace: Path) -> None:
        print(f"run {run.path.name}: searching {workspace}", file=sys.stderr)

    def note(text: str) -> None:  # e.g. why the warm test runner fell back to cold runs
        print(f"treesearch: {text}", file=sys.stderr)

    out = run_from_config(
        loaded,
        runs_dir=Path(args.runs_dir) if args.runs_dir else None,
        on_progress=None if args.quiet else progress,
        on_start=started,
        home=_store_home(None),
        watch=_watch(),
        on_note=note,
    )
    return _report_search(args, out, progress)


def _cmd_resume(args: argparse.Namespace) -> int:
    from pathlib import Path

    from treesearch.app import resume

    _sigterm_as_interrupt()
    progress = _Progress()

    def note(text: str) -> None:  # why the search has nothing (left) to do
        print(f"treesearch: {text}", file=sys.stderr)

    quiet = args.quiet
    out = resume(
        Path(args.run_dir),
        args.override,
        None if quiet else progress,
        on_note=note,
        home=_store_home(None),
        watch=_watch(),
    )
    return _report_search(args, out, progress)


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

    node, result, workspace = checkout(
        Path(args.run_dir), args.node, home=_store_home(None), watch=_watch()
    )
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


def add_search(sub: Any) -> None:
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
