"""Fix patterns for where control goes and what a statement does (see the package docstring):

- ``indent``: the last statements of a loop's body one level too deep: moved out of the loop;
- ``exit``: a loop that decides on its first item. The last statement of a loop's body is an
  ``if``/``elif`` chain whose final ``else`` returns, so the loop never reaches its second
  item (``for x in xs: if c(x): return a  else: return b``): the ``else`` body moves after the
  loop, where it runs once every item has been looked at (and for an empty sequence);
- ``guard``: a statement that indexes a parameter at a fixed position (``xs[0]``, ``xs[-1]``)
  or takes its ``max``/``min``, which raises for an empty one: an ``if not xs:`` guard before
  it that returns what the function returns elsewhere (the parameter itself, another returned
  expression that needs no local, a constant), or leaves the loop it is in;
- ``effect``: an expression statement that computes a value and drops it (``x == y``,
  ``best - i``, ``n + 1``): the assignment it stands for (``x = y``, ``best = i``,
  ``n += 1``);
- ``inplace``: the ``None`` of an in-place method used as a value (``f(xs.remove(x))``,
  ``ys = xs.sort()``): the call made as a statement first, its receiver used in its place;
- ``element``: the loop's collection indexed at a fixed position inside a loop over it
  (``for p in people: ... people[0] ...``): the loop variable;
- ``advance``: a ``while`` loop whose condition compares a counter its body never changes
  (``while n < k:`` with no ``n = ...`` in the body: it never ends): ``n += 1`` (or
  ``n -= 1``) as the last statement of the body.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from treesearch.agents.mutation._edit import _Builder, _splice
from treesearch.agents.mutation._names import _params
from treesearch.agents.mutation._source import SourceFile
from treesearch.agents.mutation.operators import _sites

__all__ = [
    "advance_edits",
    "effect_edits",
    "element_edits",
    "exit_edits",
    "guard_edits",
    "indent_edits",
    "inplace_edits",
]

_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def _lines(src: SourceFile, first: int, last: int) -> list[bytes]:
    return src.source[src.line_start(first) : src.line_end(last)].splitlines(keepends=True)


def _dedented(src: SourceFile, first: int, last: int, inner: bytes, outer: bytes) -> str | None:
    """Lines ``first``..``last`` moved from indentation ``inner`` to ``outer``; ``None`` when a
    line is not at ``inner`` depth or deeper (a continuation or comment elsewhere)."""
    out: list[bytes] = []
    for line in _lines(src, first, last):
        if line.strip() and not line.startswith(inner):
            return None
        out.append(outer + line[len(inner) :] if line.strip() else line)
    return b"".join(out).decode("utf-8")


# --- indent ---------------------------------------------------------------------------------------


def indent_edits(b: _Builder, stmt: ast.stmt) -> None:
    """The last statements of a loop's body indented one level too deep: ``stmt`` and the
    statements after it in the body moved out of the loop (dedented to the loop's level)."""
    src = b.src
    loop = src.parents.get(stmt)
    if not isinstance(loop, _LOOPS) or loop.orelse:
        return
    body = loop.body
    if stmt not in body or body.index(stmt) == 0:
        return
    tail = body[body.index(stmt) :]
    if not all(src.alone_on_lines(s) for s in tail) or not src.alone_on_lines(loop):
        return
    inner, outer = src.indent_of(stmt), src.indent_of(loop)
    if not inner.startswith(outer) or len(inner) <= len(outer):
        return
    last = tail[-1].end_lineno or tail[-1].lineno
    moved = _dedented(src, stmt.lineno, last, inner, outer)
    if moved is None:
        return  # a continuation line or a comment at another depth: leave it alone
    weight = 1.0 if len(tail) == 1 else 0.7
    what = f"dedent {len(tail)} statement(s) out of the loop"
    b.add("indent", what, src.line_start(stmt.lineno), src.line_end(last), moved, weight)


# --- exit -----------------------------------------------------------------------------------------


def _final_else(stmt: ast.If) -> tuple[ast.If, list[ast.stmt]] | None:
    """The innermost ``if`` of an ``if``/``elif`` chain and its final ``else`` body."""
    node = stmt
    while len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
        inner = node.orelse[0]
        if inner.col_offset != node.col_offset:  # an ``if`` nested in an ``else:``, not elif
            break
        node = inner
    return (node, node.orelse) if node.orelse else None


def exit_edits(b: _Builder, stmt: ast.stmt) -> None:
    """A loop that returns on its first item: the final ``else`` of the ``if`` that ends the
    loop's body (and that returns) moved after the loop."""
    src = b.src
    loop = src.parents.get(stmt)
    if not isinstance(stmt, ast.If) or not isinstance(loop, _LOOPS) or loop.orelse:
        return
    if loop.body[-1] is not stmt or not src.alone_on_lines(loop):
        return
    found = _final_else(stmt)
    if found is None:
        return
    owner, body = found
    if not isinstance(body[-1], (ast.Return, ast.Raise)):
        return
    if not all(src.alone_on_lines(s) for s in body):
        return
    # The ``else:`` line: the last line before the else body that starts with ``else``.
    else_line = next(
        (
            n
            for n in range(body[0].lineno - 1, owner.body[-1].end_lineno or owner.lineno, -1)
            if src.source[src.line_start(n) : src.line_end(n)].strip().startswith(b"else")
        ),
        None,
    )
    if else_line is None:
        return
    last = body[-1].end_lineno or body[-1].lineno
    moved = _dedented(src, else_line + 1, last, src.indent_of(body[0]), src.indent_of(loop))
    if moved is None:
        return
    start = src.line_start(else_line)
    end = src.line_end(loop.end_lineno or loop.lineno)
    if src.source[end - 1 : end] not in (b"\n", b"\r"):
        moved = moved.rstrip("\r\n")  # the file ended without a newline: so does the edit
    b.add("exit", "move the loop's final else after the loop", start, end, moved)


# --- guard ----------------------------------------------------------------------------------------

_FIXED_INDEX = (ast.Constant, ast.UnaryOp)
_EMPTY_RAISES = frozenset({"max", "min"})


def _guarded_params(fn: ast.AST, stmt: ast.stmt) -> list[str]:
    """Parameters of ``fn`` that ``stmt`` indexes at a fixed position or gives to max/min."""
    params = set(_params(fn)) - {"self", "cls"}  # type: ignore[arg-type]
    found: dict[str, None] = {}
    for node in _sites(stmt):
        name: ast.AST | None = None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, _FIXED_INDEX):
            name = node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _EMPTY_RAISES
            and len(node.args) == 1
        ):
            name = node.args[0]
        if isinstance(name, ast.Name) and name.id in params:
            found.setdefault(name.id, None)
    return list(found)


