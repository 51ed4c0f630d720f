"""Expression-level fix patterns: condition clauses, call wrappers, methods, data-structure
constants, off-by-one expressions (see the package docstring)."""

from __future__ import annotations

import ast

from treesearch.agents.mutation._edit import (
    _ATOM,
    _COMPARE_PREC,
    _OP_PREC,
    _Builder,
    _int_value,
    _parenthesized,
    _prec,
    _wrap_if_needed,
)
from treesearch.agents.mutation._names import _scope
from treesearch.agents.mutation._source import SourceFile
from treesearch.agents.mutation._statements import _function_statements
from treesearch.agents.mutation.operators import _plus_minus, _sites
from treesearch.agents.mutation.patterns.statements import _similarity

__all__ = [
    "clause_edits",
    "method_edits",
    "offbyone_edits",
    "structure_edits",
    "wrapper_edits",
]

_MAX_DONORS = 12


# --- clause ---------------------------------------------------------------------------------------


def _conditions(stmt: ast.stmt) -> list[ast.expr]:
    """The conditions that belong to the statement's own line(s)."""
    out: list[ast.expr] = []
    if isinstance(stmt, (ast.If, ast.While, ast.Assert)):
        out.append(stmt.test)
    for node in _sites(stmt):
        if isinstance(node, ast.IfExp):
            out.append(node.test)
        elif isinstance(node, ast.comprehension):
            out.extend(node.ifs)
    return out


def _donors(src: SourceFile, stmt: ast.stmt, exclude: ast.expr) -> list[str]:
    """Condition texts written elsewhere in the same function (whole tests and the operands of
    ``and``/``or`` tests), first seen first."""
    seen: dict[str, None] = {}
    own = src.text(exclude)
    for s in _function_statements(src, stmt):
        tests: list[ast.expr] = []
        if isinstance(s, (ast.If, ast.While, ast.Assert)):
            tests.append(s.test)
        for node in ast.walk(s) if not isinstance(s, (ast.If, ast.While, ast.For)) else ():
            if isinstance(node, ast.IfExp):
                tests.append(node.test)
        for test in tests:
            parts = [test, *(test.values if isinstance(test, ast.BoolOp) else ())]
            for part in parts:
                if isinstance(part, ast.BoolOp):
                    continue
                text = src.text(part)
                if "\n" not in text and text != own and text not in own:
                    seen.setdefault(text, None)
    return list(seen)[:_MAX_DONORS]


def _as_operand(text: str, prec: int) -> str:
    """``text`` as an operand of ``and``/``or`` (parenthesised when it binds looser)."""
    return f"({text})" if prec <= _OP_PREC[ast.And] else text


def clause_edits(b: _Builder, stmt: ast.stmt) -> None:
    src = b.src
    for cond in _conditions(stmt):
        start, end = src.span(cond)
        if isinstance(cond, ast.BoolOp) and len(cond.values) >= 2:
            spans = [src.span(v) for v in cond.values]
            for i in range(len(cond.values)):
                cut = (spans[0][0], spans[1][0]) if i == 0 else (spans[i - 1][1], spans[i][1])
                kept_text = (src.source[start : cut[0]] + src.source[cut[1] : end]).decode("utf-8")
                if len(cond.values) == 2:
                    other = cond.values[1 - i]
                    text = _wrap_if_needed(src, cond, kept_text, _prec(other))
                else:
                    text = kept_text
                b.add("clause", f"drop clause {i + 1}", start, end, text, 1.0)
        cond_text = _as_operand(src.text(cond), _prec(cond))
        if _parenthesized(src, cond):
            cond_text = src.text(cond)
        for donor in _donors(src, stmt, cond):
            try:
                parsed = ast.parse(donor, mode="eval").body
            except SyntaxError:
                continue
            operand = _as_operand(donor, _prec(parsed))
            negated = f"not {operand}" if _prec(parsed) >= _COMPARE_PREC else f"not ({donor})"
            for op, text, weight in (
                ("and", f"{cond_text} and {operand}", 0.5),
                ("or", f"{cond_text} or {operand}", 0.5),
                ("and not", f"{cond_text} and {negated}", 0.3),
            ):
                new_prec = _OP_PREC[ast.And] if op != "or" else _OP_PREC[ast.Or]
                b.add(
                    "clause",
                    f"add clause: {op} {donor}",
                    start,
                    end,
                    _wrap_if_needed(src, cond, text, new_prec),
                    weight,
                )


