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
import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from treesearch.agents.mutation._source import SourceFile

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

_MAX_COPY_LINES = 3


@dataclass(frozen=True)
class Edit:
    """One candidate edit: replace bytes ``[start, end)`` of ``path`` with ``text``."""

    path: str
    """Workspace-relative path of the file (posix separators)."""
    line: int
    """First line of the statement the edit belongs to (the suspicious line)."""
    family: str
    """Operator family (one of ``FAMILIES``)."""
    operator: str
    """What the edit does, e.g. ``+ -> -`` or ``delete``."""
    start: int
    """Byte offset where the replaced text starts."""
    end: int
    """Byte offset where the replaced text ends (``start`` for a pure insertion)."""
    text: str
    """The replacement text."""
    weight: float = 1.0
    """Prior weight among the edits of its family on the same line (1: a likely slip, such as
    swapping an operator for its inverse or a constant off by one; less for the others)."""

    def apply(self, source: bytes) -> bytes:
        """The file's bytes after the edit."""
        return source[: self.start] + self.text.encode("utf-8") + source[self.end :]

    def result_key(self, source: bytes) -> str:
        """Identity of the program the edit produces (sha256 of path and new bytes)."""
        digest = hashlib.sha256(self.path.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(self.apply(source))
        return digest.hexdigest()

    def describe(self, source: bytes) -> str:
        """One line for transcripts: ``path:line family: `old` -> `new```."""
        old = _short(source[self.start : self.end].decode("utf-8", "replace"))
        where = f"{self.path}:{self.line} {self.family} ({self.operator})"
        return f"{where}: `{old}` -> `{_short(self.text)}`"

    def to_json(self) -> dict[str, object]:
        """Plain data for transcripts and caches."""
        return {
            "path": self.path,
            "line": self.line,
            "family": self.family,
            "operator": self.operator,
            "start": self.start,
            "end": self.end,
            "text": self.text,
            "weight": self.weight,
        }


def _short(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def check(src: SourceFile, edit: Edit) -> str | None:
    """Why ``edit`` is unusable (does not compile, or changes no AST node), or ``None``."""
    new = edit.apply(src.source)
    try:
        tree = ast.parse(new, filename=src.path)
        # Compiling the tree runs the symbol-table checks that parsing skips (a copied
        # ``break`` outside a loop, ``return`` outside a function, ``nonlocal`` errors).
        compile(tree, src.path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        return f"does not compile: {exc}"
    if ast.dump(tree) == src.dump():
        return "changes no AST node"
    return None


# --- precedence -----------------------------------------------------------------------------------

_ATOM = 20
_OP_PREC: dict[type, int] = {
    ast.Or: 1,
    ast.And: 2,
    ast.Not: 3,
    ast.BitOr: 5,
    ast.BitXor: 6,
    ast.BitAnd: 7,
    ast.LShift: 8,
    ast.RShift: 8,
    ast.Add: 9,
    ast.Sub: 9,
    ast.Mult: 10,
    ast.Div: 10,
    ast.FloorDiv: 10,
    ast.Mod: 10,
    ast.MatMult: 10,
    ast.USub: 11,
    ast.UAdd: 11,
    ast.Invert: 11,
    ast.Pow: 12,
}
_COMPARE_PREC = 4


def _prec(node: ast.AST) -> int:
    if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.BoolOp)):
        return _OP_PREC[type(node.op)]
    if isinstance(node, ast.Compare):
        return _COMPARE_PREC
    if isinstance(node, ast.IfExp):
        return 0
    if isinstance(node, (ast.Lambda, ast.NamedExpr, ast.Starred, ast.Yield, ast.YieldFrom)):
        return -1
    if isinstance(node, ast.Tuple):
        return -1  # an unparenthesised tuple must get parentheses inside an operator
    return _ATOM


def _needs_parens(child_prec: int, parent_prec: int, *, right: bool, power: bool) -> bool:
    """Whether an operand of precedence ``child_prec`` needs parentheses on that side of a binary
    operator of precedence ``parent_prec`` (``power``: the right-associative ``**``)."""
    if child_prec != parent_prec:
        return child_prec < parent_prec
    return right != power


def _parenthesized(src: SourceFile, node: ast.AST) -> bool:
    """True when the node's text is directly enclosed in ``( ... )``."""
    start, end = src.span(node)
    data = src.source
    i = start - 1
    while i >= 0 and data[i] in _SPACE:
        i -= 1
    j = end
    while j < len(data) and data[j] in _SPACE:
        j += 1
    return i >= 0 and data[i] == ord("(") and j < len(data) and data[j] == ord(")")


_SPACE = frozenset(b" \t\f\r\n\\")


def _operand_text(
    src: SourceFile, node: ast.AST, parent_prec: int, *, right: bool, power: bool
) -> str:
    text = src.text(node)
    if _needs_parens(_prec(node), parent_prec, right=right, power=power) and not _parenthesized(
        src, node
    ):
        return f"({text})"
    return text


def _fits_parent(src: SourceFile, node: ast.AST, new_prec: int) -> bool:
    """Whether ``node``, given precedence ``new_prec``, still parses the same way in its parent
    (without added parentheses)."""
    if _parenthesized(src, node):
        return True
    parent = src.parents.get(node)
    if isinstance(parent, ast.BinOp):
        pp = _OP_PREC[type(parent.op)]
        power = isinstance(parent.op, ast.Pow)
        return not _needs_parens(new_prec, pp, right=node is parent.right, power=power)
    if isinstance(parent, ast.UnaryOp):
        return new_prec >= _OP_PREC[type(parent.op)]
    if isinstance(parent, ast.Compare):
        return new_prec > _COMPARE_PREC
    if isinstance(parent, ast.BoolOp):
        return new_prec > _OP_PREC[type(parent.op)]
    if isinstance(parent, (ast.Attribute, ast.Subscript, ast.Call, ast.Await)):
        owner = (
            parent.value
            if isinstance(parent, (ast.Attribute, ast.Subscript, ast.Await))
            else parent.func
        )
        return node is not owner or new_prec >= _ATOM
    return True


def _wrap_if_needed(src: SourceFile, node: ast.AST, text: str, new_prec: int) -> str:
    return text if _fits_parent(src, node, new_prec) else f"({text})"


# --- operator tokens ------------------------------------------------------------------------------


def _token_in_gap(src: SourceFile, start: int, end: int) -> tuple[int, int] | None:
    """The operator token between two operands: the bytes of ``[start, end)`` that are not
    whitespace, parentheses, line continuations or comments. ``None`` if a comment splits it."""
    gap = src.source[start:end]
    keep: list[int] = []
    i = 0
    while i < len(gap):
        ch = gap[i : i + 1]
        if ch == b"#":
            while i < len(gap) and gap[i : i + 1] not in (b"\n", b"\r"):
                i += 1
            continue
        if ch not in (b" ", b"\t", b"\f", b"\n", b"\r", b"(", b")", b"\\"):
            keep.append(i)
        i += 1
    if not keep:
        return None
    first, last = keep[0], keep[-1]
    if b"#" in gap[first:last] or b"(" in gap[first:last] or b")" in gap[first:last]:
        return None
    return start + first, start + last + 1


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

# Related callables a slip of the pen confuses (PIT-style method swaps), both as builtins
# (``min(...)``) and as methods or module attributes (``xs.append``, ``math.floor``).
_CALL_SWAPS: dict[str, tuple[str, ...]] = {
    "min": ("max",),
    "max": ("min",),
    "any": ("all",),
    "all": ("any",),
    "floor": ("ceil",),
    "ceil": ("floor",),
    "append": ("extend",),
    "extend": ("append",),
    "lower": ("upper",),
    "upper": ("lower",),
    "startswith": ("endswith",),
    "endswith": ("startswith",),
    "lstrip": ("rstrip", "strip"),
    "rstrip": ("lstrip", "strip"),
    "strip": ("lstrip", "rstrip"),
    "find": ("rfind",),
    "rfind": ("find",),
    "index": ("rindex",),
    "rindex": ("index",),
    "keys": ("values", "items"),
    "values": ("keys", "items"),
    "items": ("keys", "values"),
    "pop": ("popleft",),
    "popleft": ("pop",),
    "appendleft": ("append",),
    "sorted": ("reversed",),
    "reversed": ("sorted",),
}


# --- the enumeration ------------------------------------------------------------------------------


class _Builder:
    """Collects the edits of one line."""

    def __init__(self, src: SourceFile, line: int, families: frozenset[str]) -> None:
        self.src = src
        self.line = line
        self.families = families
        self.out: list[Edit] = []
        self._seen: set[tuple[int, int, str]] = set()

    def add(
        self, family: str, operator: str, start: int, end: int, text: str, weight: float = 1.0
    ) -> None:
        if family not in self.families:
            return
        if self.src.source[start:end] == text.encode("utf-8"):
            return
        key = (start, end, text)
        if key in self._seen:
            return
        self._seen.add(key)
        self.out.append(Edit(self.src.path, self.line, family, operator, start, end, text, weight))

    def replace(
        self, family: str, operator: str, node: ast.AST, text: str, weight: float = 1.0
    ) -> None:
        start, end = self.src.span(node)
        self.add(family, operator, start, end, text, weight)


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


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


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


def _int_value(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) is int
    ):
        return -node.operand.value
    return None


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


