"""Candidate edits and what every edit family shares: the ``Edit`` value, the compile check,
operator precedence (to add parentheses only where needed), operator tokens, the per-line
builder. See ``operators`` for the families."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

from treesearch.agents.mutation._source import SourceFile

__all__ = ["Edit", "check"]


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


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


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
