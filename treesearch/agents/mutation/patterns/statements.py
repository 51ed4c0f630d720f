"""Statement-level fix patterns: a wrong returned constant, a missing ``return`` at the end of a
function (see the package docstring)."""

from __future__ import annotations

import ast
import builtins
import difflib

from treesearch.agents.mutation._edit import _Builder, _splice
from treesearch.agents.mutation._names import _module_functions, _params, _scope
from treesearch.agents.mutation._source import SourceFile
from treesearch.agents.mutation.operators import _sites

__all__ = ["missing_edits", "retval_edits", "variable_edits"]

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


def _in_tail(src: SourceFile, stmt: ast.stmt, fn: ast.AST) -> bool:
    """Whether falling off the end of ``stmt`` ends the function (``stmt`` is the last of its
    block, and so is each enclosing ``if``/``with``/``try`` up to the function; a loop body's
    end goes back to the loop instead)."""
    node: ast.AST = stmt
    while True:
        parent = src.parents.get(node)
        if parent is None:
            return False
        blocks = [getattr(parent, f, None) for f in ("body", "orelse", "finalbody")]
        block = next((bl for bl in blocks if isinstance(bl, list) and node in bl), None)
        if isinstance(parent, ast.ExceptHandler):
            block = parent.body
        if block is None or block[-1] is not node:
            return False
        if parent is fn:
            return True
        if isinstance(parent, (ast.For, ast.AsyncFor, ast.While)) and node in parent.body:
            return False
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return False
        node = parent


def missing_edits(b: _Builder, stmt: ast.stmt) -> None:
    """``return E`` after a statement in tail position (falling off it ends the function)."""
    src = b.src
    fn = src.enclosing_function(stmt)
    if fn is None or not _falls_off(stmt) or not _in_tail(src, stmt, fn):
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


# --- variable -------------------------------------------------------------------------------------

_BUILTINS = frozenset(dir(builtins))
_CALLABLE_BUILTINS = tuple(
    sorted(
        n
        for n in _BUILTINS
        if not n.startswith("_") and n[0].islower() and callable(getattr(builtins, n))
    )
)


def _similarity(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b).ratio()


def _known(src: SourceFile, fn: ast.AST | None) -> set[str]:
    """Names bound anywhere in the module (imports, functions, classes, variables) and, for
    ``fn``, its parameters: what a name may refer to without a ``NameError``."""
    out: set[str] = set(_BUILTINS)
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.add(node.name)
    return out


def variable_edits(b: _Builder, stmt: ast.stmt) -> None:
    """An undefined name (a ``NameError``, as PyTER repairs it) -> each variable in scope, the
    most similar spelling first (for a called name: the module's functions and the builtins
    spelled alike; ``false``/``true``/``none`` -> the constant); an integer constant in a slice, ``range`` or a comparison ->
    a parameter of the function (a hard-coded value for what should be an argument), a
    parameter the function never reads first."""
    src = b.src
    fn = src.enclosing_function(stmt)
    known: set[str] | None = None
    for node in _sites(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if known is None:
                known = _known(src, fn)
            if node.id in known:
                continue
            scope = _scope(src, node)
            old = node.id
            parent = src.parents.get(node)
            if isinstance(parent, ast.Call) and parent.func is node:
                # ``unique_date(d)`` for ``unique_day(d)``: what a call may name, alike first
                scope = [*_module_functions(src), *_CALLABLE_BUILTINS]
                scope = [n for n in scope if _similarity(old, n) >= 0.6]
            ranked = sorted(scope, key=lambda n: -_similarity(old, n))
            for constant in ("True", "False", "None"):
                if old.lower() == constant.lower():  # ``false``, ``TRUE``
                    b.replace("variable", f"undefined {old} -> {constant}", node, constant)
            uses = _uses(fn, old) if fn is not None else []
            for i, new in enumerate(ranked):
                weight = 1.0 if i == 0 else 0.7 if i < 3 else 0.4
                b.replace("variable", f"undefined {node.id} -> {new}", node, new, weight)
                if len(uses) > 1:  # one misspelling, written wherever the name is meant
                    start, end = src.span(uses[0])[0], src.span(uses[-1])[1]
                    subs = [(*src.span(u), new) for u in uses]
                    b.add(
                        "variable",
                        f"undefined {node.id} -> {new} at its {len(uses)} uses",
                        start,
                        end,
                        _splice(src, start, end, subs),
                        weight,
                    )
        elif (
            fn is not None
            and isinstance(node, ast.Constant)
            and type(node.value) is int
            and isinstance(src.parents.get(node), (ast.Slice, ast.Compare, ast.Call))
        ):
            parent = src.parents.get(node)
            if isinstance(parent, ast.Call) and not (
                isinstance(parent.func, ast.Name) and parent.func.id == "range"
            ):
                continue
            unused = _unused_params(fn)
            for param in _params(fn):
                if param not in ("self", "cls"):
                    # A parameter the function never reads is what a hard-coded value most
                    # likely stands for (the value of one test case written in its place).
                    weight = 1.0 if param in unused else 0.5
                    b.replace("variable", f"{node.value} -> {param}", node, param, weight)


def _uses(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> list[ast.Name]:
    """The places ``fn`` reads ``name``, in source order."""
    found = [
        n
        for n in ast.walk(fn)
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
    ]
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def _unused_params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Parameters of ``fn`` that nothing in its body reads."""
    read = {
        n.id
        for stmt in fn.body
        for n in ast.walk(stmt)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }
    return {p for p in _params(fn) if p not in read}
