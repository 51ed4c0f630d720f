"""Where a comparison keeps things: the cells' eval directories, and atomic writes."""

from __future__ import annotations

import json
from pathlib import Path

from treesearch._atomic import write_text

__all__ = ["atomic_write", "cell_dir", "cell_finished"]


def cell_dir(out: Path, contender: str, seed: int) -> Path:
    """The eval directory of one contender at one seed."""
    return out / "cells" / contender / f"seed-{seed}"


def cell_finished(path: Path) -> bool:
    """The cell's eval batch ran to its end (every instance has a row)."""
    try:
        summary = json.loads((path / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(summary, dict)
        and summary.get("status") == "finished"
        and summary.get("not_run") == 0
    )


def atomic_write(path: Path, text: str) -> None:
    """A compare's result file, flushed to disk before it replaces the old one."""
    write_text(path, text, fsync=True)
