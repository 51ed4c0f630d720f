"""A fault-localisation ranking as text a person reads, or as plain data (``treesearch localize``).

Pure functions: the CLI prints what they return.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from treesearch.agents.mutation.localize import Localization

__all__ = ["localization_data", "localization_text"]


def _line_text(workspace: Path, path: str, line: int) -> str:
    try:
        with open(workspace / path, encoding="utf-8", errors="replace") as handle:
            for number, text in enumerate(handle, start=1):
                if number == line:
                    return text.strip()
    except OSError:
        return ""
    return ""


def localization_data(
    loc: Localization, top: int, workspace: str | os.PathLike[str]
) -> dict[str, Any]:
    """The ranking's first ``top`` lines (plus ties) with their source text, as plain data."""
    root = Path(workspace)
    data = loc.to_json(limit=0)
    data.pop("top", None)
    data["failing_tests"] = list(loc.failing_tests)
    data["lines"] = [
        {
            "rank": rank,
            "path": s.path,
            "line": s.line,
            "score": round(s.score, 4),
            "failed": s.failed,
            "passed": s.passed,
            "in_traceback": s.in_traceback,
            "near_call": s.near_call,
            "text": _line_text(root, s.path, s.line),
        }
        for rank, s in enumerate(loc.top(top), start=1)
    ]
    return data


def localization_text(loc: Localization, top: int, workspace: str | os.PathLike[str]) -> str:
    """A table: rank, score, ``path:line``, failing/passing tests that run the line, traceback
    and assertion-call marks, and the line's source."""
    data = localization_data(loc, top, workspace)
    how = f"{loc.method} ({loc.formula})" if loc.method == "coverage" else loc.method
    out = [f"{loc.failing} failing, {loc.passing} passing tests; ranked by {how}"]
    if loc.note:
        out.append(f"note: {loc.note}")
    if not data["lines"]:
        out.append("no suspicious line")
        return "\n".join(out)
    width = max(len(f"{row['path']}:{row['line']}") for row in data["lines"])
    out.append(f"{'rank':>4}  {'score':>6}  {'where':<{width}}  {'ef':>3} {'ep':>3}  marks  source")
    for row in data["lines"]:
        where = f"{row['path']}:{row['line']}"
        marks = ("T" if row["in_traceback"] else "-") + ("C" if row["near_call"] else "-")
        out.append(
            f"{row['rank']:>4}  {row['score']:>6.3f}  {where:<{width}}  "
            f"{row['failed']:>3} {row['passed']:>3}  {marks:<5}  {row['text']}"
        )
    out.append(
        "ef/ep: failing/passing tests that run the line; T: in a failing traceback; "
        "C: in a function a failing assertion calls"
    )
    return "\n".join(out)