def _needs_no_local(node: ast.AST, params: set[str]) -> bool:
    return all(
        n.id in params or n.id in ("len", "True", "False", "None")
        for n in ast.walk(node)
        if isinstance(n, ast.Name)
    )


def _indent_unit(src: SourceFile, stmt: ast.stmt) -> str:
    fn = src.enclosing_function(stmt)
    if fn is not None and fn.body:
        inner, outer = src.indent_of(fn.body[0]), src.indent_of(fn)
        if inner.startswith(outer) and len(inner) > len(outer):
            return inner[len(outer) :].decode("utf-8")
    return "    "


def guard_edits(b: _Builder, stmt: ast.stmt) -> None:
    """``if not xs: return <r>`` (or ``break`` in a loop) before a statement that fails on an
    empty parameter ``xs``."""
    src = b.src
    fn = src.enclosing_function(stmt)
    if fn is None or not src.alone_on_lines(stmt) or isinstance(stmt, ast.FunctionDef):
        return
    names = _guarded_params(fn, stmt)
    if not names:
        return
    params = set(_params(fn))
    options: dict[str, float] = {}
    for name in names:
        options.setdefault(f"return {name}", 1.0)
    for s in ast.walk(fn):
        if (
            isinstance(s, ast.Return)
            and s.value is not None
            and src.enclosing_function(s) is fn
            and _needs_no_local(s.value, params)
        ):
            text = src.text(s.value)
            if "\n" not in text:
                options.setdefault(f"return {text}", 0.8)
    if any(isinstance(a, _LOOPS) for a in _until(src, stmt, fn)):
        options.setdefault("break", 0.8)
    for text, weight in (("return []", 0.4), ("return 0", 0.4), ("return None", 0.3)):
        options.setdefault(text, weight)
    indent = src.indent_of(stmt).decode("utf-8")
    unit = _indent_unit(src, stmt)
    at = src.line_start(stmt.lineno)
    nl = src.newline
    for name in names:
        for exit_text, weight in options.items():
            text = f"{indent}if not {name}:{nl}{indent}{unit}{exit_text}{nl}"
            b.add("guard", f"guard empty {name}: {exit_text}", at, at, text, weight)


