"""Statement families: ``delete``, ``insert`` (GenProg's copy of a statement of the same
function) and ``return`` (see ``operators``)."""

from __future__ import annotations

import ast
from collections.abc import Sequence

from treesearch.agents.mutation._edit import _Builder, _is_docstring, _short
from treesearch.agents.mutation._names import _scope
from treesearch.agents.mutation._source import SourceFile

_MAX_COPY_LINES = 3

# --- statements -----------------------------------------------------------------------------------

_NEVER_DELETE = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Import,
    ast.ImportFrom,
    ast.Global,
    ast.Nonlocal,
    ast.Pass,
)


def _block_of(src: SourceFile, stmt: ast.stmt) -> list[ast.stmt] | None:
    parent = src.parents.get(stmt)
    if parent is None:
        return None
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and any(s is stmt for s in block):
            return block
    if isinstance(parent, ast.ExceptHandler):
        return parent.body
    return None


def _is_elif(src: SourceFile, stmt: ast.stmt) -> bool:
    parent = src.parents.get(stmt)
    if not (isinstance(parent, ast.If) and len(parent.orelse) == 1 and parent.orelse[0] is stmt):
        return False
    start, _ = src.span(stmt)
    return src.source[start : start + 4] == b"elif"


def _statement_edits(b: _Builder, stmt: ast.stmt) -> None:
    if "delete" in b.families:
        _delete_edit(b, stmt)
    if "insert" in b.families:
        _insert_edits(b, stmt)
    if "return" in b.families and isinstance(stmt, ast.Return):
        _return_edits(b, stmt)


def _delete_edit(b: _Builder, stmt: ast.stmt) -> None:
    src = b.src
    if isinstance(stmt, _NEVER_DELETE) or _is_docstring(stmt) or _is_elif(src, stmt):
        return
    block = _block_of(src, stmt)
    if block is None:
        return
    start, end = src.span(stmt)
    if len(block) > 1 and src.alone_on_lines(stmt):
        first = src.line_start(stmt.lineno)
        last = src.line_end(stmt.end_lineno or stmt.lineno)
        b.add("delete", "delete statement", first, last, "")
    else:
        b.add("delete", "delete statement (-> pass)", start, end, "pass")


def _copyable(src: SourceFile, stmt: ast.stmt) -> bool:
    if isinstance(stmt, _NEVER_DELETE) or _is_docstring(stmt):
        return False
    lines = (stmt.end_lineno or stmt.lineno) - stmt.lineno + 1
    return lines <= _MAX_COPY_LINES and src.alone_on_lines(stmt) and not _is_elif(src, stmt)


def _function_statements(src: SourceFile, stmt: ast.stmt) -> list[ast.stmt]:
    fn = src.enclosing_function(stmt)
    body: Sequence[ast.stmt] = fn.body if fn is not None else src.tree.body
    out: list[ast.stmt] = []

    def visit(block: Sequence[ast.stmt]) -> None:
        for s in block:
            out.append(s)
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(s, field, None)
                if isinstance(inner, list):
                    visit(inner)
            for handler in getattr(s, "handlers", ()):
                visit(handler.body)

    visit(body)
    return out


def _insert_edits(b: _Builder, stmt: ast.stmt) -> None:
    src = b.src
    if not src.alone_on_lines(stmt) or _is_elif(src, stmt) or _block_of(src, stmt) is None:
        return
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return
    indent = src.indent_of(stmt).decode("utf-8")
    ancestors = set(map(id, src.ancestors(stmt)))
    before_at = src.line_start(stmt.lineno)
    after_at = src.line_end(stmt.end_lineno or stmt.lineno)
    ends_block = isinstance(stmt, (ast.Return, ast.Raise, ast.Continue, ast.Break))
    for donor in _function_statements(src, stmt):
        if id(donor) in ancestors or not _copyable(src, donor):
            continue
        text = _reindent(src, donor, indent)
        b.add("insert", f"copy line {donor.lineno} before", before_at, before_at, text)
        if not ends_block:
            if after_at == len(src.source) and not src.source.endswith((b"\n", b"\r")):
                b.add(
                    "insert",
                    f"copy line {donor.lineno} after",
                    after_at,
                    after_at,
                    src.newline + text.rstrip("\r\n"),
                )
            else:
                b.add("insert", f"copy line {donor.lineno} after", after_at, after_at, text)


def _reindent(src: SourceFile, stmt: ast.stmt, indent: str) -> str:
    own = src.indent_of(stmt).decode("utf-8")
    first = src.line_start(stmt.lineno)
    last = src.line_end(stmt.end_lineno or stmt.lineno)
    raw = src.source[first:last].decode("utf-8")
    lines = raw.splitlines(keepends=True)
    out = []
    for line in lines:
        body = line[len(own) :] if line.startswith(own) else line.lstrip(" \t")
        out.append(indent + body)
    text = "".join(out)
    if not text.endswith(("\n", "\r")):
        text += src.newline
    return text


def _return_edits(b: _Builder, stmt: ast.Return) -> None:
    src = b.src
    fn = src.enclosing_function(stmt)
    if fn is None:
        return
    options: dict[str, None] = {}
    for n in _scope(src, stmt):
        options.setdefault(n, None)
    for s in _function_statements(src, stmt):
        if (
            isinstance(s, ast.Return)
            and s is not stmt
            and s.value is not None
            and src.enclosing_function(s) is fn
        ):
            options.setdefault(src.text(s.value), None)
    if stmt.value is None:
        start, end = src.span(stmt)
        for text in options:
            b.add("return", f"return -> return {_short(text, 30)}", start, end, f"return {text}")
        return
    current = src.text(stmt.value)
    for text in options:
        if text != current:
            b.replace("return", f"return value -> {_short(text, 30)}", stmt.value, text)
