"""Predictions files in SWE-bench's format: JSON (a list, or a mapping by instance id) or JSONL.

Each prediction has ``instance_id``, ``model_name_or_path`` and ``model_patch`` (a unified diff,
empty or ``null`` when the system made none), as the official harness reads them. Every problem
is one line ``FILE:LINE: field: problem``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from treesearch.errors import ConfigError
from treesearch.eval.instances import json_rows

__all__ = ["Prediction", "PredictionsFileError", "load_predictions"]


class PredictionsFileError(ConfigError):
    """A predictions file that cannot be used (``FILE:LINE: field: problem``)."""


@dataclass(frozen=True)
class Prediction:
    """One system's patch for one instance."""

    instance_id: str
    model_name_or_path: str
    model_patch: str | None
    """``None`` when the file says ``null`` (the harness's ``patch_is_None``)."""


def load_predictions(path: str | Path) -> dict[str, Prediction]:
    """Read and check a predictions file; returns the predictions by instance id.

    Raises:
        PredictionsFileError: unreadable file, bad JSON, a bad field or a duplicate id.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise PredictionsFileError(f"{p}:1: (file): cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise PredictionsFileError(f"{p}:1: (file): not UTF-8 text") from None
    rows: list[tuple[int, Any]]
    if text.lstrip().startswith("{") and not _is_jsonl(text):
        # One prediction, or predictions keyed by instance id (the harness reads both).
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise PredictionsFileError(
                f"{p}:{getattr(exc, 'lineno', 1)}: (file): not valid JSON ({exc})"
            ) from None
        by_id = "instance_id" not in data and all(isinstance(v, Mapping) for v in data.values())
        rows = [(1, r) for r in data.values()] if by_id else [(1, data)]
    else:
        rows = json_rows(p, text, PredictionsFileError)
    if not rows:
        raise PredictionsFileError(f"{p}:1: (file): no predictions in the file")
    out: dict[str, Prediction] = {}
    for line_no, row in rows:
        pred = _prediction(row, f"{p}:{line_no}")
        if pred.instance_id in out:
            raise PredictionsFileError(
                f"{p}:{line_no}: instance_id: duplicate {pred.instance_id!r}; one prediction per "
                "instance"
            )
        out[pred.instance_id] = pred
    return out


def _is_jsonl(text: str) -> bool:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) < 2:
        return False
    try:
        json.loads(lines[0])
    except ValueError:
        return False
    return True


def _prediction(row: Any, where: str) -> Prediction:
    if not isinstance(row, Mapping):
        raise PredictionsFileError(
            f"{where}: (line): must be a JSON object, got {type(row).__name__}"
        )
    iid = row.get("instance_id")
    if not isinstance(iid, str) or not iid:
        raise PredictionsFileError(f"{where}: instance_id: missing or not a string (required)")
    model = row.get("model_name_or_path")
    if not isinstance(model, str) or not model:
        raise PredictionsFileError(
            f"{where}: model_name_or_path: missing or not a string (required by the harness)"
        )
    if "model_patch" not in row:
        raise PredictionsFileError(
            f"{where}: model_patch: missing (give the diff, an empty string or null)"
        )
    patch = row["model_patch"]
    if patch is not None and not isinstance(patch, str):
        raise PredictionsFileError(
            f"{where}: model_patch: must be a unified diff (a string) or null, "
            f"got {type(patch).__name__}"
        )
    return Prediction(iid, model, patch)