def _until(src: SourceFile, node: ast.AST, fn: ast.AST) -> Iterator[ast.AST]:
    for anc in src.ancestors(node):
        if anc is fn:
            return
        yield anc


# --- effect ---------------------------------------------------------------------------------------


def effect_edits(b: _Builder, stmt: ast.stmt) -> None:
    """An expression statement whose value is dropped: ``x == y`` / ``x - y`` -> ``x = y``,
    ``x + y`` -> ``x += y``."""
    if not isinstance(stmt, ast.Expr):
        return
    value = stmt.value
    src = b.src
    if (
        isinstance(value, ast.Compare)
        and len(value.ops) == 1
        and isinstance(value.ops[0], ast.Eq)
        and isinstance(value.left, (ast.Name, ast.Attribute, ast.Subscript))
    ):
        assigned = f"{src.text(value.left)} = {src.text(value.comparators[0])}"
        b.replace("effect", "== -> =", value, assigned)
    elif isinstance(value, ast.BinOp) and isinstance(
        value.left, (ast.Name, ast.Attribute, ast.Subscript)
    ):
        left, operand = src.text(value.left), src.text(value.right)
        if isinstance(value.op, ast.Sub):
            b.replace("effect", "- -> =", value, f"{left} = {operand}", 1.0)
        if isinstance(value.op, (ast.Add, ast.Sub, ast.Mult)):
            op = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}[type(value.op)]
            b.replace("effect", f"{op} -> {op}=", value, f"{left} {op}= {operand}", 0.7)
            if not isinstance(value.op, ast.Sub):
                b.replace("effect", f"{op} -> =", value, f"{left} = {operand}", 0.5)


# --- inplace --------------------------------------------------------------------------------------

_IN_PLACE = frozenset({"append", "extend", "insert", "remove", "sort", "reverse", "clear"})


def _receiver_ok(node: ast.AST) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def inplace_edits(b: _Builder, stmt: ast.stmt) -> None:
    """The ``None`` of an in-place method used as a value -> the call as a statement before,
    its receiver in its place (``ys = xs.sort()`` -> ``xs.sort()`` then ``ys = xs``)."""
    src = b.src
    if not src.alone_on_lines(stmt) or isinstance(stmt, (ast.Expr, *_LOOPS, ast.If)):
        return
    indent = src.indent_of(stmt).decode("utf-8")
    nl = src.newline
    first = src.line_start(stmt.lineno)
    last = src.line_end(stmt.end_lineno or stmt.lineno)
    whole = src.source[first:last].decode("utf-8")
    if not whole.endswith(("\n", "\r")):
        whole += nl
    for node in _sites(stmt):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _IN_PLACE
            and _receiver_ok(node.func.value)
        ):
            continue
        call = src.text(node)
        receiver = src.text(node.func.value)
        if "\n" in call:
            continue
        if isinstance(stmt, ast.Assign) and stmt.value is node and len(stmt.targets) == 1:
            target = src.text(stmt.targets[0])
            if target == receiver:
                b.add("inplace", "call it as a statement", first, last, f"{indent}{call}{nl}")
                continue
            b.add(
                "inplace",
                "call it as a statement, then assign its receiver",
                first,
                last,
                f"{indent}{call}{nl}{indent}{target} = {receiver}{nl}",
            )
            if isinstance(stmt.targets[0], ast.Name):
                # ``ys = xs.append(x)`` meant ``ys.append(x)``
                rest = call[src.span(node.func.value)[1] - src.span(node)[0] :]
                text = f"{indent}{target}{rest}{nl}"
                b.add("inplace", "call it on the target", first, last, text, 0.7)
            continue
        s, e = src.span(node)
        rel_s, rel_e = s - first, e - first
        raw = src.source[first:last]
        replaced = (raw[:rel_s] + receiver.encode("utf-8") + raw[rel_e:]).decode("utf-8")
        if not replaced.endswith(("\n", "\r")):
            replaced += nl
        text = f"{indent}{call}{nl}{replaced}"
        b.add("inplace", "call it first, use its receiver", first, last, text)


