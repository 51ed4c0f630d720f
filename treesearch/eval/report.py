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


def steer_label(steer: dict[str, Any], mode: str = "search") -> str:
    """What steered the searches, as said in every output."""
    if mode != "search":
        return {
            "gold": "no search: each instance's own gold patch graded (--gold)",
            "empty": "no search: each base commit graded without a patch (--empty)",
            "predictions": "no search: the predictions file's patches graded",
        }.get(mode, f"no search ({mode})")
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
            f"{steer_label(event['steer'], event.get('mode', 'search'))}"
        )
    if kind == "instance_finished":
        row = event["row"]
        eta = event["eta_seconds"]
        reason = f"  {row['reason']}" if row["status"] == "error" else ""
        repro = row.get("reproduction")
        if row.get("no_signal"):
            why = (
                "no reproduction test kept"
                if repro is not None and not repro.get("kept")
                else "the root already passed every search test"
            )
            reason = f"  NO SIGNAL: {why}" + reason
        elif repro is not None:
            reason = f"  (reproduced by {len(repro['kept'])} test file(s))" + reason
        strict = row.get("strict") or {}
        if row["status"] == "resolved" and strict and not strict.get("resolved"):
            reason += f"  (strict: not resolved: {strict.get('reason')})"
        grade = row.get("grade_seconds")
        graded = f", graded in {grade:.1f}s" if grade is not None else ""
        oracle = " [oracle]" if row.get("oracle") else ""
        return (
            f"[{event['done']:>{len(str(event['total']))}}/{event['total']}] "
            f"{row['instance_id']}  {row['status']}{oracle}  ({row['seconds']:.1f}s, "
            f"{row['test_runs']} test runs{graded}){reason}  | resolved {event['resolved']}, done "
            f"{event['done']}/{event['total']}, ETA {'-' if eta is None else duration(eta)}"
        )
    return None


def _frac(tests: dict[str, Any] | None, key: str) -> str:
    part = (tests or {}).get(key)
    if not part:
        return "-"
    ok = len(part["success"])
    return f"{ok}/{ok + len(part['failure'])}"


def _strict(row: dict[str, Any]) -> str:
    strict = row.get("strict")
    if not strict:
        return "-"
    return "yes" if strict.get("resolved") else "no"


def summary_lines(out: Any) -> list[str]:
    """The terminal table of an ``EvalOutcome``: one row per finished instance, then totals."""
    rows, summary = out.rows, out.summary
    oracle = " [oracle]" if summary["oracle"] else ""
    lines: list[str] = []
    if rows:
        width = max(len(r["instance_id"]) for r in rows)
        lines.append(
            f"{'instance':<{width}}  {'status':<10}  {'strict':<6} {'f2p':<6} {'p2p':<6} "
            f"runs  seconds  grade s{oracle}"
        )
        for r in rows:
            note = f"  {r['reason']}" if r["status"] == "error" else ""
            if r.get("no_signal"):
                note = "  no signal" + note
            grade = r.get("grade_seconds")
            lines.append(
                f"{r['instance_id']:<{width}}  {r['status']:<10}  {_strict(r):<6} "
                f"{_frac(r.get('tests'), 'FAIL_TO_PASS'):<6} "
                f"{_frac(r.get('tests'), 'PASS_TO_PASS'):<6} {r['test_runs']:>4}  "
                f"{r['seconds']:>7.1f}  {'-' if grade is None else f'{grade:.1f}':>7}" + note
            )
        lines.append("")
    lines.append(
        f"resolved {summary['resolved']}/{summary['total']} "
        f"({100 * summary['resolved_rate']:.1f}%), unresolved {summary['unresolved']}, "
        f"error {summary['error']}"
        + (f", not run {summary['not_run']}" if summary["not_run"] else "")
        + (f", NO SIGNAL {summary['no_signal']}" if summary.get("no_signal") else "")
        + f"; strict: resolved {summary.get('strict_resolved', 0)}"
        + f"; {summary['test_runs']} test runs, {summary['tokens']} tokens, "
        f"${summary['usd']:.2f}, {summary['wall_seconds']:.1f}s{oracle}"
    )
    lines.append(steer_label(summary["steer"], summary.get("mode", "search")))
    repro = summary.get("reproduction")
    if repro:  # search.reproduce
        lines.append(
            f"reproduction tests: kept for {repro['kept']} of {repro['rows']} instance(s); "
            f"{repro['passes_with_gold']} of {repro['checked_with_gold']} pass with the gold patch"
        )
    if summary.get("no_signal"):
        lines.append(
            f"{summary['no_signal']} instance(s) had no signal: their root already passed every "
            "search test, so the search stopped at once (give it one: an oracle run for an upper "
            "bound, a search-test command per instance, or reproduction tests; see the README)"
        )
    lines.append(
        f"eval directory: {out.out} (results.jsonl, predictions.jsonl, report.json, summary.json)"
    )
    if out.interrupted:
        lines.append(f"interrupted: continue with `treesearch eval --resume {out.out}`")
    return lines