# --- wrapper --------------------------------------------------------------------------------------

_WRAPPERS: tuple[tuple[str, float], ...] = (
    ("len", 0.6),
    ("abs", 0.4),
    ("int", 0.4),
    ("list", 0.4),
    ("sorted", 0.4),
    ("str", 0.3),
    ("set", 0.3),
    ("tuple", 0.3),
    ("float", 0.2),
    ("round", 0.2),
    ("sum", 0.2),
)
_UNWRAP = frozenset(name for name, _ in _WRAPPERS) | {"reversed", "range", "max", "min", "bool"}


def _wrappable(src: SourceFile, node: ast.AST, scope: set[str]) -> bool:
    parent = src.parents.get(node)
    if isinstance(parent, (ast.Attribute,)) and parent.value is node:
        return False  # ``len(x).append`` is never meant
    if isinstance(parent, ast.Call) and parent.func is node:
        return False
    if isinstance(parent, (ast.keyword, ast.Starred)):
        return False
    if isinstance(node, ast.Name):
        return isinstance(node.ctx, ast.Load) and node.id in scope
    if isinstance(node, (ast.Call, ast.Subscript, ast.Attribute)):
        return isinstance(getattr(node, "ctx", ast.Load()), ast.Load)
    return False


def wrapper_edits(b: _Builder, stmt: ast.stmt) -> None:
    src = b.src
    scope: set[str] | None = None
    for node in _sites(stmt):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _UNWRAP
            and len(node.args) == 1
            and not node.keywords
            and not isinstance(node.args[0], ast.Starred)
        ):
            arg = node.args[0]
            text = src.text(arg)
            b.replace(
                "wrapper",
                f"drop {node.func.id}()",
                node,
                _wrap_if_needed(src, node, text, _prec(arg)),
                0.6,
            )
        if scope is None:
            scope = set(_scope(src, node))
        if not hasattr(node, "lineno") or not _wrappable(src, node, scope):
            continue
        text = src.text(node)
        if "\n" in text:
            continue
        for name, weight in _WRAPPERS:
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == name
            ):
                continue
            b.replace("wrapper", f"wrap in {name}()", node, f"{name}({text})", weight)
        if isinstance(node, ast.Name):
            b.replace("wrapper", "wrap in [ ]", node, f"[{text}]", 0.4)
            parent = src.parents.get(node)
            added = (isinstance(parent, ast.BinOp) and parent.right is node) or (
                isinstance(parent, ast.AugAssign) and parent.value is node
            )
            if added and isinstance(parent.op, ast.Add):  # type: ignore[union-attr]
                b.replace("wrapper", "wrap in ( ,)", node, f"({text},)", 0.4)  # acc + (x,)


# --- method ---------------------------------------------------------------------------------------

# Confusions of related callables beyond those of the ``name`` family (both directions listed).
_METHOD_SWAPS: dict[str, tuple[str, ...]] = {
    "append": ("extend", "insert", "add"),
    "extend": ("append",),
    "insert": ("append",),
    "add": ("append",),
    "remove": ("pop", "discard"),
    "pop": ("remove",),
    "discard": ("remove",),
    "index": ("find", "count"),
    "find": ("index", "count"),
    "count": ("index",),
    "int": ("round", "float"),
    "round": ("int",),
    "float": ("int",),
    "min": ("max", "sum"),
    "max": ("min", "sum"),
    "sum": ("len", "max"),
    "len": ("sum",),
    "list": ("sorted", "set", "tuple"),
    "set": ("list", "sorted"),
    "tuple": ("list",),
    "sorted": ("list", "set"),
    "reversed": ("sorted",),
    "get": ("pop", "setdefault"),
    "split": ("rsplit",),
    "isdigit": ("isalpha", "isnumeric"),
    "isalpha": ("isdigit", "isalnum"),
}
_SORT_CALLS = frozenset({"sort", "sorted"})
_BUILTIN_METHODS = frozenset(
    name
    for kind in (list, dict, set, str, tuple, int, float)
    for name in dir(kind)
    if not name.startswith("_")
)


