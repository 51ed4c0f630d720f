"""Text for people at a shell: progress lines and the summary table of an eval (no printing)."""

from __future__ import annotations

from typing import Any

__all__ = ["duration", "event_line", "summary_lines"]


def duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``."""
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def steer_label(steer: dict[str, Any]) -> str:
    """What steered the searches, as said in every output."""
    if steer.get("oracle"):
        return f"ORACLE: the grading tests were visible to the search ({steer['search_tests']})"
    return f"search steered by: {steer['search_tests']}"


def event_line(event: dict[str, Any]) -> str | None:
    """One line for a progress event (``None``: nothing to say)."""
    kind = event["event"]
    if kind == "eval_started":
        skipped = f", {event['skipped']} already finished" if event["skipped"] else ""
        order = ", longest first" if event.get("order") == "longest_first" else ""
        return (
            f"eval {event['out']}: {event['todo']} of {event['total']} instances to run{skipped} "
            f"on {event['executor']} ({event['workers']} workers{order}); "
            f"{steer_label(event['steer'])}"
        )
    if kind == "instance_finished":
        row = event["row"]
        eta = event["eta_seconds"]
        reason = f"  {row['reason']}" if row["status"] == "error" else ""
        oracle = " [oracle]" if row.get("oracle") else ""
        return (
            f"[{event['done']:>{len(str(event['total']))}}/{event['total']}] "
            f"{row['instance_id']}  {row['status']}{oracle}  ({row['seconds']:.1f}s, "
            f"{row['test_runs']} test runs){reason}  | resolved {event['resolved']}, done "
            f"{event['done']}/{event['total']}, ETA {'-' if eta is None else duration(eta)}"
        )
    return None


def _frac(tests: dict[str, Any] | None, key: str) -> str:
    part = (tests or {}).get(key)
    if not part:
        return "-"
    ok = len(part["success"])
    return f"{ok}/{ok + len(part['failure'])}"


def summary_lines(out: Any) -> list[str]:
    """The terminal table of an ``EvalOutcome``: one row per finished instance, then totals."""
    rows, summary = out.rows, out.summary
    oracle = " [oracle]" if summary["oracle"] else ""
    lines: list[str] = []
    if rows:
        width = max(len(r["instance_id"]) for r in rows)
        lines.append(
            f"{'instance':<{width}}  {'status':<10}  {'f2p':<6} {'p2p':<6} runs  seconds{oracle}"
        )
        for r in rows:
            lines.append(
                f"{r['instance_id']:<{width}}  {r['status']:<10}  "
                f"{_frac(r.get('tests'), 'FAIL_TO_PASS'):<6} "
                f"{_frac(r.get('tests'), 'PASS_TO_PASS'):<6} {r['test_runs']:>4}  "
                f"{r['seconds']:>7.1f}" + (f"  {r['reason']}" if r["status"] == "error" else "")
            )
        lines.append("")
    lines.append(
        f"resolved {summary['resolved']}/{summary['total']} "
        f"({100 * summary['resolved_rate']:.1f}%), unresolved {summary['unresolved']}, "
        f"error {summary['error']}"
        + (f", not run {summary['not_run']}" if summary["not_run"] else "")
        + f"; {summary['test_runs']} test runs, {summary['tokens']} tokens, "
        f"${summary['usd']:.2f}, {summary['wall_seconds']:.1f}s{oracle}"
    )
    lines.append(steer_label(summary["steer"]))
    lines.append(f"eval directory: {out.out} (results.jsonl, predictions.jsonl, summary.json)")
    if out.interrupted:
        lines.append(f"interrupted: continue with `treesearch eval --resume {out.out}`")
    return lines
