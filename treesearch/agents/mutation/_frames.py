"""Where the failing tests point: test files (never ranked), traceback frames, the functions a
failing assertion calls, and the project's files and statement heads (see ``localize``)."""

from __future__ import annotations

import ast
import fnmatch
import os
import re
from collections.abc import Sequence
from pathlib import Path

from treesearch.agents.mutation._source import SourceFile

__all__ = ["called_in_failure", "is_test_path"]

# --- test files -----------------------------------------------------------------------------------

_TEST_DIRS = frozenset({"tests", "test", "testing"})


def is_test_path(rel: str, exclude: Sequence[str] = ()) -> bool:
    """True for files that belong to the test suite (never edited, never ranked): ``test_*.py``,
    ``*_test.py``, ``conftest.py``, anything under a ``tests``/``test``/``testing`` folder, and
    paths matching one of the ``exclude`` globs (``fnmatch`` on the path and on the name)."""
    parts = rel.split("/")
    name = parts[-1]
    if name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py"):
        return True
    if any(p in _TEST_DIRS for p in parts[:-1]):
        return True
    return any(fnmatch.fnmatch(rel, g) or fnmatch.fnmatch(name, g) for g in exclude)


# --- tracebacks -----------------------------------------------------------------------------------

_TB_PYTEST = re.compile(r"^(\S[^\n]*?\.py):(\d+):", re.MULTILINE)
_TB_NATIVE = re.compile(r'File "([^"\n]+\.py)", line (\d+)')


def _traceback_lines(text: str) -> list[tuple[str, int]]:
    found = [(m.group(1), int(m.group(2))) for m in _TB_PYTEST.finditer(text)]
    found += [(m.group(1), int(m.group(2))) for m in _TB_NATIVE.finditer(text)]
    return found


# --- the spectrum ---------------------------------------------------------------------------------


class _Files:
    """Maps raw file names to workspace-relative project files and lines to statement heads."""

    def __init__(self, workspace: Path, cwd: Path, exclude: Sequence[str]) -> None:
        self.root = os.path.realpath(workspace)
        self.cwd = cwd
        self.exclude = tuple(exclude)
        self._rel: dict[str, str | None] = {}
        self._heads: dict[str, dict[int, int] | None] = {}

    def rel(self, name: str) -> str | None:
        """Workspace-relative path of a project (non-test) ``.py`` file, else ``None``."""
        if name in self._rel:
            return self._rel[name]
        result: str | None = None
        candidates = (
            [name] if os.path.isabs(name) else [str(self.cwd / name), os.path.join(self.root, name)]
        )
        for candidate in candidates:
            real = os.path.realpath(candidate)
            if not real.startswith(self.root + os.sep) or not os.path.isfile(real):
                continue
            rel = os.path.relpath(real, self.root).replace(os.sep, "/")
            if rel.endswith(".py") and not is_test_path(rel, self.exclude):
                result = rel
            break
        self._rel[name] = result
        return result

    def head(self, rel: str, line: int) -> int | None:
        """The first line of the statement that holds ``line`` (``None``: not a statement)."""
        if rel not in self._heads:
            try:
                source = Path(self.root, rel).read_bytes()
                self._heads[rel] = SourceFile(rel, source).heads
            except (OSError, SyntaxError, ValueError):
                self._heads[rel] = None
        heads = self._heads[rel]
        if heads is None:
            return line
        return heads.get(line)

    def function_lines(self, rel: str, names: set[str]) -> set[int]:
        """Statement heads inside the functions (and methods) of ``rel`` named in ``names``."""
        try:
            src = SourceFile(rel, Path(self.root, rel).read_bytes())
        except (OSError, SyntaxError, ValueError):
            return set()
        out: set[int] = set()
        for node in ast.walk(src.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
                last = node.end_lineno or node.lineno
                out.update(h for ln, h in src.heads.items() if node.lineno < ln <= last)
        return out

    def project_files(self, limit: int = 200) -> list[str]:
        """Project (non-test) ``.py`` files of the workspace, hidden folders left out."""
        out: list[str] = []
        for folder, dirs, names in os.walk(self.root):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
            for name in sorted(names):
                rel = self.rel(os.path.join(folder, name))
                if rel is not None:
                    out.append(rel)
                    if len(out) >= limit:
                        return out
        return out


_CALLED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_WHERE_FUNCTION = re.compile(r"<(?:function|bound method) (?:[\w.]+\.)?(\w+)")


def called_in_failure(text: str) -> set[str]:
    """Names of functions the failing assertion calls, read from pytest's failure text: the
    failing line (``>   assert f(x) == 3``) and the ``where`` lines (``<function f at ...>``)."""
    names: set[str] = set()
    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(">"):
            names.update(_CALLED.findall(stripped[1:]))
        elif stripped.startswith("E"):
            names.update(_WHERE_FUNCTION.findall(stripped))
    return names - {"assert", "len", "print", "isinstance", "str", "repr"}