def _respelled(src: SourceFile, func: ast.Attribute) -> list[str]:
    """A method no builtin type has and the module never defines (an ``AttributeError``,
    ``xs.removal(x)``) -> the builtin methods spelled most like it (at most three). Not for a
    name the module imports (``math.sqroot``: a module's own names are not known here)."""
    attr = func.attr
    if attr in _BUILTIN_METHODS or (
        isinstance(func.value, ast.Name) and func.value.id in _imported(src)
    ):
        return []
    if attr in _defined_attributes(src):
        return []
    near = sorted((-_similarity(attr, m), m) for m in _BUILTIN_METHODS)
    return [m for score, m in near if -score >= 0.6][:3]


def _imported(src: SourceFile) -> set[str]:
    return {
        (a.asname or a.name).split(".")[0]
        for node in ast.walk(src.tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for a in node.names
    }


def _defined_attributes(src: SourceFile) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(src.tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            out.add(node.attr)
    return out


def method_edits(b: _Builder, stmt: ast.stmt) -> None:
    src = b.src
    if (
        isinstance(stmt, ast.AugAssign)
        and isinstance(stmt.op, ast.Add)
        and isinstance(stmt.target, ast.Name)
        and src.alone_on_lines(stmt)
    ):
        target, value = stmt.target.id, src.text(stmt.value)
        for method in ("append", "extend"):
            b.replace("method", f"+= -> .{method}()", stmt, f"{target}.{method}({value})", 0.8)
    for node in _sites(stmt):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name):
            for new in _METHOD_SWAPS.get(func.id, ()):
                b.replace("method", f"call {func.id} -> {new}", func, new, 0.8)
            name = func.id
        elif isinstance(func, ast.Attribute):
            fs, fe = src.span(func)
            attr_start = fe - len(func.attr.encode("utf-8"))
            if src.source[attr_start:fe] == func.attr.encode("utf-8"):
                for new in _METHOD_SWAPS.get(func.attr, ()):
                    b.add("method", f".{func.attr} -> .{new}", attr_start, fe, new, 0.8)
                for new in _respelled(src, func):
                    b.add("method", f"unknown .{func.attr} -> .{new}", attr_start, fe, new)
            name = func.attr
        else:
            continue
        if name in _SORT_CALLS:
            _sort_edits(b, stmt, node, name)


def _sort_edits(b: _Builder, stmt: ast.stmt, node: ast.Call, name: str) -> None:
    src = b.src
    start, end = src.span(node)
    reverse = next((k for k in node.keywords if k.arg == "reverse"), None)
    if reverse is None:
        close = end - 1  # the ")" of the call
        if src.source[close : close + 1] == b")":
            sep = ", " if (node.args or node.keywords) else ""
            b.add("method", f"{name}(..., reverse=True)", close, close, f"{sep}reverse=True", 0.8)
    else:
        # drop ", reverse=..." (or "reverse=..., ")
        ks, ke = src.span(reverse)
        items = [*(src.span(a) for a in node.args), *(src.span(k) for k in node.keywords)]
        items.sort()
        index = items.index((ks, ke))
        if index > 0:
            cut = (items[index - 1][1], ke)
        elif len(items) > 1:
            cut = (ks, items[1][0])
        else:
            cut = (ks, ke)
        b.add("method", f"{name}: drop reverse", cut[0], cut[1], "", 0.6)
    args_text = src.source[src.span(node.func)[1] : end].decode("utf-8")  # "(...)" as written
    if name == "sort" and isinstance(node.func, ast.Attribute):
        owner = src.text(node.func.value)
        inner = args_text[1:-1].strip()
        text = f"sorted({owner}{', ' + inner if inner else ''})"
        b.replace("method", "x.sort() -> sorted(x)", node, text, 0.8)
    if (
        name == "sorted"
        and isinstance(node.func, ast.Name)
        and node.args
        and isinstance(node.args[0], ast.Name)
        and isinstance(stmt, ast.Expr)
        and stmt.value is node
    ):
        target = node.args[0].id
        b.add("method", "sorted(x) -> x = sorted(x)", start, start, f"{target} = ", 1.0)


# --- structure ------------------------------------------------------------------------------------

_EMPTIES: dict[str, tuple[str, ...]] = {
    "[]": ("{}", "set()", "()", "''", "0", "None"),
    "{}": ("[]", "set()"),
    "()": ("[]",),
    "set()": ("[]", "{}"),
    "dict()": ("[]", "set()"),
    "list()": ("{}", "set()"),
    "tuple()": ("[]",),
    "''": ("[]", "0", "None"),
    '""': ("[]", "0", "None"),
    "None": ("0", "[]", "''", "False", "-1"),
    "0": ("None", "[]", "''"),
}


def _empty_text(node: ast.AST) -> str | None:
    if isinstance(node, ast.List) and not node.elts and isinstance(node.ctx, ast.Load):
        return "[]"
    if isinstance(node, ast.Dict) and not node.keys:
        return "{}"
    if isinstance(node, ast.Tuple) and not node.elts and isinstance(node.ctx, ast.Load):
        return "()"
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and not node.args
        and not node.keywords
        and node.func.id in ("set", "dict", "list", "tuple")
    ):
        return f"{node.func.id}()"
    if isinstance(node, ast.Constant):
        if node.value is None:
            return "None"
        if node.value == "" and isinstance(node.value, str):
            return "''"
        if type(node.value) is int and node.value == 0:
            return "0"
    return None


