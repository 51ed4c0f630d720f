"""Long texts embedded in a page (diffs, transcripts, test logs), cut to a size with a note.

A page stays a sane size whatever the run: each text has its own cap, and the page as a whole
has a budget; what is cut says so, visibly, on the page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Budget", "cut", "text_item"]

MAX_DIFF = 60_000
MAX_TRANSCRIPT = 40_000
MAX_LOG = 20_000
MAX_PAGE = 15_000_000
"""Characters of embedded texts per page; beyond it, texts are left out with a note."""


def cut(text: str, limit: int, *, tail: bool = False) -> tuple[str, str | None]:
    """``text`` cut to about ``limit`` characters, and the note that says so (``None``: whole).
    ``tail`` keeps the end as well as the start (a test log's summary is at its end)."""
    if len(text) <= limit:
        return text, None
    dropped = len(text) - limit
    if tail:
        head = text[: limit // 2]
        end = text[len(text) - limit // 2 :]
        return (
            f"{head}\n[... {dropped:,} characters left out ...]\n{end}",
            f"cut: {dropped:,} of {len(text):,} characters left out of the middle",
        )
    return text[:limit], f"cut: the first {limit:,} of {len(text):,} characters are shown"


def text_item(text: str | None, note: str | None = None) -> dict[str, Any] | None:
    """The page's form of a text: ``{"text", "note"}`` (``None``: nothing to show)."""
    if text is None and note is None:
        return None
    return {"text": text or "", "note": note}


@dataclass
class Budget:
    """The page's budget of embedded characters."""

    left: int = MAX_PAGE
    refused: int = 0

    def take(self, item: dict[str, Any] | None) -> dict[str, Any] | None:
        """``item`` if it fits in what is left, else the same item without its text."""
        if item is None:
            return None
        size = len(item.get("text") or "")
        if size <= self.left:
            self.left -= size
            return item
        self.refused += 1
        return {
            "text": "",
            "note": f"left out: the page's size limit was reached ({size:,} characters)",
        }
