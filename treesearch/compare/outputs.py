"""What a comparison says: ``compare.json``, ``compare.csv`` and the terminal table (text only).

Every number is read back from the cells' eval directories (``results.jsonl`` rows and each
run's ``events.jsonl``), so it can be traced and recomputed: ``build_compare`` does that, and
``write_outputs`` is the one place the compare directory's result files are written.

Definitions (also in ``compare.json``'s ``notes``):
- resolved: the held-out grading tests pass (``treesearch eval``'s status ``resolved``);
  plausible: the search found a node on which every search test passes (events: a perfect score).
- An ``error`` cell (a broken environment, a grading run that could not run) is never a score:
  it is counted in ``errors``, is neither resolved nor plausible, and the rates count it as not
  resolved (as ``treesearch eval``'s ``resolved_rate``); a pair leaves out an instance where
  either contender has an error cell (``excluded``).
- Several seeds: each instance counts as the fraction of its seeds resolved; the bootstrap
  interval resamples instances; a pair compares those per-instance fractions (sign test).
"""

from __future__ import annotations

import csv
import io
import json
import os
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from treesearch import __version__
from treesearch.compare.curves import curve, safe_first_plausible
from treesearch.compare.layout import atomic_write, cell_dir, cell_finished
from treesearch.compare.stats import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    bootstrap_ci,
    paired_counts,
    sign_test_p,
)
from treesearch.report import try_write_batch_report

__all__ = ["CSV_FIELDS", "build_compare", "table_lines", "write_outputs"]

CSV_FIELDS = (
    "contender",
    "n",
    "cells",
    "resolved",
    "resolved_rate",
    "resolved_ci_lo",
    "resolved_ci_hi",
    "plausible",
    "plausible_rate",
    "plausible_ci_lo",
    "plausible_ci_hi",
    "errors",
    "mean_test_runs_to_first_plausible",
    "mean_tokens_to_first_plausible",
    "mean_cost_usd_to_first_plausible",
    "mean_wall_seconds",
    "oracle",
)

NOTES = [
    "resolved: every FAIL_TO_PASS and PASS_TO_PASS grading test passes (held-out tests, run "
    "in a grading copy); plausible: the search found a node on which every search test passes.",
    "An error cell is never a score: it is counted in errors, is neither resolved nor "
    "plausible (rates count it as not resolved, as treesearch eval does), and pairs leave out "
    "any instance where either contender has an error cell (excluded).",
    "Several seeds: an instance counts as the fraction of its seeds resolved (or plausible). "
    "The 95% interval is a percentile bootstrap over instances "
    f"({BOOTSTRAP_RESAMPLES} resamples, random.Random({BOOTSTRAP_SEED})). A pair's wins/"
    "losses/ties compare per-instance fractions; p is the exact two-sided sign test on wins vs "
    "losses (with one seed: the exact McNemar test on the discordant instances).",
    "Means to the first plausible patch are over the runs that found one; tokens and USD only "
    "where an LLM ran.",
    "Curves: fraction of instances resolved (or plausible) once x test runs (or tokens) were "
    "spent, counting a run as solved at the spend of its first plausible node (a resolved run "
    "without one: at its total spend). Searches stop at their first plausible node and no "
    "policy looks at the budget left, so the curve at x is what a budget of x would give.",
]


# ------------------------------------------------------------------------------ reading


