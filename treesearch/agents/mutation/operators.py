"""Mutation operators: small edits located by the AST and spliced into the source text.

``edits_at(source_file, line, families)`` lists every edit of the chosen operator families on the
statement(s) that start at ``line``. An ``Edit`` replaces the bytes ``[start, end)`` of the file
with ``text``: the rest of the file (comments, formatting, other lines) is untouched and the diff
shows the edit only. Parentheses are added where an operator swap would otherwise change how the
surrounding expression parses (``c - a * b`` with ``*`` -> ``+`` gives ``c - (a + b)``).

An edit is a *candidate*: ``check(source_file, edit)`` compiles the result and refuses edits
that do not compile or leave the AST unchanged.

Families (``FAMILIES``):

- ``arith``: binary, augmented-assignment and unary-minus operators (``+ - * / // % **`` among
  themselves, bit operators among themselves; ``-x`` -> ``x``);
- ``compare``: ``< <= > >= == !=`` among themselves, ``is``/``is not``, ``in``/``not in``;
- ``boolean``: ``and`` <-> ``or``;
- ``negate``: negate a condition (``if``, ``while``, ``assert``, conditional expressions,
  comprehension filters, operands of ``and``/``or`` in them) or drop a ``not``;
- ``constant``: numbers +1/-1 and 0/1, ``True``/``False``, non-empty strings and container
  literals to empty ones;
- ``name``: a variable to another name in scope (parameters, locals, enclosing comprehension
  and lambda variables, module-level variables); ``obj.attr`` to another attribute used on the
  same object; a called function or method to a related one (``min``/``max``, ``any``/``all``,
  ``append``/``extend``, ...) or, for module functions, another function of the module;
- ``bounds``: slice bounds and subscript indexes +1/-1 or dropped, ``range`` arguments +1/-1
  and ``range(n)`` -> ``range(1, n)``;
- ``swap``: adjacent positional call arguments; operands of a non-commutative operator;
- ``delete``: delete a statement (``pass`` when it is alone in its block);
- ``insert``: copy a statement of the same function (up to three lines) before or after this
  one, re-indented (GenProg's insertion);
- ``return``: a returned value to another name in scope or to another returned expression of
  the same function.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

from treesearch.agents.mutation._edit import (
    _ATOM,
    _COMPARE_PREC,
    _OP_PREC,
    Edit,
    _Builder,
    _fits_parent,
    _int_value,
    _is_docstring,
    _operand_text,
    _parenthesized,
    _prec,
    _splice,
    _token_in_gap,
    _wrap_if_needed,
    check,
)
from treesearch.agents.mutation._names import _attribute_edits, _name_edits
from treesearch.agents.mutation._source import SourceFile
from treesearch.agents.mutation._statements import _statement_edits

__all__ = [
    "FAMILIES",
    "Edit",
    "check",
    "edits_at",
]

FAMILIES: tuple[str, ...] = (
    "arith",
    "compare",
    "boolean",
    "negate",
    "constant",
    "name",
    "bounds",
    "swap",
    "delete",
    "insert",
    "return",
)
"""Operator families, in the order candidates are listed."""


_BINOP_TEXT: dict[type, str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.LShift: "<<",
    ast.RShift: ">>",
}
_ARITH_GROUPS: tuple[tuple[type, ...], ...] = (
    (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow),
    (ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift, ast.RShift),
)
# The likely slips among the replacements of an operator (as in PIT's math and conditional
# mutators: an operation and its inverse, true and floor division, a boundary moved by one);
# the other replacements of the group get ``_SECONDARY``.
_PRIMARY: dict[type, tuple[type, ...]] = {
    ast.Add: (ast.Sub,),
    ast.Sub: (ast.Add,),
    ast.Mult: (ast.Div, ast.Pow),
    ast.Div: (ast.Mult, ast.FloorDiv),
    ast.FloorDiv: (ast.Div, ast.Mod),
    ast.Mod: (ast.FloorDiv,),
    ast.Pow: (ast.Mult,),
    ast.BitAnd: (ast.BitOr,),
    ast.BitOr: (ast.BitAnd, ast.BitXor),
    ast.BitXor: (ast.BitOr,),
    ast.LShift: (ast.RShift,),
    ast.RShift: (ast.LShift,),
    ast.Lt: (ast.LtE, ast.Gt),
    ast.LtE: (ast.Lt, ast.GtE),
    ast.Gt: (ast.GtE, ast.Lt),
    ast.GtE: (ast.Gt, ast.LtE),
    ast.Eq: (ast.NotEq,),
    ast.NotEq: (ast.Eq,),
}
_SECONDARY = 0.3


def _pair_weight(old: type, new: type) -> float:
    primary = _PRIMARY.get(old)
    return 1.0 if primary is None or new in primary else _SECONDARY


_NON_COMMUTATIVE = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift)
_CMP_TEXT: dict[type, str] = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
}
_CMP_GROUPS: tuple[tuple[type, ...], ...] = (
    (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq),
    (ast.Is, ast.IsNot),
    (ast.In, ast.NotIn),
)

# --- the enumeration ------------------------------------------------------------------------------


def edits_at(src: SourceFile, line: int, families: Iterable[str] = FAMILIES) -> list[Edit]:
    """Every edit of ``families`` on the statements that start at ``line``, in a fixed order.

    Edits are not yet checked (see ``check``); duplicates of the same splice are dropped.
    """
    b = _Builder(src, line, frozenset(families))
    for stmt in src.statements_at(line):
        if isinstance(stmt, (ast.If, ast.While, ast.Assert)):
            _negate_condition(b, stmt.test)
        elif isinstance(stmt, ast.AugAssign):
            _augassign_edits(b, stmt)
        for node in _sites(stmt):
            _expression_edits(b, node)
        _statement_edits(b, stmt)
    return b.out


def _roots(stmt: ast.stmt) -> list[ast.AST]:
    """The expression trees that belong to a statement's own line(s)."""
    if isinstance(stmt, (ast.If, ast.While)):
        return [stmt.test]
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return [stmt.target, stmt.iter]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        out: list[ast.AST] = []
        for item in stmt.items:
            out.append(item.context_expr)
            if item.optional_vars is not None:
                out.append(item.optional_vars)
        return out
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return [*stmt.args.defaults, *(d for d in stmt.args.kw_defaults if d is not None)]
    if isinstance(stmt, (ast.Try, ast.ClassDef, ast.Import, ast.ImportFrom, ast.Global)):
        return []
    if isinstance(stmt, ast.Nonlocal) or _is_docstring(stmt):
        return []
    if isinstance(stmt, getattr(ast, "Match", ())):
        return [stmt.subject]  # type: ignore[attr-defined]
    return [stmt]


