"""Eval and compare pages: the result tables, the anytime curves, links to each run's page.

An eval directory (``treesearch eval``: ``eval.yaml``, ``results.jsonl``, ``summary.json``,
``instances/<id>/``) and a compare directory (``treesearch compare``: ``compare.json``, whose
``outcomes`` name each run directory relative to it) are drawn by the same page script from
tables and curves built here. Each run directory linked to gets its own ``report.html`` when it
has none yet.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from treesearch.errors import TreesearchError
from treesearch.report.html import page_html, write_page
from treesearch.report.run_page import PAGE, write_run_page
from treesearch.runs import read_events

__all__ = ["compare_page_data", "eval_page_data", "first_plausible", "write_batch_page"]

PLAUSIBLE = 1.0 - 1e-9
"""A node this good passes every test that steers the search: a plausible patch."""


def _json(path: Path) -> Any:
    with contextlib.suppress(OSError, ValueError):
        return json.loads(path.read_text(encoding="utf-8"))
    return None


def _jsonl(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return rows
    for line in lines:
        with contextlib.suppress(ValueError):
            row = json.loads(line)
            if isinstance(row, dict):
                rows.append(row)
    return rows


def write_batch_page(kind: str, out: Path) -> tuple[Path, list[str]]:
    """Write ``report.html`` of an eval (``kind`` ``eval``) or compare directory ``out``, and
    the run pages it links to that are missing; returns its path and notes."""
    data = eval_page_data(out) if kind == "eval" else compare_page_data(out)
    title = f"treesearch {kind} {out.resolve().name}"
    path = write_page(out / PAGE, page_html("batch", title, data))
    return path, data["notes"]


def _run_pages(out: Path, run_dirs: list[str]) -> tuple[dict[str, str], list[str]]:
    """``{run_dir: link}`` for each run directory with a page (written here when missing)."""
    links: dict[str, str] = {}
    notes: list[str] = []
    for rel in dict.fromkeys(run_dirs):
        path = out / rel
        if not (path / "events.jsonl").is_file():
            notes.append(f"{rel}: not a run directory (no events.jsonl): no page to link")
            continue
        if not (path / PAGE).is_file():
            try:
                _written, page_notes = write_run_page(path)
            except (TreesearchError, OSError) as exc:
                notes.append(f"{rel}: its run page could not be written: {exc}")
                continue
            notes.extend(f"{rel}: {n}" for n in page_notes if not n.startswith("diffs unavail"))
            if any(n.startswith("diffs unavail") for n in page_notes):
                notes.append(f"{rel}: its page was written without diffs (the store is gone)")
        links[rel] = f"{rel.rstrip('/')}/{PAGE}"
    return links, notes


def first_plausible(run_dir: Path) -> dict[str, Any]:
    """From a run's events: test runs and tokens spent when the first plausible node (every
    steering test passing) was found (``None`` each when none was), and the totals spent."""
    try:
        events = read_events(run_dir / "events.jsonl").events
    except TreesearchError:
        return {"test_runs": None, "tokens": None, "total_test_runs": 0, "total_tokens": 0}
    runs = tokens = 0
    found: dict[str, Any] = {"test_runs": None, "tokens": None}
    for ev in events:
        kind = ev.get("event")
        if kind not in ("root", "expansion", "completed"):
            continue
        runs += int(ev.get("test_runs", 0))
        tokens += int(ev.get("tokens", 0))
        if kind == "completed":  # a partial node's whole run: never a plausible one
            continue
        score = ev.get("score") if kind == "root" else (ev.get("node") or {}).get("score")
        if found["test_runs"] is None and score is not None and float(score) >= PLAUSIBLE:
            found = {"test_runs": runs, "tokens": tokens}
    return {**found, "total_test_runs": runs, "total_tokens": tokens}


def curve(values: list[float | None], total: int, end: float) -> list[list[float]]:
    """The anytime curve: ``[x, fraction of the total reached by x]``, from 0 to ``end``."""
    xs = sorted(v for v in values if v is not None)
    points = [[0.0, 0.0]]
    for i, x in enumerate(xs):
        points.append([float(x), (i + 1) / total if total else 0.0])
    points.append([float(max(end, xs[-1] if xs else 0.0)), len(xs) / total if total else 0.0])
    return points


def _repro(row: dict[str, Any]) -> str:
    """Which reproduction tests (``search.reproduce``) steered the search, for its cell."""
    kept = (row.get("reproduction") or {}).get("kept") or []
    return "reproduced: " + ", ".join(str(k.get("from")) for k in kept) if kept else ""


def _frac(tests: dict[str, Any] | None, key: str) -> str:
    part = (tests or {}).get(key)
    if not isinstance(part, dict):
        return "-"
    ok = len(part.get("success") or [])
    return f"{ok}/{ok + len(part.get('failure') or [])}"


def eval_page_data(out: Path) -> dict[str, Any]:
    rows = _jsonl(out / "results.jsonl")
    summary = _json(out / "summary.json") or {}
    if not rows and not summary:
        raise TreesearchError(
            f"{out}: no results.jsonl rows and no summary.json: the eval has not finished any "
            "instance yet"
        )
    searched = [r for r in rows if r.get("run_dir") and r.get("mode", "search") == "search"]
    links, notes = _run_pages(out, [r["run_dir"] for r in searched])
    table_rows = []
    plausible: list[float | None] = []
    tokens: list[float | None] = []
    end_runs = end_tokens = 0
    for r in rows:
        rel = r.get("run_dir")
        fp = first_plausible(out / rel) if rel and r.get("mode", "search") == "search" else {}
        plausible.append(fp.get("test_runs"))
        tokens.append(fp.get("tokens"))
        end_runs = max(end_runs, fp.get("total_test_runs") or 0)
        end_tokens = max(end_tokens, fp.get("total_tokens") or 0)
        iid = r.get("instance_id")
        table_rows.append(
            [
                {"text": iid, "href": links.get(rel or ""), "key": iid},
                {"text": r.get("status"), "cls": f"status-{r.get('status')}"},
                _yes((r.get("strict") or {}).get("resolved") if r.get("strict") else None),
                {"text": "NO SIGNAL", "cls": "status-error"} if r.get("no_signal") else _repro(r),
                _frac(r.get("tests"), "FAIL_TO_PASS"),
                _frac(r.get("tests"), "PASS_TO_PASS"),
                r.get("test_runs"),
                fp.get("test_runs"),
                r.get("tokens"),
                r.get("usd"),
                r.get("seconds"),
                r.get("grade_seconds"),
                r.get("best_score"),
                r.get("stop_reason"),
                r.get("reason") or "",
            ]
        )
    total = len(rows)
    name = out.resolve().name
    curves = [
        {
            "title": "Anytime: instances with a plausible patch by test runs spent",
            "x_label": "test runs",
            "y_label": "fraction of instances",
            "lines": {name: curve(plausible, total, end_runs)},
        }
    ]
    if end_tokens:
        curves.append(
            {
                "title": "Anytime: instances with a plausible patch by tokens spent",
                "x_label": "tokens",
                "y_label": "fraction of instances",
                "lines": {name: curve(tokens, total, end_tokens)},
            }
        )
    keys = (
        "resolved",
        "strict_resolved",
        "unresolved",
        "error",
        "no_signal",
        "not_run",
        "total",
        "test_runs",
        "tokens",
        "usd",
        "grade_seconds",
    )
    totals = [[k.replace("_", " "), summary.get(k)] for k in keys if k in summary]
    if "wall_seconds" in summary:
        totals.append(["wall seconds", summary["wall_seconds"]])
    steer = summary.get("steer") or {}
    oracle = " ORACLE: the grading tests were visible to the search" if steer.get("oracle") else ""
    return {
        "kind": "eval",
        "subtitle": (
            f"{summary.get('status', '?')}: resolved {summary.get('resolved', '-')}/"
            f"{summary.get('total', total)}; search steered by "
            f"{steer.get('search_tests', '-')}{oracle}"
        ),
        "tables": [
            {"title": "Totals", "id": "totals", "columns": ["", "value"], "rows": totals},
            {
                "title": "Per instance",
                "id": "instances",
                "note": "status: SWE-bench's own grade; strict: resolved by our stricter reading "
                "(a listed test skipped or never run is no pass); signal: NO SIGNAL when the "
                "root already passed every steering test, so the search had nothing to climb; "
                "f2p/p2p: FAIL_TO_PASS and PASS_TO_PASS tests passing when graded; "
                "first plausible: test runs spent when the search first passed every "
                "steering test. The instance name links to its run's page.",
                "columns": [
                    "instance",
                    "status",
                    "strict",
                    "signal",
                    "f2p",
                    "p2p",
                    "test runs",
                    "first plausible",
                    "tokens",
                    "USD",
                    "seconds",
                    "grade s",
                    "best score",
                    "stop",
                    "reason",
                ],
                "rows": table_rows,
            },
        ],
        "curves": curves,
        "notes": notes,
    }


def _ci(c: dict[str, Any], key: str) -> str:
    ci = c.get(f"{key}_ci")
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and None not in ci:
        return f"[{100 * float(ci[0]):.1f}%, {100 * float(ci[1]):.1f}%]"
    return "-"


def _pct(v: Any) -> Any:
    return f"{100 * float(v):.1f}%" if isinstance(v, (int, float)) else v


def compare_page_data(out: Path) -> dict[str, Any]:
    data = _json(out / "compare.json")
    if not isinstance(data, dict):
        raise TreesearchError(f"{out / 'compare.json'} is missing or not a JSON object")
    contenders = [c for c in data.get("contenders") or [] if isinstance(c, dict)]
    outcomes = [o for o in data.get("outcomes") or [] if isinstance(o, dict)]
    links, notes = _run_pages(out, [str(o["run_dir"]) for o in outcomes if o.get("run_dir")])
    tables = [
        {
            "title": "Per contender",
            "id": "contenders",
            "note": "rates over instances, with 95% bootstrap intervals; means to the first "
            "plausible patch are over the runs that found one",
            "columns": [
                "contender",
                "runs",
                "resolved",
                "resolved rate",
                "95% CI",
                "plausible",
                "plausible rate",
                "95% CI",
                "errors",
                "test runs to 1st plausible",
                "tokens to 1st plausible",
                "USD to 1st plausible",
                "wall s",
            ],
            "rows": [
                [
                    c.get("name"),
                    c.get("n"),
                    c.get("resolved"),
                    _pct(c.get("resolved_rate")),
                    _ci(c, "resolved"),
                    c.get("plausible"),
                    _pct(c.get("plausible_rate")),
                    _ci(c, "plausible"),
                    c.get("errors"),
                    c.get("mean_test_runs_to_first_plausible"),
                    c.get("mean_tokens_to_first_plausible"),
                    c.get("mean_cost_usd_to_first_plausible"),
                    c.get("mean_wall_seconds"),
                ]
                for c in contenders
            ],
        },
        {
            "title": "Pairs",
            "id": "pairs",
            "note": "wins/losses/ties of a against b over instances, with an exact paired test",
            "columns": ["a", "b", "wins", "losses", "ties", "p-value", "test"],
            "rows": [
                [p.get(k) for k in ("a", "b", "wins", "losses", "ties", "p_value", "test")]
                for p in data.get("pairs") or []
                if isinstance(p, dict)
            ],
        },
        {
            "title": "Runs",
            "id": "outcomes",
            "note": "each run's status; the instance name links to the run's page",
            "columns": [
                "contender",
                "instance",
                "seed",
                "status",
                "resolved",
                "plausible",
                "test runs",
                "1st plausible at",
                "tokens",
                "wall s",
            ],
            "rows": [
                [
                    o.get("contender"),
                    {
                        "text": o.get("instance_id"),
                        "href": links.get(str(o.get("run_dir"))),
                        "key": f"{o.get('contender')}/{o.get('instance_id')}/{o.get('seed')}",
                    },
                    o.get("seed"),
                    {"text": o.get("status"), "cls": f"status-{o.get('status')}"},
                    _yes(o.get("resolved")),
                    _yes(o.get("plausible")),
                    o.get("test_runs"),
                    o.get("test_runs_to_first_plausible"),
                    o.get("tokens"),
                    o.get("wall_seconds"),
                ]
                for o in outcomes
            ],
        },
    ]
    curves = []
    labels = {"test_runs": "test runs", "tokens": "tokens"}
    for key, lines in (data.get("curves") or {}).items():
        if not isinstance(lines, dict) or not any(lines.values()):
            continue
        curves.append(
            {
                "title": f"Anytime: fraction of instances solved by {labels.get(key, key)} spent",
                "x_label": labels.get(key, key),
                "y_label": "fraction of instances",
                "lines": {str(k): v for k, v in lines.items() if isinstance(v, list)},
            }
        )
    spec = {k: data.get(k) for k in ("spec", "budget", "seeds") if k in data}
    n_inst = len(data.get("instances") or [])
    return {
        "kind": "compare",
        "subtitle": (
            f"{len(contenders)} contenders x {n_inst} instances x "
            f"{len(data.get('seeds') or [])} seeds at one budget: "
            + json.dumps(data.get("budget"), sort_keys=True)
        ),
        "tables": tables,
        "curves": curves,
        "spec": spec,
        "notes": notes,
    }


def _yes(v: Any) -> str:
    return "-" if v is None else ("yes" if v else "no")
