"""Fix patterns for the state a function keeps (see the package docstring):

- ``init``: a missing initialisation. A name the function reads but nothing binds (a
  ``NameError``, as PyTER repairs it) or binds only by ``acc += x`` (an ``UnboundLocalError``),
  and that the function uses as an accumulator
  (``acc.append(x)``, ``acc += x``, ``acc[k] = v``) gets ``acc = <empty value>`` as the first
  statement of the function, the value its use implies first (``[]`` for list methods,
  ``set()`` for ``add``, ``{}`` for item assignment, ``0`` for arithmetic, ``''`` for text,
  ``False`` for ``ok = ok or ...``, ``True`` for ``ok = ok and ...``);
- ``iterate``: a loop over a list that its own body changes (``for x in xs:`` with
  ``xs.remove(...)``, ``xs.pop(...)``, ``xs.append(...)``, ``del xs[i]`` in the body skips or
  repeats items): iterate over a copy, ``for x in xs[:]:``;
- ``call``: a method or function named as a statement but not called (``xs.pop``) -> called;
  a method indexed instead of called (``xs.pop[0]``) -> ``xs.pop(0)``.
"""

from __future__ import annotations

import ast

from treesearch.agents.mutation._edit import _Builder, _is_docstring
from treesearch.agents.mutation._names import _params, _scope
from treesearch.agents.mutation._source import SourceFile
from treesearch.agents.mutation.operators import _sites
from treesearch.agents.mutation.patterns.statements import _known, _similarity

__all__ = ["call_edits", "init_edits", "iterate_edits"]

_LIST_METHODS = frozenset({"append", "extend", "insert", "pop", "remove", "sort", "reverse"})
_SET_METHODS = frozenset({"add", "discard", "update"})
_INDEXED_CALLS = frozenset({"index", "count", "get", "find", "split", "join"})
_MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "clear"})
_EMPTY: tuple[str, ...] = ("[]", "0", "''", "{}", "set()", "None", "False")


def _implied(fn: ast.AST, name: str) -> list[str]:
    """Empty values for ``name`` by how ``fn`` uses it, the most likely first."""
    seen: list[str] = []

    def say(value: str) -> None:
        if value not in seen:
            seen.append(value)

    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == name
        ):
            if node.attr in _LIST_METHODS:
                say("[]")
            elif node.attr in _SET_METHODS:
                say("set()")
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id == name
            and isinstance(node.ctx, ast.Store)
        ):
            say("{}")
        elif (
            isinstance(node, ast.BoolOp)
            and isinstance(node.values[0], ast.Name)
            and node.values[0].id == name
        ):
            say("False" if isinstance(node.op, ast.Or) else "True")  # ``ok = ok or c(x)``
        elif isinstance(node, (ast.AugAssign, ast.BinOp)):
            left = node.target if isinstance(node, ast.AugAssign) else node.left
            right = node.value if isinstance(node, ast.AugAssign) else node.right
            if isinstance(left, ast.Name) and left.id == name:
                say(_empty_like(right))
    return seen


def _empty_like(node: ast.AST) -> str:
    if isinstance(node, (ast.List, ast.ListComp)):
        return "[]"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return "''"
    if isinstance(node, (ast.Tuple,)):
        return "()"
    return "0"