def _sites(stmt: ast.stmt) -> Iterator[ast.AST]:
    """Nodes of the statement's own expressions, in source order; f-string internals are
    skipped (their positions are not reliable before Python 3.12)."""
    for root in _roots(stmt):
        yield from _walk(root)


def _walk(node: ast.AST) -> Iterator[ast.AST]:
    if isinstance(node, ast.JoinedStr):
        return
    if not isinstance(node, ast.stmt):
        yield node
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.stmt):
            continue
        yield from _walk(child)


def _expression_edits(b: _Builder, node: ast.AST) -> None:
    if isinstance(node, ast.comprehension):
        for cond in node.ifs:
            _negate_condition(b, cond)
        return
    if not hasattr(node, "lineno"):
        return
    if isinstance(node, ast.BinOp):
        _binop_edits(b, node)
    elif isinstance(node, ast.UnaryOp):
        _unary_edits(b, node)
    elif isinstance(node, ast.Compare):
        _compare_edits(b, node)
    elif isinstance(node, ast.BoolOp):
        _boolop_edits(b, node)
    elif isinstance(node, ast.Constant):
        _constant_edits(b, node)
    elif isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
        _empty_container_edits(b, node)
    elif isinstance(node, ast.Name):
        _name_edits(b, node)
    elif isinstance(node, ast.Attribute):
        _attribute_edits(b, node)
    elif isinstance(node, ast.Subscript):
        _subscript_edits(b, node)
    elif isinstance(node, ast.Call):
        _call_edits(b, node)
    if isinstance(node, ast.IfExp):
        _negate_condition(b, node.test)