# --- element --------------------------------------------------------------------------------------


def element_edits(b: _Builder, stmt: ast.stmt) -> None:
    """``xs[k]`` at a fixed ``k`` inside ``for x in xs:`` -> ``x``."""
    src = b.src
    loops: list[tuple[str, str, ast.AST]] = []  # (collection, variable, loop), innermost first
    for a in src.ancestors(stmt):
        if (
            isinstance(a, (ast.For, ast.AsyncFor))
            and isinstance(a.iter, ast.Name)
            and isinstance(a.target, ast.Name)
        ):
            loops.append((a.iter.id, a.target.id, a))
    for node in _sites(stmt):
        if not _fixed_item(node):
            continue
        for collection, variable, loop in loops:
            if collection != node.value.id:  # type: ignore[attr-defined]
                continue
            text = src.text(node)
            b.replace("element", f"{text} -> {variable}", node, variable)
            # The same item written wherever the loop meant its variable (one slip, copied).
            alike = sorted(
                (src.span(n) for n in ast.walk(loop) if _fixed_item(n) and src.text(n) == text),
            )
            if len(alike) > 1:
                start, end = alike[0][0], alike[-1][1]
                subs = [(s, e, variable) for s, e in alike]
                what = f"{text} -> {variable} at its {len(alike)} uses in the loop"
                b.add("element", what, start, end, _splice(src, start, end, subs))


def _fixed_item(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Subscript)
        and isinstance(node.ctx, ast.Load)
        and isinstance(node.value, ast.Name)
        and isinstance(node.slice, _FIXED_INDEX)
    )


# --- advance --------------------------------------------------------------------------------------


def _assigned_in(body: list[ast.stmt], name: str) -> bool:
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store):
                return True
            if isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
                return True
    return False


def advance_edits(b: _Builder, stmt: ast.stmt) -> None:
    """``while n < k:`` whose body assigns neither side: ``n += 1`` (``n -= 1`` for ``>``) at
    the end of the body, for the local side when the other is a parameter (the limit)."""
    src = b.src
    if not isinstance(stmt, ast.While) or stmt.orelse or not isinstance(stmt.test, ast.Compare):
        return
    test = stmt.test
    if len(test.ops) != 1:
        return
    sides = [(test.left, False), (test.comparators[0], True)]
    last = stmt.body[-1]
    if not src.alone_on_lines(last) or isinstance(last, (ast.Return, ast.Break, ast.Continue)):
        return
    indent = src.indent_of(last).decode("utf-8")
    at = src.line_end(last.end_lineno or last.lineno)
    prefix = src.newline if src.source[at - 1 : at] not in (b"\n", b"\r") else ""
    names = [(side, flipped) for side, flipped in sides if isinstance(side, ast.Name)]
    if any(_assigned_in(stmt.body, side.id) for side, _ in names):
        return  # the loop moves one side on
    fn = src.enclosing_function(stmt)
    params = set(_params(fn)) if fn is not None else set()
    if any(side.id not in params for side, _ in names):  # a local counter, not the limit
        names = [(side, flipped) for side, flipped in names if side.id not in params]
    for side, flipped in names:
        rising = isinstance(test.ops[0], (ast.Lt, ast.LtE)) != flipped
        steps = ("+= 1", "-= 1") if rising else ("-= 1", "+= 1")
        for step, weight in zip(steps, (1.0, 0.3), strict=True):
            text = f"{prefix}{indent}{side.id} {step}{src.newline}"
            b.add("advance", f"{side.id} {step} at the end of the loop", at, at, text, weight)
