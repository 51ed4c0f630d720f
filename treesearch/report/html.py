"""Assembling a self-contained page: the template, the inlined scripts and style, the data.

Everything a page needs is inlined (no network at view time): the vendored d3 (``static/d3.min.js``,
ISC licence in ``static/d3-LICENSE.txt``), the page's own style and script, and the data as JSON in
``<script type="application/json" id="ts-data">``. The data can be read back from a written page
(``read_page_data``), so that rewriting a page whose store is gone keeps its diffs.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

from treesearch._atomic import write_text

__all__ = ["DATA_ID", "page_html", "read_page_data", "write_page"]

DATA_ID = "ts-data"
_PLACEHOLDER = re.compile(r"\{\{([A-Z0-9_]+)\}\}")
_DATA_OPEN = f'<script type="application/json" id="{DATA_ID}">'


def _static(name: str) -> str:
    return resources.files("treesearch.report").joinpath("static").joinpath(name).read_text("utf-8")


def _script_safe(text: str) -> str:
    """Text that cannot end the ``<script>`` element it is inlined in."""
    return re.sub(r"</(script)", r"<\\/\1", text, flags=re.IGNORECASE)


def data_json(data: Any) -> str:
    """JSON for a ``<script type="application/json">``: ASCII only (paths may hold lone
    surrogates for bytes that are not UTF-8), and ``<``, ``>``, ``&`` escaped."""
    text = json.dumps(data, ensure_ascii=True, sort_keys=True, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def page_html(kind: str, title: str, data: Any) -> str:
    """The whole page for ``kind`` (``run`` or ``batch``)."""
    values = {
        "TITLE": _escape(title),
        "STYLE": _static("report.css"),
        "D3_LICENSE": _static("d3-LICENSE.txt").replace("*/", "* /"),
        "D3": _script_safe(_static("d3.min.js")),
        "COMMON": _script_safe(_static("common.js")),
        "SCRIPT": _script_safe(_static(f"{kind}.js")),
        "DATA": data_json(data),
        "KIND": kind,
    }
    template = _static("page.html")
    # One pass: inserted text (d3 itself) is never scanned for placeholders again.
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def _escape(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


def write_page(path: Path, text: str) -> Path:
    """Write ``path`` atomically (temp file + rename)."""
    return write_text(path, text, errors="surrogateescape")


def read_page_data(path: Path) -> dict[str, Any] | None:
    """The data embedded in a page written by this module, or ``None`` (no page, another page,
    or damaged)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    start = text.find(_DATA_OPEN)
    if start < 0:
        return None
    start += len(_DATA_OPEN)
    end = text.find("</script>", start)
    if end < 0:
        return None
    try:
        data = json.loads(text[start:end])
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
