"""A parsed view of one Python source file that maps AST positions to byte offsets.

``ast`` gives ``lineno``/``col_offset``/``end_lineno``/``end_col_offset`` where the columns are
UTF-8 *byte* offsets into the line, so every position here is a byte offset into the file's
bytes; splicing bytes leaves everything else (comments, formatting, other lines) untouched.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

__all__ = ["SourceFile", "statement_heads"]

_NEWLINE = re.compile(rb"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"

# Statements whose body holds further statements: only their header belongs to their line.
_COMPOUND = (
    ast.If,
    ast.While,
    ast.For,
    ast.AsyncFor,
    ast.With,
    ast.AsyncWith,
    ast.Try,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
)


class SourceFile:
    """One file's bytes, its AST, parent links and line/offset tables.

    Raises ``SyntaxError`` or ``ValueError`` (e.g. a NUL byte) for a file that does not parse,
    and ``UnicodeDecodeError`` for one that is not UTF-8 (such files are never edited).
    """

    def __init__(self, path: str, source: bytes) -> None:
        self.path = path
        """Workspace-relative path (posix)."""
        self.source = source
        """The file's bytes."""
        source.decode("utf-8")  # edits are spliced as UTF-8 text: refuse other encodings early
        self.tree: ast.Module = ast.parse(source, filename=path)
        """The parsed module."""
        self.parents: dict[ast.AST, ast.AST] = {}
        """Child node -> parent node."""
        for parent in ast.walk(self.tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
        skip = len(_BOM) if source.startswith(_BOM) else 0
        # ast columns on line 1 count from after a BOM, as the tokenizer drops it.
        self.line_starts: list[int] = [skip] + [m.end() for m in _NEWLINE.finditer(source)]
        """Byte offset where each line starts (index 0 is line 1)."""
        self.heads: dict[int, int] = statement_heads(self.tree)
        """Any line inside a statement (or a compound statement's header) -> that statement's
        first line."""
        self.newline = _first_newline(source)
        """The file's newline sequence (``\\n`` when it has none)."""
        self._by_line: dict[int, list[ast.stmt]] | None = None
        self._dump: str | None = None

    # --- positions --------------------------------------------------------------------------------

    def offset(self, lineno: int, col: int) -> int:
        """Byte offset of (1-based line, byte column)."""
        return self.line_starts[lineno - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        """``(start, end)`` byte offsets of a node with a position."""
        start = self.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        end_line = node.end_lineno  # type: ignore[attr-defined]
        end_col = node.end_col_offset  # type: ignore[attr-defined]
        return start, self.offset(end_line, end_col)

    def text(self, node: ast.AST) -> str:
        """The node's exact source text."""
        start, end = self.span(node)
        return self.source[start:end].decode("utf-8")

    def line_start(self, lineno: int) -> int:
        """Offset of the first byte of line ``lineno`` (the file length past the last line)."""
        if lineno - 1 < len(self.line_starts):
            return self.line_starts[lineno - 1]
        return len(self.source)

    def line_of(self, offset: int) -> int:
        """1-based line that holds byte ``offset``."""
        lo, hi = 0, len(self.line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    def line_end(self, lineno: int) -> int:
        """Offset just past line ``lineno``'s newline (or the end of the file)."""
        return self.line_start(lineno + 1)

    def alone_on_lines(self, node: ast.AST) -> bool:
        """True when only indentation precedes the node on its first line and only whitespace
        or a comment follows it on its last line."""
        start, end = self.span(node)
        before = self.source[self.line_start(node.lineno) : start]  # type: ignore[attr-defined]
        after = self.source[end : self.line_end(node.end_lineno)]  # type: ignore[attr-defined]
        rest = after.strip()
        return not before.strip() and (not rest or rest.startswith(b"#"))

    def indent_of(self, node: ast.AST) -> bytes:
        """The bytes before the node on its first line (its indentation if ``alone_on_lines``)."""
        start, _ = self.span(node)
        return self.source[self.line_start(node.lineno) : start]  # type: ignore[attr-defined]

    def dump(self) -> str:
        """``ast.dump`` of the module (computed once)."""
        if self._dump is None:
            self._dump = ast.dump(self.tree)
        return self._dump

    # --- structure --------------------------------------------------------------------------------

    def statements_at(self, line: int) -> list[ast.stmt]:
        """Statements whose first line is ``line`` (outermost first)."""
        if self._by_line is None:
            table: dict[int, list[ast.stmt]] = {}
            for node in _statements(self.tree):
                table.setdefault(node.lineno, []).append(node)
            self._by_line = table
        return list(self._by_line.get(line, ()))

    def enclosing_function(self, node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The nearest function definition around ``node`` (``None`` at module level)."""
        current = self.parents.get(node)
        while current is not None:
            if isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return current
            current = self.parents.get(current)
        return None

    def enclosing_class(self, node: ast.AST) -> ast.ClassDef | None:
        """The nearest class definition around ``node``."""
        current = self.parents.get(node)
        while current is not None:
            if isinstance(current, ast.ClassDef):
                return current
            current = self.parents.get(current)
        return None

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        """Parents of ``node``, innermost first."""
        current = self.parents.get(node)
        while current is not None:
            yield current
            current = self.parents.get(current)


def _statements(tree: ast.AST) -> Iterator[ast.stmt]:
    """Every statement, in source order (a parent before its children)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.stmt):
            yield node
        yield from _statements(node)


def statement_heads(tree: ast.Module) -> dict[int, int]:
    """Map each line that belongs to a statement to that statement's first line.

    A simple statement owns all its lines; a compound one owns its header (up to the line before
    its first body statement). Inner statements win over outer ones, so a line of a loop body
    maps to the body statement, not to the loop.
    """
    heads: dict[int, int] = {}
    for node in _statements(tree):  # parents first, so children overwrite
        last = node.end_lineno or node.lineno
        if isinstance(node, _COMPOUND):
            body = getattr(node, "body", None)
            if body:
                last = max(node.lineno, body[0].lineno - 1)
        for line in range(node.lineno, last + 1):
            heads[line] = node.lineno
    return heads


def _first_newline(source: bytes) -> str:
    m = _NEWLINE.search(source)
    return m.group(0).decode("ascii") if m else "\n"