def structure_edits(b: _Builder, stmt: ast.stmt) -> None:
    src = b.src
    for node in _sites(stmt):
        if not hasattr(node, "lineno"):
            continue
        parent = src.parents.get(node)
        if isinstance(parent, ast.Expr):
            continue
        key = _empty_text(node)
        if key is not None:
            for new in _EMPTIES.get(key, ()):
                text = _wrap_if_needed(src, node, new, 11 if new.startswith("-") else _ATOM)
                b.replace("structure", f"{key} -> {new}", node, text, 0.7)
            continue
        if isinstance(node, ast.List) and node.elts and isinstance(node.ctx, ast.Load):
            inner = src.text(node)[1:-1]
            comma = "," if len(node.elts) == 1 else ""
            b.replace("structure", "list -> tuple", node, f"({inner}{comma})", 0.5)
        elif (
            isinstance(node, ast.Tuple)
            and node.elts
            and isinstance(node.ctx, ast.Load)
            and _parenthesized(src, node)
        ):
            text = src.text(node)
            if text.startswith("(") and text.endswith(")"):
                inner = text[1:-1].rstrip()
                inner = inner[:-1] if inner.endswith(",") and len(node.elts) == 1 else inner
                b.replace("structure", "tuple -> list", node, f"[{inner}]", 0.5)


# --- offbyone -------------------------------------------------------------------------------------


def offbyone_edits(b: _Builder, stmt: ast.stmt) -> None:
    src = b.src
    targets: list[ast.AST] = []
    for node in _sites(stmt):
        if isinstance(node, ast.Compare):
            targets.extend([node.left, *node.comparators])
    if isinstance(stmt, ast.Return) and stmt.value is not None:
        targets.append(stmt.value)
    for target in targets:
        if _int_value(target) is not None or isinstance(target, ast.Constant):
            continue  # constants are the ``constant`` family's
        if isinstance(target, (ast.List, ast.Tuple, ast.Dict, ast.Set, ast.BoolOp, ast.Compare)):
            continue
        if "\n" in src.text(target):
            continue
        for op, text in _plus_minus(src, target):
            text = _wrap_if_needed(src, target, text, _OP_PREC[ast.Add])
            b.replace("offbyone", f"expression {op}", target, text, 0.7)
