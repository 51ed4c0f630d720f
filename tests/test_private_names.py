"""pytest's and pluggy's private internals (``_pytest``, ``pluggy._hooks``) and the import
system's (``_imp``) are named in one documented module only (issue 32): any pytest release can
move them, and that module is the one the pytest matrix runs against every accepted version."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "treesearch"
THE_MODULE = "scoring/_warm_speed.py"
_PRIVATE = ("_pytest", "pluggy._hooks", "_imp")


def _private(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in _PRIVATE)


def private_names(source: str) -> list[str]:
    """The private names ``source`` imports, spells as a module name in a string (for
    ``sys.modules`` or ``importlib``) or reaches as ``pluggy._hooks``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if _private(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found += [node.module] if _private(node.module) else []
            found += [
                f"{node.module}.{a.name}"
                for a in node.names
                if _private(f"{node.module}.{a.name}") and not _private(node.module)
            ]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += [node.value] if _private(node.value.split(" ")[0]) else []
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            dotted = f"{node.value.id}.{node.attr}"
            found += [dotted] if _private(dotted) else []
    return found


def test_private_pytest_names_appear_only_in_the_one_documented_module() -> None:
    outside = {
        str(path.relative_to(PACKAGE)): names
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).as_posix() != THE_MODULE
        and (names := private_names(path.read_text(encoding="utf-8")))
    }
    assert outside == {}
    # The scan finds them where they are (it is not blind), and the module says it holds them.
    text = (PACKAGE / THE_MODULE).read_text(encoding="utf-8")
    assert {"_pytest.assertion", "_imp"} <= set(private_names(text))
    assert "The one module of treesearch that names pytest's private internals" in text


def test_private_name_scan_finds_each_way_of_naming_them() -> None:
    samples = {
        "import _pytest.config": ["_pytest.config"],
        "from _pytest.assertion import rewrite": ["_pytest.assertion"],
        "from pluggy import _hooks": ["pluggy._hooks"],
        "import pluggy\nx = pluggy._hooks": ["pluggy._hooks"],
        "from _imp import _fix_co_filename": ["_imp"],
        "import sys\nsys.modules.get('_pytest.config')": ["_pytest.config"],
        "import importlib\nimportlib.import_module('_pytest.' + 'x')": ["_pytest."],
        "import pytest\nfrom pluggy import HookimplMarker": [],
        "PLUGIN = '-p no:cacheprovider'\nPATTERN = r'(?:_pytest\\.outcomes\\.)?Exit'": [],
        "def is_pytest(): return _pytest_like": [],
    }
    for source, expected in samples.items():
        assert private_names(source) == expected, source