def _first_statement(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.stmt | None:
    body = fn.body
    if len(body) > 1 and _is_docstring(body[0]):
        return body[1]
    return body[0] if body and not _is_docstring(body[0]) else None


def init_edits(b: _Builder, stmt: ast.stmt) -> None:
    """``acc = <empty>`` at the top of the function for an undefined accumulator ``acc``."""
    src = b.src
    fn = src.enclosing_function(stmt)
    if fn is None:
        return
    first = _first_statement(fn)
    if first is None or not src.alone_on_lines(first):
        return
    known: set[str] | None = None
    for node in _sites(stmt):
        if not isinstance(node, ast.Name):
            continue
        if isinstance(node.ctx, ast.Load):
            if known is None:
                known = _known(src, fn)
            if node.id in known and not _reads_itself_first(src, fn, node):
                continue
        elif not (
            isinstance(src.parents.get(node), ast.AugAssign) and not _bound_before(src, fn, node.id)
        ):
            continue  # ``acc += x`` with nothing else binding ``acc``: an UnboundLocalError
        implied = _implied(fn, node.id)
        if not implied:
            continue  # read but never accumulated into: a misspelling (``variable``), not this
        # A variable in scope spelled almost alike makes a misspelling likelier than a missing
        # initialisation (the ``variable`` family renames it).
        near = any(n != node.id and _similarity(node.id, n) >= 0.75 for n in _scope(src, node))
        scale = 0.5 if near else 1.0
        at = src.line_start(first.lineno)
        indent = src.indent_of(first).decode("utf-8")
        for i, value in enumerate([*implied, *(v for v in _EMPTY if v not in implied)]):
            b.add(
                "init",
                f"initialise {node.id} = {value}",
                at,
                at,
                f"{indent}{node.id} = {value}{src.newline}",
                scale * (1.0 if i == 0 else 0.5 if i < len(implied) else 0.2),
            )


def _reads_itself_first(
    src: SourceFile, fn: ast.FunctionDef | ast.AsyncFunctionDef, node: ast.Name
) -> bool:
    """``ok = ok or c`` where every binding of ``ok`` in ``fn`` reads ``ok`` itself (and it
    is no parameter): the first run of it raises ``UnboundLocalError``."""
    name = node.id
    assign = src.parents.get(node)
    while assign is not None and not isinstance(assign, ast.stmt):
        assign = src.parents.get(assign)
    if not isinstance(assign, ast.Assign) or name in _params(fn):
        return False
    if not any(isinstance(t, ast.Name) and t.id == name for t in assign.targets):
        return False
    for other in ast.walk(fn):
        if isinstance(other, (ast.Global, ast.Nonlocal)) and name in other.names:
            return False
        if isinstance(other, ast.Name) and other.id == name and isinstance(other.ctx, ast.Store):
            owner = src.parents.get(other)
            reads = owner is not None and any(
                isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
                for n in ast.walk(owner)
            )
            if not reads:
                return False
    return True


def _bound_before(src: SourceFile, fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    """Whether ``fn`` binds ``name`` other than by augmented assignment (or a ``global``)."""
    if name in _params(fn):
        return True
    for node in ast.walk(fn):
        if isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
            return True
        if (
            isinstance(node, ast.Name)
            and node.id == name
            and isinstance(node.ctx, ast.Store)
            and not isinstance(src.parents.get(node), ast.AugAssign)
        ):
            return True
    return False


def _mutated_in(body: list[ast.stmt], name: str) -> bool:
    for stmt in body:
        for node in ast.walk(stmt):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _MUTATORS
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == name
            ):
                return True
            if isinstance(node, ast.Delete) and any(
                isinstance(t, ast.Subscript)
                and isinstance(t.value, ast.Name)
                and t.value.id == name
                for t in node.targets
            ):
                return True
    return False


def iterate_edits(b: _Builder, stmt: ast.stmt) -> None:
    """``for x in xs:`` -> ``for x in xs[:]:`` when the loop's body changes ``xs``."""
    if not isinstance(stmt, (ast.For, ast.AsyncFor)) or not isinstance(stmt.iter, ast.Name):
        return
    name = stmt.iter.id
    if _mutated_in(stmt.body, name):
        b.replace("iterate", "iterate over a copy", stmt.iter, f"{name}[:]")


# --- call -----------------------------------------------------------------------------------------


def call_edits(b: _Builder, stmt: ast.stmt) -> None:
    """A method or function named but not called as a statement (``xs.pop``, ``xs.sort``:
    a statement that does nothing) -> called without arguments (``xs.pop()``); a method
    indexed instead of called (``xs.pop[0]``) -> called with the index (``xs.pop(0)``)."""
    src = b.src
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, (ast.Attribute, ast.Name)):
        text = src.text(stmt.value)
        b.replace("call", "call it", stmt.value, f"{text}()")
    for node in _sites(stmt):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr in _LIST_METHODS | _INDEXED_CALLS
            and not isinstance(node.slice, ast.Slice)
        ):
            index = src.text(node.slice)
            b.replace("call", "call it with the index", node, f"{src.text(node.value)}({index})")
