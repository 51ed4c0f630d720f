"""How treesearch's modules import each other. No import cycle: a split whose parts import each
other back says the split is wrong (see docs/architecture.md). Every import counts, at module level or in
a function (a deferred import hides a cycle, it does not remove it); imports only a type checker
sees (``if TYPE_CHECKING:``) do not."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parent.parent / "treesearch"


def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _type_only(tree: ast.AST) -> set[int]:
    """The nodes under ``if TYPE_CHECKING:``."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                out.update(id(n) for n in ast.walk(stmt))
    return out


def import_graph(root: Path) -> nx.DiGraph:
    """Module -> the treesearch modules it imports (``from pkg import sub``: ``pkg.sub`` when
    ``sub`` is a module, else ``pkg``)."""
    mods = _modules(root)
    graph = nx.DiGraph()
    for name, path in mods.items():
        graph.add_node(name)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_only(tree)
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in mods else base
                    for alias in node.names
                ]
            for target in targets:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph.add_edge(name, target)
    return graph


def cycles(graph: nx.DiGraph) -> list[list[str]]:
    return [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]


def test_treesearch_has_no_import_cycle() -> None:
    graph = import_graph(PACKAGE)
    assert graph.number_of_nodes() > 100 and graph.number_of_edges() > 300  # it read the code
    assert cycles(graph) == []


def test_the_check_sees_a_cycle_through_a_deferred_import(tmp_path: Path) -> None:
    pkg = tmp_path / "treesearch"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from treesearch.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .. import a\n    return a\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from treesearch import a\n"
    )
    (pkg / "d.py").write_text("from treesearch.c import x\n")
    graph = import_graph(pkg)
    assert cycles(graph) == [["treesearch.a", "treesearch.sub.b"]]
    assert not graph.has_edge("treesearch.c", "treesearch.a")  # a type checker's import
    assert graph.has_edge("treesearch.d", "treesearch.c")


def test_the_controller_names_protocols_only() -> None:
    """Importing the search controller loads no store, no test runner and no config models:
    it works through the protocols in ``treesearch.types`` and ``search.work``, in one process
    or with a pool of workers."""
    code = "import sys, treesearch.search.controller\nprint('\\n'.join(sorted(sys.modules)))\n"
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = set(proc.stdout.split())
    assert "treesearch.search.controller" in loaded
    heavy = {
        "treesearch.store",
        "treesearch.store.shadow",
        "treesearch.scoring.scorer",
        "treesearch.scoring.runner",
        "treesearch.scoring.warm",
        "treesearch.search.parallel",
        "treesearch.agents.configs",
        "pydantic",
        "git",
    }
    assert sorted(heavy & loaded) == []