# --- arith / swap ---------------------------------------------------------------------------------


def _binop_edits(b: _Builder, node: ast.BinOp) -> None:
    src = b.src
    tok = _token_in_gap(src, src.span(node.left)[1], src.span(node.right)[0])
    if tok is None:
        return
    start, end = src.span(node)
    old = _BINOP_TEXT.get(type(node.op))
    if old is None:
        return
    for group in _ARITH_GROUPS:
        if type(node.op) not in group:
            continue
        for new_op in group:
            if new_op is type(node.op):
                continue
            new = _BINOP_TEXT[new_op]
            prec = _OP_PREC[new_op]
            power = new_op is ast.Pow
            left = _operand_text(src, node.left, prec, right=False, power=power)
            right = _operand_text(src, node.right, prec, right=True, power=power)
            if left == src.text(node.left) and right == src.text(node.right):
                text = _splice(src, start, end, [(tok[0], tok[1], new)])
            else:
                text = _splice(
                    src,
                    start,
                    end,
                    [
                        (*src.span(node.left), left),
                        (tok[0], tok[1], new),
                        (*src.span(node.right), right),
                    ],
                )
            b.add(
                "arith",
                f"{old} -> {new}",
                start,
                end,
                _wrap_if_needed(src, node, text, prec),
                _pair_weight(type(node.op), new_op),
            )
    if isinstance(node.op, _NON_COMMUTATIVE):
        prec = _OP_PREC[type(node.op)]
        power = isinstance(node.op, ast.Pow)
        left = _operand_text(src, node.right, prec, right=False, power=power)
        right = _operand_text(src, node.left, prec, right=True, power=power)
        op_text = src.source[tok[0] : tok[1]].decode("utf-8")
        text = f"{left} {op_text} {right}"
        b.add("swap", f"swap operands of {old}", start, end, _wrap_if_needed(src, node, text, prec))


def _augassign_edits(b: _Builder, node: ast.AugAssign) -> None:
    src = b.src
    tok = _token_in_gap(src, src.span(node.target)[1], src.span(node.value)[0])
    old = _BINOP_TEXT.get(type(node.op))
    if tok is None or old is None:
        return
    for group in _ARITH_GROUPS:
        if type(node.op) not in group:
            continue
        for new_op in group:
            if new_op is not type(node.op):
                new = _BINOP_TEXT[new_op]
                weight = _pair_weight(type(node.op), new_op)
                b.add("arith", f"{old}= -> {new}=", tok[0], tok[1], new + "=", weight)


def _unary_edits(b: _Builder, node: ast.UnaryOp) -> None:
    src = b.src
    start, _ = src.span(node)
    op_start = src.span(node.operand)[0]
    prefix = src.source[start:op_start]
    if isinstance(node.op, ast.USub):
        kept = prefix[1:].lstrip(b" \t")  # keep a "(" of the operand, drop "-" and spaces
        text = kept.decode("utf-8")
        new_prec = _ATOM if kept.startswith(b"(") else _prec(node.operand)
        full = _splice(src, start, src.span(node)[1], [(start, op_start, text)])
        if _fits_parent(src, node, new_prec):
            b.add("arith", "-x -> x", start, op_start, text)
        else:
            b.add("arith", "-x -> x", start, src.span(node)[1], f"({full})")
    elif isinstance(node.op, ast.Not):
        _drop_not(b, node)


