"""The ``name`` family: a variable to another name in scope, an attribute to another one used
on the same object, a called function to a related one (see ``operators``)."""

from __future__ import annotations

import ast
from collections.abc import Sequence

from treesearch.agents.mutation._edit import _Builder
from treesearch.agents.mutation._source import SourceFile

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
