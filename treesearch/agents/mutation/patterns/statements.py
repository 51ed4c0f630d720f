"""Statement-level fix patterns: a wrong returned constant, a missing ``return`` at the end of a
function (see the package docstring)."""

from __future__ import annotations

import ast

from treesearch.agents.mutation._source import SourceFile
from treesearch.agents.mutation.operators import (
    _Builder,
    _params,
    _scope,
)

__all__ = ["missing_edits", "retval_edits"]

_CONSTANTS: tuple[tuple[str, float], ...] = (
    ("0", 0.6),
    ("None", 0.4),
    ("-1", 0.4),
    ("True", 0.4),
    ("False", 0.4),
    ("[]", 0.4),
    ("''", 0.2),
)


def _returned_elsewhere(src: SourceFile, fn: ast.AST, skip: ast.AST | None) -> list[str]:
    out: dict[str, None] = {}
    for s in ast.walk(fn):
        if (
            isinstance(s, ast.Return)
            and s is not skip
            and s.value is not None
            and src.enclosing_function(s) is fn
        ):
            text = src.text(s.value)
            if "\n" not in text:
                out.setdefault(text, None)
    return list(out)


def _lengths(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    return [f"len({p})" for p in _params(fn) if p not in ("self", "cls")]


def retval_edits(b: _Builder, stmt: ast.stmt) -> None:
    src = b.src
    if not isinstance(stmt, ast.Return) or stmt.value is None:
        return
    fn = src.enclosing_function(stmt)
    if fn is None:
        return
    current = src.text(stmt.value)
    options = [*_CONSTANTS, *((t, 0.3) for t in _lengths(fn))]
    for text, weight in options:
        if text != current:
            b.replace("retval", f"return {text}", stmt.value, text, weight)


def _falls_off(stmt: ast.stmt) -> bool:
    return not isinstance(stmt, (ast.Return, ast.Raise))


def missing_edits(b: _Builder, stmt: ast.stmt) -> None:
    """``return E`` after the last statement of a function body that can fall off its end."""
    src = b.src
    fn = src.enclosing_function(stmt)
    if fn is None or not fn.body or fn.body[-1] is not stmt or not _falls_off(stmt):
        return
    if not src.alone_on_lines(stmt):
        return
    indent = src.indent_of(stmt).decode("utf-8")
    at = src.line_end(stmt.end_lineno or stmt.lineno)
    prefix = ""
    if at == len(src.source) and not src.source.endswith((b"\n", b"\r")):
        prefix = src.newline
    options: dict[str, float] = {}
    for text in _returned_elsewhere(src, fn, None):
        options.setdefault(text, 1.0)
    for text, weight in _CONSTANTS:
        options.setdefault(text, weight)
    for name in _scope(src, stmt):
        options.setdefault(name, 0.5)
    for text in _lengths(fn):
        options.setdefault(text, 0.4)
    for text, weight in options.items():
        b.add(
            "missing",
            f"add `return {text}` at the end",
            at,
            at,
            f"{prefix}{indent}return {text}{src.newline}",
            weight,
        )