# --- compare / boolean / negate -------------------------------------------------------------------


def _compare_edits(b: _Builder, node: ast.Compare) -> None:
    src = b.src
    operands = [node.left, *node.comparators]
    for i, op in enumerate(node.ops):
        tok = _token_in_gap(src, src.span(operands[i])[1], src.span(operands[i + 1])[0])
        if tok is None:
            continue
        old = _CMP_TEXT[type(op)]
        for group in _CMP_GROUPS:
            if type(op) not in group:
                continue
            for new_op in group:
                if new_op is not type(op):
                    new = _CMP_TEXT[new_op]
                    weight = _pair_weight(type(op), new_op)
                    b.add("compare", f"{old} -> {new}", tok[0], tok[1], new, weight)


def _boolop_edits(b: _Builder, node: ast.BoolOp) -> None:
    src = b.src
    old, new, new_type = (
        ("and", "or", ast.Or) if isinstance(node.op, ast.And) else ("or", "and", ast.And)
    )
    subs: list[tuple[int, int, str]] = []
    new_prec = _OP_PREC[new_type]
    for left, right in zip(node.values, node.values[1:], strict=False):
        tok = _token_in_gap(src, src.span(left)[1], src.span(right)[0])
        if tok is None:
            return
        subs.append((tok[0], tok[1], new))
    # Operands that bind looser than the new operator need parentheses.
    for value in node.values:
        if _prec(value) < new_prec and not _parenthesized(src, value):
            vs, ve = src.span(value)
            subs.append((vs, vs, "("))
            subs.append((ve, ve, ")"))
    start, end = src.span(node)
    text = _splice(src, start, end, subs)
    b.add("boolean", f"{old} -> {new}", start, end, _wrap_if_needed(src, node, text, new_prec))


def _negated_text(src: SourceFile, node: ast.AST) -> str:
    text = src.text(node)
    # ``not`` binds looser than comparisons and tighter than ``and``/``or``.
    if _prec(node) >= _COMPARE_PREC:
        return f"not {text}"
    return f"not ({text})"


def _negate_condition(b: _Builder, cond: ast.AST) -> None:
    src = b.src
    if isinstance(cond, ast.UnaryOp) and isinstance(cond.op, ast.Not):
        _drop_not(b, cond)
    else:
        b.replace(
            "negate",
            "negate condition",
            cond,
            _wrap_if_needed(src, cond, _negated_text(src, cond), 3),
        )
    if isinstance(cond, ast.BoolOp):
        for value in cond.values:
            if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not):
                _drop_not(b, value)
            else:
                text = _negated_text(src, value)
                # ``not x`` inside ``and``/``or`` binds tighter than both: no parentheses needed.
                b.replace("negate", "negate operand", value, text)


def _drop_not(b: _Builder, node: ast.UnaryOp) -> None:
    src = b.src
    start, _ = src.span(node)
    op_start = src.span(node.operand)[0]
    kept = src.source[start + 3 : op_start].lstrip(b" \t\\\n\r")  # after the "not" keyword
    new_prec = _ATOM if kept.startswith(b"(") else _prec(node.operand)
    if _fits_parent(src, node, new_prec):
        b.add("negate", "drop not", start, op_start, kept.decode("utf-8"))


# --- constants ------------------------------------------------------------------------------------


