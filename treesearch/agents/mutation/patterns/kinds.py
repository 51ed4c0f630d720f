"""What a variable is used as, from how the function uses it (PyTER-style type hints without
running the code): a *sequence* (iterated, indexed, measured with ``len``, given list methods)
or a *number* (in arithmetic with numbers, a ``range`` bound, compared with a number). Edits
that use a name against its kind (``seq + 1``, ``abs(seq)``, ``len(i)``, ``i`` -> ``seq``)
are left out of the ranked candidates."""

from __future__ import annotations

import ast

from treesearch.agents.mutation._source import SourceFile

__all__ = ["SEQUENCE", "NUMBER", "kinds_of"]

SEQUENCE = "sequence"
NUMBER = "number"
_SEQ_METHODS = frozenset(
    {"append", "extend", "insert", "pop", "remove", "sort", "index", "count", "copy", "clear"}
)
_SEQ_CALLS = frozenset({"len", "enumerate", "sorted", "reversed", "list", "tuple", "set", "sum"})


def _is_number(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def kinds_of(src: SourceFile, scope: ast.AST) -> dict[str, str]:
    """Name -> ``SEQUENCE`` or ``NUMBER`` for the names of ``scope`` whose uses agree."""
    seen: dict[str, set[str]] = {}
    for node in ast.walk(scope):
        for name, kind in _uses(node):
            if isinstance(name, ast.Name):
                seen.setdefault(name.id, set()).add(kind)
    return {name: next(iter(k)) for name, k in seen.items() if len(k) == 1}


def _uses(node: ast.AST) -> list[tuple[ast.AST, str]]:
    """(operand, kind) pairs that ``node`` itself says about its operands."""
    if isinstance(node, (ast.For, ast.comprehension)):
        return [(node.iter, SEQUENCE)]
    if isinstance(node, ast.Subscript):
        index = [] if isinstance(node.slice, ast.Slice) else [(node.slice, NUMBER)]
        return [(node.value, SEQUENCE), *index]
    if isinstance(node, ast.Call):
        return _call_uses(node)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Sub, ast.Mult, ast.Add)):
        return _number_pair(node.left, node.right)
    if isinstance(node, ast.AugAssign) and _is_number(node.value):
        return [(node.target, NUMBER)]
    if isinstance(node, ast.Compare):
        return _compare_uses(node)
    if isinstance(node, ast.Assign) and _is_number(node.value):
        return [(target, NUMBER) for target in node.targets]
    return []


def _call_uses(node: ast.Call) -> list[tuple[ast.AST, str]]:
    func = node.func
    if isinstance(func, ast.Name) and func.id in _SEQ_CALLS and node.args:
        return [(node.args[0], SEQUENCE)]
    if isinstance(func, ast.Name) and func.id == "range":
        return [(arg, NUMBER) for arg in node.args]
    if isinstance(func, ast.Attribute) and func.attr in _SEQ_METHODS:
        return [(func.value, SEQUENCE)]
    return []


def _number_pair(left: ast.AST, right: ast.AST) -> list[tuple[ast.AST, str]]:
    """The operand paired with a number literal is a number."""
    out: list[tuple[ast.AST, str]] = []
    if _is_number(right):
        out.append((left, NUMBER))
    if _is_number(left):
        out.append((right, NUMBER))
    return out


def _compare_uses(node: ast.Compare) -> list[tuple[ast.AST, str]]:
    out: list[tuple[ast.AST, str]] = []
    operands = [node.left, *node.comparators]
    for op, left, right in zip(node.ops, operands, operands[1:], strict=False):
        if isinstance(op, (ast.In, ast.NotIn)):
            out.append((right, SEQUENCE))
        elif isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)):
            out += _number_pair(left, right)
    return out