# --- names ----------------------------------------------------------------------------------------


def _bound_names(body: Sequence[ast.AST]) -> list[str]:
    """Names bound in a function body (not inside nested scopes), in first-seen order."""
    seen: dict[str, None] = {}

    def visit(node: ast.AST) -> None:
        if isinstance(
            node,
            (
                ast.FunctionDef,
                ast.AsyncFunctionDef,
                ast.ClassDef,
                ast.Lambda,
                ast.ListComp,
                ast.SetComp,
                ast.DictComp,
                ast.GeneratorExp,
            ),
        ):
            return  # a nested scope (its own name is a function or class, not a variable)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            seen.setdefault(node.id, None)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            seen.setdefault(node.name, None)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for stmt in body:
        visit(stmt)
    return list(seen)


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> list[str]:
    a = fn.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    if a.vararg:
        names.append(a.vararg.arg)
    if a.kwarg:
        names.append(a.kwarg.arg)
    return names


def _module_variables(src: SourceFile) -> list[str]:
    """Names the module binds to plain values (functions, classes and imports left out)."""
    seen: dict[str, None] = {}
    for stmt in src.tree.body:
        targets: list[ast.AST] = []
        if isinstance(stmt, ast.Assign):
            targets = list(stmt.targets)
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
            targets = [stmt.target]
        for target in targets:
            for n in ast.walk(target):
                if isinstance(n, ast.Name):
                    seen.setdefault(n.id, None)
    return list(seen)


