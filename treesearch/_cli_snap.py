"""The ``snap`` commands of the CLI. Part of the CLI (with ``treesearch.cli``, which registers
every group): one of the modules that may print, read environment variables or exit."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from treesearch._cli_common import (
    _emit_json,
    _open_store,
    _parse_duration,
    _parse_size,
    _say_notes,
    _short,
    _snap_dict,
    _store_args,
)
from treesearch.errors import StoreError


def _cmd_capture(args: argparse.Namespace) -> int:
    from treesearch.store import label_problem

    problem = label_problem(args.label)
    if problem is not None:  # a usage error, said before the store is opened
        print(f"treesearch: error: --label: {problem}", file=sys.stderr)
        return 2
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
    for kind, path in _changed_kinds(store, snap)[:20]:
        print(f"  {kind} {path}")
    if len(snap.changed) > 20:
        print(f"  ... and {len(snap.changed) - 20} more")
    for sk in snap.skipped:
        print(f"  skipped {sk.path} ({sk.reason}: {sk.detail})")
    return 0


def _changed_kinds(store: Any, snap: Any) -> list[tuple[str, str]]:
    """``snap.changed`` with git's letter for each path: ``A`` added, ``M`` modified, ``D``
    deleted, ``T`` type changed, from the diff with the previous snapshot (all ``A`` without
    one; ``~``, with a note, when the diff fails)."""
    if not snap.changed:
        return []
    if snap.parent is None:
        return [("A", path) for path in snap.changed]
    try:
        kinds = store.changes(snap.parent, snap.commit)
    except StoreError as exc:  # the capture stands; only the listing lacks the kinds
        print(f"treesearch: note: cannot tell the kinds of change: {exc}", file=sys.stderr)
        return [("~", path) for path in snap.changed]
    return [(kinds.get(path, "M"), path) for path in snap.changed]


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
    store = _open_store(args)
    result = store.restore(args.ref)
    _say_notes(store, result.warnings)
    return _print_restore(args, result)


def _cmd_undo(args: argparse.Namespace) -> int:
    store = _open_store(args)
    result = store.undo()
    _say_notes(store, result.warnings)
    return _print_restore(args, result)


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


def _cmd_gc(args: argparse.Namespace) -> int:
    import dataclasses

    store = _open_store(args)
    result = store.gc(
        keep_last=args.keep_last,
        max_age=args.max_age,
        max_bytes=args.max_bytes,
        keep_safety=args.keep_safety,
        safety_max_age=args.safety_max_age,
        labelled=args.labelled,
        drop=args.drop,
        dry_run=args.dry_run,
        release=args.release,
    )
    _say_notes(store)
    if args.json:
        d = dataclasses.asdict(result)
        d["snapshots"] = [_snap_dict(s) for s in result.snapshots]
        _emit_json(d)
        return 0
    for h in result.held:
        others = h.snapshots != len(h.commits)
        what = f"{h.snapshots} snapshots" + (
            f" + {len(h.commits) - h.snapshots} worker step snapshots" if others else ""
        )
        if h.released is None:
            where = f" while {h.holder} exists" if h.holder else " until released"
            print(f"keeps {h.name}: {what}{where}")
        else:
            verb = "would release" if result.dry_run else "released"
            print(f"{verb} {h.name} ({h.released}): {what}")
    verb = "would drop" if result.dry_run else "dropped"
    for s in result.snapshots:
        created = s.created_iso[:19].replace("T", " ")
        what = s.kind + (f" [{s.label}]" if s.label else "")
        print(f"{verb} {_short(s.commit)}  {what:24}  {created}")
    after = "" if result.dry_run else f" -> {result.bytes_after / 1e6:.1f} MB"
    print(
        f"{verb} {len(result.dropped)} snapshots, kept {result.kept}; "
        f"store {result.bytes_before / 1e6:.1f} MB{after}"
    )
    return 0


def add_snap(sub: Any) -> None:
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
    p.add_argument(
        "--keep-last",
        type=int,
        metavar="N",
        help="keep the newest N unlabelled captures (safety snapshots are not counted)",
    )
    p.add_argument(
        "--max-age",
        type=_parse_duration,
        metavar="AGE",
        help="drop unlabelled captures older than AGE (e.g. 7d, 12h)",
    )
    p.add_argument(
        "--max-bytes",
        type=_parse_size,
        metavar="SIZE",
        help="then drop the oldest unlabelled captures and safety snapshots until the store "
        "fits SIZE (e.g. 500M)",
    )
    p.add_argument(
        "--keep-safety",
        type=int,
        default=3,
        metavar="N",
        help="never drop the newest N safety snapshots (default 3): the last restores stay "
        "undoable",
    )
    p.add_argument(
        "--safety-max-age",
        type=_parse_duration,
        metavar="AGE",
        help="drop safety snapshots older than AGE (beyond the newest --keep-safety)",
    )
    p.add_argument(
        "--labelled",
        action="store_true",
        help="apply --keep-last, --max-age and --max-bytes to labelled captures too",
    )
    p.add_argument(
        "--drop",
        action="append",
        default=[],
        metavar="REF",
        help="drop this snapshot (a label: every snapshot with it); repeatable",
    )
    p.add_argument(
        "--release",
        action="append",
        default=[],
        metavar="RUN",
        help="let a run's nodes go although its run directory still exists (a run id, as "
        "listed by --dry-run); repeatable. A run whose directory is gone is released anyway",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="list what would be dropped and what each kept run holds; change nothing",
    )
    _store_args(p)
    p.set_defaults(handler=_cmd_gc)