def _read_rows(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return rows
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a torn last line: that instance was not committed
        if isinstance(row, dict) and "instance_id" in row:
            rows.append(row)
    return rows


def _cell_steer(cell: Path) -> dict[str, Any] | None:
    try:
        meta = yaml.safe_load((cell / "eval.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    return meta.get("steer") if isinstance(meta, dict) else None


def collect(target: Path, spec: Any, instance_ids: Sequence[str]) -> list[dict[str, Any]]:
    """One outcome per finished (contender, instance, seed), in the SPEC's order."""
    wanted = set(instance_ids)
    outcomes: list[dict[str, Any]] = []
    for contender in spec.contenders:
        for seed in spec.seeds:
            cell = cell_dir(target, contender.name, seed)
            rows = {r["instance_id"]: r for r in _read_rows(cell / "results.jsonl")}
            for iid in instance_ids:
                row = rows.get(iid)
                if row is None or iid not in wanted:
                    continue
                outcomes.append(_outcome(target, cell, contender.name, seed, row))
    return outcomes


def _outcome(
    target: Path, cell: Path, contender: str, seed: int, row: Mapping[str, Any]
) -> dict[str, Any]:
    status = str(row.get("status"))
    run_dir = cell / row["run_dir"] if row.get("run_dir") else None
    first, problem = (None, None)
    if run_dir is not None and status != "error":
        first, problem = safe_first_plausible(run_dir)
    error = status == "error"
    return {
        "contender": contender,
        "instance_id": row["instance_id"],
        "seed": seed,
        "status": status,
        "resolved": status == "resolved",
        "plausible": None if error else first is not None,
        "test_runs": int(row.get("test_runs") or 0),
        "test_runs_to_first_plausible": first.test_runs if first else None,
        "tokens": int(row.get("tokens") or 0),
        "tokens_to_first_plausible": first.tokens if first else None,
        "usd": float(row.get("usd") or 0.0),
        "usd_to_first_plausible": first.usd if first else None,
        "wall_seconds": float(row.get("seconds") or 0.0),
        "oracle": bool(row.get("oracle")),
        "reason": row.get("reason") or problem or "",
        "run_dir": os.path.relpath(run_dir, target) if run_dir is not None else None,
    }


# ------------------------------------------------------------------------------ numbers


def _mean(values: Sequence[float]) -> float | None:
    return round(statistics.fmean(values), 4) if values else None


def _per_instance(rows: Sequence[Mapping[str, Any]], key: str) -> dict[str, float]:
    """Instance -> fraction of its seeds with ``key`` true (an error counts as false)."""
    seen: dict[str, list[bool]] = {}
    for r in rows:
        seen.setdefault(r["instance_id"], []).append(bool(r[key]))
    return {iid: sum(v) / len(v) for iid, v in seen.items()}


def contender_summary(name: str, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    resolved = _per_instance(rows, "resolved")
    plausible = _per_instance(rows, "plausible")
    hits = [r for r in rows if r["plausible"]]
    llm = any(r["tokens"] for r in rows)
    r_ci = bootstrap_ci(list(resolved.values()))
    p_ci = bootstrap_ci(list(plausible.values()))
    return {
        "name": name,
        "n": len(resolved),
        "cells": len(rows),
        "resolved": sum(1 for r in rows if r["resolved"]),
        "resolved_rate": _mean(list(resolved.values())) or 0.0,
        "resolved_ci": list(r_ci) if r_ci else None,
        "plausible": len(hits),
        "plausible_rate": _mean(list(plausible.values())) or 0.0,
        "plausible_ci": list(p_ci) if p_ci else None,
        "errors": sum(1 for r in rows if r["status"] == "error"),
        "mean_test_runs_to_first_plausible": _mean(
            [r["test_runs_to_first_plausible"] for r in hits]
        ),
        "mean_tokens_to_first_plausible": (
            _mean([r["tokens_to_first_plausible"] for r in hits]) if llm else None
        ),
        "mean_cost_usd_to_first_plausible": (
            _mean([r["usd_to_first_plausible"] for r in hits]) if llm else None
        ),
        "mean_wall_seconds": _mean([r["wall_seconds"] for r in rows]),
        "test_runs": sum(r["test_runs"] for r in rows),
        "tokens": sum(r["tokens"] for r in rows),
        "usd": round(sum(r["usd"] for r in rows), 6),
        "oracle": any(r["oracle"] for r in rows),
    }


def pair_rows(
    names: Sequence[str], by: Mapping[str, Sequence[Mapping[str, Any]]], seeds: int
) -> list[dict[str, Any]]:
    test = (
        "exact McNemar (two-sided binomial on discordant instances)"
        if seeds == 1
        else f"exact sign test on per-instance resolved fractions over {seeds} seeds"
    )
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            broken = {r["instance_id"] for r in (*by[a], *by[b]) if r["status"] == "error"}
            ra = {k: v for k, v in _per_instance(by[a], "resolved").items() if k not in broken}
            rb = {k: v for k, v in _per_instance(by[b], "resolved").items() if k not in broken}
            common = sorted(set(ra) & set(rb))
            wins, losses, ties = paired_counts(ra, rb, common)
            everyone = {r["instance_id"] for r in (*by[a], *by[b])}
            out.append(
                {
                    "a": a,
                    "b": b,
                    "wins": wins,
                    "losses": losses,
                    "ties": ties,
                    "excluded": len(everyone - set(common)),
                    "p_value": round(sign_test_p(wins, losses), 6),
                    "test": test,
                }
            )
    return out


def curves(
    names: Sequence[str],
    by: Mapping[str, Sequence[Mapping[str, Any]]],
    instance_ids: Sequence[str],
    budget: Mapping[str, Any],
) -> dict[str, dict[str, list[list[float]]]]:
    def spend(r: Mapping[str, Any], key: str, want: str) -> float | None:
        if not r[want]:
            return None
        first = r[f"{key}_to_first_plausible"]
        return first if first is not None else r[key]

    out: dict[str, dict[str, list[list[float]]]] = {
        "test_runs": {},
        "tokens": {},
        "plausible_test_runs": {},
    }
    every = [r for rows in by.values() for r in rows]
    end_runs = budget.get("test_runs") or max((r["test_runs"] for r in every), default=0)
    end_tokens = budget.get("tokens") or max((r["tokens"] for r in every), default=0)
    for name in names:
        rows = by[name]
        for curve_key, key, want, end in (
            ("test_runs", "test_runs", "resolved", end_runs),
            ("plausible_test_runs", "test_runs", "plausible", end_runs),
            ("tokens", "tokens", "resolved", end_tokens),
        ):
            if key == "tokens" and not any(r["tokens"] for r in rows):
                continue  # no LLM ran for this contender
            points: dict[str, list[float | None]] = {}
            for r in rows:
                points.setdefault(r["instance_id"], []).append(spend(r, key, want))
            out[curve_key][name] = curve(points, instance_ids, float(end))
    return out


def build_compare(
    target: Path, spec: Any, meta: Mapping[str, Any], *, interrupted: bool = False
) -> dict[str, Any]:
    """``compare.json``'s content, read from the cells' eval directories."""
    ids = list(meta["instance_ids"])
    outcomes = collect(target, spec, ids)
    names = [c.name for c in spec.contenders]
    by = {n: [o for o in outcomes if o["contender"] == n] for n in names}
    cells = []
    for s in spec.seeds:
        for c in spec.contenders:
            path = cell_dir(target, c.name, s)
            cells.append(
                {
                    "contender": c.name,
                    "seed": s,
                    "eval_dir": os.path.relpath(path, target),
                    "finished": cell_finished(path),
                    "steer": _cell_steer(path),
                }
            )
    complete = all(c["finished"] for c in cells)
    return {
        "treesearch": __version__,
        "status": "finished" if complete and not interrupted else "interrupted",
        "spec": spec.to_json(),
        "budget": dict(spec.budget),
        "seeds": list(spec.seeds),
        "instances": ids,
        "executor": meta.get("executor"),
        "contenders": [contender_summary(n, by[n]) for n in names],
        "pairs": pair_rows(names, by, len(spec.seeds)),
        "curves": curves(names, by, ids, spec.budget),
        "cells": cells,
        "outcomes": outcomes,
        "notes": NOTES,
    }


# ------------------------------------------------------------------------------ files


def csv_text(data: Mapping[str, Any]) -> str:
    """``compare.csv``: one row per contender (the terminal table's numbers)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    w.writeheader()
    for c in data["contenders"]:
        r_ci = c["resolved_ci"] or [None, None]
        p_ci = c["plausible_ci"] or [None, None]
        w.writerow(
            {
                "contender": c["name"],
                **{k: c[k] for k in CSV_FIELDS if k in c and k != "contender"},
                "resolved_ci_lo": r_ci[0],
                "resolved_ci_hi": r_ci[1],
                "plausible_ci_lo": p_ci[0],
                "plausible_ci_hi": p_ci[1],
            }
        )
    return buf.getvalue()


def write_outputs(out_dir: Path, data: Mapping[str, Any]) -> list[Path]:
    """Write the comparison's result files into ``out_dir``: ``compare.json``, ``compare.csv``
    and ``report.html`` (a page that cannot be written is a warning in ``compare.json``)."""
    written = []
    for name, text in (
        ("compare.json", json.dumps(data, indent=2, sort_keys=False) + "\n"),
        ("compare.csv", csv_text(data)),
    ):
        atomic_write(out_dir / name, text)
        written.append(out_dir / name)
    warning = try_write_batch_report(out_dir)  # the page reads compare.json: written after it
    if warning is None:
        written.append(out_dir / "report.html")
    else:
        data = {**data, "warnings": [*data.get("warnings", []), warning]}
        atomic_write(out_dir / "compare.json", json.dumps(data, indent=2, sort_keys=False) + "\n")
    return written


# ------------------------------------------------------------------------------ terminal


def _pct(rate: float, ci: Sequence[float] | None) -> str:
    if ci is None:
        return "-"
    return f"{100 * rate:5.1f}% [{100 * ci[0]:5.1f},{100 * ci[1]:5.1f}]"


def _num(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def table_lines(data: Mapping[str, Any], out: Path | str) -> list[str]:
    """The terminal table of a comparison."""
    cons = data["contenders"]
    width = max([len("contender"), *(len(c["name"]) for c in cons)])
    seeds = len(data["seeds"])
    budget = ", ".join(f"{k}={v}" for k, v in data["budget"].items()) or "(defaults)"
    lines = [
        f"{len(cons)} contenders x {len(data['instances'])} instances x {seeds} seed(s); "
        f"budget {budget}",
        "",
        f"{'contender':<{width}}  {'resolved':>8}  {'rate [95% CI]':<22}  {'plausible':>9}  "
        f"{'rate [95% CI]':<22}  {'runs→P':>6}  {'tokens→P':>8}  {'$→P':>7}  {'s/inst':>6}  "
        "errors",
    ]
    for c in cons:
        cells = c["cells"]
        oracle = "  [oracle]" if c.get("oracle") else ""
        lines.append(
            f"{c['name']:<{width}}  {c['resolved']:>3}/{cells:<4}  "
            f"{_pct(c['resolved_rate'], c['resolved_ci']):<22}  {c['plausible']:>4}/{cells:<4}  "
            f"{_pct(c['plausible_rate'], c['plausible_ci']):<22}  "
            f"{_num(c['mean_test_runs_to_first_plausible'], '.1f'):>6}  "
            f"{_num(c['mean_tokens_to_first_plausible'], '.0f'):>8}  "
            f"{_num(c['mean_cost_usd_to_first_plausible'], '.4f'):>7}  "
            f"{_num(c['mean_wall_seconds'], '.1f'):>6}  {c['errors']:>6}{oracle}"
        )
    if data["pairs"]:
        pw = max(len(f"{p['a']} vs {p['b']}") for p in data["pairs"])
        lines += ["", f"{'pair':<{pw}}  wins  losses  ties  excluded  p-value"]
        for p in data["pairs"]:
            lines.append(
                f"{p['a'] + ' vs ' + p['b']:<{pw}}  {p['wins']:>4}  {p['losses']:>6}  "
                f"{p['ties']:>4}  {p['excluded']:>8}  {p['p_value']:.4g}"
            )
        lines.append(f"p-value: {data['pairs'][0]['test']}")
    errors = sum(c["errors"] for c in cons)
    lines.append("")
    lines.append(
        "resolved = held-out grading tests pass; plausible = every search test passes; "
        "runs/tokens/$→P = mean spent to the first plausible patch; s/inst = mean wall seconds"
    )
    if errors:
        lines.append(
            f"WARNING: {errors} error cell(s): never scores (see compare.json outcomes' reason)"
        )
    if any(c.get("oracle") for c in cons):
        lines.append("ORACLE: [oracle] contenders searched with the grading tests visible")
    lines.append(f"compare directory: {out} (compare.json, compare.csv, cells/)")
    if data["status"] != "finished":
        lines.append(f"interrupted: continue with `treesearch compare --resume {out}`")
    return lines