def _module_functions(src: SourceFile) -> list[str]:
    return [s.name for s in src.tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _scope(src: SourceFile, node: ast.AST) -> list[str]:
    """Variable names visible at ``node``: enclosing comprehension and lambda variables, the
    function's parameters and locals, module variables. ``self``/``cls`` are left out."""
    names: dict[str, None] = {}
    for anc in src.ancestors(node):
        if isinstance(anc, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            for gen in anc.generators:
                for target in ast.walk(gen.target):
                    if isinstance(target, ast.Name):
                        names.setdefault(target.id, None)
        elif isinstance(anc, ast.Lambda):
            for p in _params(anc):
                names.setdefault(p, None)
        elif isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for name in (*_params(anc), *_bound_names(anc.body)):
                names.setdefault(name, None)
            break
    functions = set(_module_functions(src))
    for name in _module_variables(src):
        if name not in functions:
            names.setdefault(name, None)
    for name in ("self", "cls"):
        names.pop(name, None)
    return list(names)


def _name_edits(b: _Builder, node: ast.Name) -> None:
    src = b.src
    parent = src.parents.get(node)
    if isinstance(parent, ast.Call) and parent.func is node:
        swaps = list(_CALL_SWAPS.get(node.id, ()))
        functions = _module_functions(src)
        if node.id in functions:
            swaps += [f for f in functions if f != node.id]
        for new in swaps:
            b.replace("name", f"call {node.id} -> {new}", node, new)
        return
    if isinstance(node.ctx, ast.Del):
        return
    scope = _scope(src, node)
    if node.id not in scope:
        return  # a builtin, an import, a function: not a variable
    if isinstance(node.ctx, ast.Store):
        # Rebinding a module variable from inside a function would need a ``global``.
        fn = src.enclosing_function(node)
        local = set(_bound_names(fn.body)) | set(_params(fn)) if fn is not None else set(scope)
        candidates = [n for n in scope if n in local]
    else:
        candidates = scope
    siblings = _siblings(src, node)
    for new in candidates:
        if new != node.id:
            # Names bound together (``lo, hi = ...``, ``for k, v in ...``, the parameters of a
            # function) are the ones a slip of the pen confuses most.
            weight = 1.0 if new in siblings else 0.5
            b.replace("name", f"{node.id} -> {new}", node, new, weight)


def _siblings(src: SourceFile, node: ast.Name) -> set[str]:
    """Names bound in the same binding as ``node.id`` (same target tuple, same parameter list,
    same comprehension) in the enclosing function or comprehensions."""
    out: set[str] = set()
    scopes: list[ast.AST] = []
    for anc in src.ancestors(node):
        if isinstance(anc, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda)):
            scopes.append(anc)
        elif isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef)):
            scopes.append(anc)
            break
    for scope in scopes:
        groups: list[set[str]] = []
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            groups.append(set(_params(scope)))
        for n in ast.walk(scope):
            targets: list[ast.AST] = []
            if isinstance(n, ast.Assign):
                targets = list(n.targets)
            elif isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)):
                targets = [n.target]
            elif isinstance(n, ast.withitem) and n.optional_vars is not None:
                targets = [n.optional_vars]
            for target in targets:
                names = {t.id for t in ast.walk(target) if isinstance(t, ast.Name)}
                if len(names) > 1:
                    groups.append(names)
        for group in groups:
            if node.id in group:
                out |= group
    out.discard(node.id)
    return out


