"""Self-contained HTML report pages (``report.html``) of runs, evals and compares.

``write_report(DIR)`` tells which kind of directory ``DIR`` is and writes (or rewrites) its page;
``write_run_page`` is what ``treesearch run`` calls at the end of a search, with its open store.
Pages need no network at view time: d3 (vendored, ISC licence) and the page's own script and
style are inlined, and the data are embedded as JSON. Every drawn search-tree node carries
``data-node="<tree hash>"``; every anytime curve is an SVG path with ``data-contender``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from treesearch.errors import TreesearchError
from treesearch.report.batch_page import write_batch_page
from treesearch.report.run_page import PAGE, NoTreeYet, write_run_page

__all__ = [
    "PAGE",
    "ReportError",
    "Written",
    "detect_kind",
    "try_write_batch_report",
    "try_write_report",
    "write_report",
    "write_run_page",
]


class ReportError(TreesearchError):
    """A page could not be written (not a run, eval or compare directory, or unreadable)."""


@dataclass
class Written:
    path: Path
    kind: str
    """``run``, ``eval`` or ``compare``."""
    notes: list[str] = field(default_factory=list)
    """What the page could not show (e.g. diffs whose store is gone)."""


def detect_kind(path: Path) -> str:
    """``compare``, ``eval`` or ``run`` by the files ``path`` holds; ``ReportError`` otherwise."""
    if not path.is_dir():
        raise ReportError(f"{path} is not a folder: give a run, eval or compare directory")
    if (path / "compare.json").is_file():
        return "compare"
    if (path / "results.jsonl").is_file() or (path / "eval.yaml").is_file():
        return "eval"
    if (path / "events.jsonl").is_file() and (path / "config.yaml").is_file():
        return "run"
    raise ReportError(
        f"{path} is not a run directory (events.jsonl + config.yaml), an eval directory "
        "(results.jsonl / eval.yaml) or a compare directory (compare.json)"
    )


def write_report(path: Path) -> Written:
    """Write ``report.html`` into the run, eval or compare directory ``path``."""
    path = Path(path)
    kind = detect_kind(path)
    try:
        if kind == "run":
            page, notes = write_run_page(path)
        else:
            page, notes = write_batch_page(kind, path)
    except OSError as exc:
        raise ReportError(f"cannot write {path / PAGE}: {exc}") from exc
    return Written(page, kind, notes)


def try_write_report(run_dir: Path, store: object = None) -> str | None:
    """Write a run's page at the end of its search; never raises. Returns the warning to give
    (``None`` when the page was written, or when the run has no root node yet: nothing to draw).
    A page that cannot be written never hides the search's result."""
    try:
        write_run_page(Path(run_dir), store=store)
    except Exception as exc:  # noqa: BLE001 - the run's result matters more than its page
        if isinstance(exc, NoTreeYet):
            return None
        return f"report.html was not written: {type(exc).__name__}: {exc}"
    return None


def try_write_batch_report(path: Path) -> str | None:
    """Write an eval's or a compare's page at the end of the batch; never raises. Returns the
    warning to give (``None`` when the page was written): a page that cannot be written never
    hides the batch's results."""
    try:
        write_report(Path(path))
    except Exception as exc:  # noqa: BLE001 - the batch's results matter more than its page
        return f"report.html was not written: {type(exc).__name__}: {exc}"
    return None