def _constant_edits(b: _Builder, node: ast.Constant) -> None:
    src = b.src
    parent = src.parents.get(node)
    if isinstance(parent, (ast.Expr, ast.JoinedStr)):
        return  # docstrings and bare literals
    value = node.value
    negated_context = isinstance(parent, ast.UnaryOp)
    if isinstance(value, bool):
        b.replace("constant", f"{value} -> {not value}", node, str(not value))
    elif isinstance(value, (int, float)) and not isinstance(value, complex):
        options: list[int | float] = [value + 1, value - 1, type(value)(0), type(value)(1)]
        done: set[int | float] = {value}
        for i, new in enumerate(options):
            if new in done:
                continue
            done.add(new)
            weight = 1.0 if i < 2 else 0.5  # off by one first, then 0 and 1
            if new < 0 and negated_context:
                continue
            text = repr(new) if isinstance(new, float) else str(new)
            if new < 0 and not _fits_parent(src, node, 11):
                text = f"({text})"
            b.replace("constant", f"{value!r} -> {text}", node, text, weight)
    elif isinstance(value, str) and value:
        b.replace("constant", "string -> empty", node, "''")
    elif isinstance(value, bytes) and value:
        b.replace("constant", "bytes -> empty", node, "b''")


def _empty_container_edits(b: _Builder, node: ast.AST) -> None:
    if isinstance(node, (ast.List, ast.Tuple)) and not isinstance(node.ctx, ast.Load):
        return
    if isinstance(node, ast.Dict):
        if node.keys:
            b.replace("constant", "dict -> empty", node, "{}")
    elif isinstance(node, ast.List) and node.elts:
        b.replace("constant", "list -> empty", node, "[]")
    elif isinstance(node, ast.Set) and node.elts:
        b.replace("constant", "set -> empty", node, "set()")
    elif isinstance(node, ast.Tuple) and node.elts:
        if isinstance(b.src.parents.get(node), (ast.Subscript, ast.Starred)):
            return
        b.replace("constant", "tuple -> empty", node, "()")


# --- bounds ---------------------------------------------------------------------------------------


def _plus_minus(src: SourceFile, node: ast.AST) -> list[tuple[str, str]]:
    """``(operator, text)`` variants of an integer-valued expression off by one."""
    value = _int_value(node)
    if value is not None:
        return [("+1", str(value + 1)), ("-1", str(value - 1))]
    out: list[tuple[str, str]] = []
    if (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, (ast.Add, ast.Sub))
        and _int_value(node.right) is not None
    ):
        out.append(("drop offset", src.text(node.left)))
    text = src.text(node)
    if _prec(node) < _OP_PREC[ast.Add] and not _parenthesized(src, node):
        text = f"({text})"
    out += [("+1", f"{text} + 1"), ("-1", f"{text} - 1")]
    return out


def _subscript_edits(b: _Builder, node: ast.Subscript) -> None:
    src = b.src
    index = node.slice
    if isinstance(index, ast.Slice):
        for which in ("lower", "upper"):
            bound = getattr(index, which)
            if bound is None:
                continue
            for op, text in _plus_minus(src, bound):
                b.replace("bounds", f"slice {which} {op}", bound, text)
            b.replace("bounds", f"drop slice {which}", bound, "")
    elif not isinstance(index, ast.Tuple) and not (
        isinstance(index, ast.Constant) and not isinstance(index.value, int)
    ):
        for op, text in _plus_minus(src, index):
            b.replace("bounds", f"index {op}", index, text)


def _call_edits(b: _Builder, node: ast.Call) -> None:
    src = b.src
    positional = [a for a in node.args if not isinstance(a, ast.Starred)]
    if isinstance(node.func, ast.Name) and node.func.id == "range" and positional == node.args:
        for i, arg in enumerate(node.args[:3]):
            for op, text in _plus_minus(src, arg):
                b.replace("bounds", f"range arg {i + 1} {op}", arg, text)
        if len(node.args) == 1:
            start, _ = src.span(node.args[0])
            b.add("bounds", "range(n) -> range(1, n)", start, start, "1, ")
    if positional == node.args:
        for left, right in zip(node.args, node.args[1:], strict=False):
            ls, le = src.span(left)
            rs, re_ = src.span(right)
            text = src.text(right) + src.source[le:rs].decode("utf-8") + src.text(left)
            b.add("swap", "swap arguments", ls, re_, text)
