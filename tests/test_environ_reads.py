"""Only the CLI reads the environment as settings (issue #32, item 7): every other module that
touches ``os.environ`` is on a short list, each for a stated reason, and the list is exact."""

from __future__ import annotations

import ast
from pathlib import Path

import treesearch

_NAMES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}

ALLOWED = {
    # The CLI: it reads the variables the docs name and passes values down.
    "treesearch/_cli_common.py": "the CLI",
    # What a child process starts from: this process's environment, inherited.
    "treesearch/_environ.py": "the base of every child's environment",
    # The API key, looked up by the variable name the config gives (docs/llm.md).
    "treesearch/agents/llm/client.py": "the API key by name",
    # Code that runs in the interpreter of the tests, in the child.
    "treesearch/scoring/pytest_order.py": "a pytest plugin in the child",
    "treesearch/scoring/pytest_probe.py": "a pytest plugin in the child",
    "treesearch/scoring/_warm_server.py": "the warm server, in the tests' interpreter",
    "treesearch/scoring/_warm_speed.py": "the warm server, in the tests' interpreter",
}


def _reads_environment(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        read = (
            isinstance(node, ast.Attribute)
            and node.attr in _NAMES
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        )
        imported = (
            isinstance(node, ast.ImportFrom)
            and node.module == "os"
            and any(alias.name in _NAMES for alias in node.names)
        )
        if read or imported:
            return True
    return False


def _modules_reading_the_environment() -> set[str]:
    root = Path(treesearch.__file__).parent
    found = set()
    for path in sorted(root.rglob("*.py")):
        if _reads_environment(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            found.add(path.relative_to(root.parent).as_posix())
    return found


def test_only_the_listed_modules_touch_the_environment() -> None:
    found = _modules_reading_the_environment()
    assert found - set(ALLOWED) == set(), (
        "a module reads the environment: take the value as an argument"
    )
    # A module that no longer reads it leaves the list, so the list stays a true statement.
    assert set(ALLOWED) - found == set()


def test_the_check_sees_each_way_of_reading_the_environment() -> None:
    for source in (
        "import os\nx = os.environ['A']\n",
        "import os\nx = os.getenv('A')\n",
        "from os import environ\n",
        "import os\nos.environ.pop('A', None)\n",
    ):
        assert _reads_environment(ast.parse(source))
    assert not _reads_environment(ast.parse("import os\nx = os.path.join('a')\n"))