def _attribute_edits(b: _Builder, node: ast.Attribute) -> None:
    src = b.src
    start, end = src.span(node)
    attr_start = end - len(node.attr.encode("utf-8"))
    if src.source[attr_start:end] != node.attr.encode("utf-8"):
        return
    parent = src.parents.get(node)
    if isinstance(parent, ast.Call) and parent.func is node:
        for new in _CALL_SWAPS.get(node.attr, ()):
            b.add("name", f".{node.attr} -> .{new}", attr_start, end, new)
        return
    if not isinstance(node.value, ast.Name):
        return
    base = node.value.id
    owner: ast.AST | None = src.enclosing_function(node)
    if base in ("self", "cls"):
        owner = src.enclosing_class(node) or owner
    if owner is None:
        owner = src.tree
    called: set[str] = set()
    attrs: dict[str, None] = {}
    for n in ast.walk(owner):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            called.add(n.func.attr)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == base:
            attrs.setdefault(n.attr, None)
    for new in attrs:
        if new != node.attr and new not in called:
            b.add("name", f"{base}.{node.attr} -> {base}.{new}", attr_start, end, new)


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


# --- helpers --------------------------------------------------------------------------------------


def _splice(src: SourceFile, start: int, end: int, subs: Sequence[tuple[int, int, str]]) -> str:
    """The text of ``[start, end)`` with non-overlapping sub-replacements applied."""
    out: list[bytes] = []
    pos = start
    for s, e, text in sorted(subs, key=lambda t: (t[0], t[1])):
        out.append(src.source[pos:s])
        out.append(text.encode("utf-8"))
        pos = e
    out.append(src.source[pos:end])
    return b"".join(out).decode("utf-8")
