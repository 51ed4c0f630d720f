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

    def mark(node: ast.AST, kind: str) -> None:
        if isinstance(node, ast.Name):
            seen.setdefault(node.id, set()).add(kind)

    for node in ast.walk(scope):
        if isinstance(node, (ast.For, ast.comprehension)):
            mark(node.iter, SEQUENCE)
        elif isinstance(node, ast.Subscript):
            mark(node.value, SEQUENCE)
            if not isinstance(node.slice, ast.Slice):
                mark(node.slice, NUMBER)
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in _SEQ_CALLS and node.args:
                mark(node.args[0], SEQUENCE)
            elif isinstance(func, ast.Name) and func.id == "range":
                for arg in node.args:
                    mark(arg, NUMBER)
            elif isinstance(func, ast.Attribute) and func.attr in _SEQ_METHODS:
                mark(func.value, SEQUENCE)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Sub, ast.Mult, ast.Add)):
            if _is_number(node.right):
                mark(node.left, NUMBER)
            if _is_number(node.left):
                mark(node.right, NUMBER)
        elif isinstance(node, ast.AugAssign) and _is_number(node.value):
            mark(node.target, NUMBER)
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for op, left, right in zip(node.ops, operands, operands[1:], strict=False):
                if isinstance(op, (ast.In, ast.NotIn)):
                    mark(right, SEQUENCE)
                elif isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)):
                    if _is_number(right):
                        mark(left, NUMBER)
                    if _is_number(left):
                        mark(right, NUMBER)
        elif isinstance(node, ast.Assign) and _is_number(node.value):
            for target in node.targets:
                mark(target, NUMBER)
    return {name: next(iter(k)) for name, k in seen.items() if len(k) == 1}
