"""The order in which a batch starts its instances (its results are written in the instances'
order whatever the order they ran in).

With fewer workers than instances, the batch ends when its last instance ends: one started last
that runs long keeps one worker busy while the others sit idle. Started longest first (by the
wall seconds an earlier eval of the same instances recorded), the short ones come last and fill
the gaps. Instances that eval did not record may be long: they start first, in input order.
Pure functions, apart from ``read_durations`` (which reads the earlier results file).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from treesearch.errors import TreesearchError
from treesearch.eval.instances import Instance

__all__ = ["DurationsError", "longest_first", "read_durations"]


class DurationsError(TreesearchError):
    """The earlier eval named for the durations cannot be read."""


def results_file(path: str | Path) -> Path:
    """``results.jsonl`` of an eval directory, or ``path`` itself when it is a file."""
    p = Path(path)
    return p / "results.jsonl" if p.is_dir() else p


def read_durations(path: str | Path) -> dict[str, float]:
    """Wall seconds per instance id from an earlier eval (its directory or its
    ``results.jsonl``). A row without usable ``seconds`` is left out; a torn last line too."""
    file = results_file(path)
    try:
        text = file.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise DurationsError(
            f"--durations-from {path}: cannot read {file} ({exc.strerror}): give an earlier eval "
            "directory or its results.jsonl"
        ) from None
    out: dict[str, float] = {}
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            if n == len(lines):
                continue  # a torn last line (that eval was killed while writing it)
            raise DurationsError(
                f"{file}:{n}: not a JSON row: give an eval directory's results.jsonl"
            ) from None
        if not isinstance(row, dict) or not isinstance(row.get("instance_id"), str):
            raise DurationsError(f"{file}:{n}: instance_id: missing (not a results.jsonl row)")
        seconds = row.get("seconds")
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            continue
        if math.isfinite(seconds) and seconds >= 0:
            out[row["instance_id"]] = float(seconds)
    return out


def longest_first(items: Sequence[Instance], durations: Mapping[str, float]) -> list[Instance]:
    """``items`` in the order to start them: those without a duration first (input order), then
    the others longest first (equal durations in input order)."""
    unknown = [i for i in items if i.instance_id not in durations]
    known = [i for i in items if i.instance_id in durations]
    known.sort(key=lambda i: -durations[i.instance_id])  # stable: ties keep the input order
    return unknown + known
