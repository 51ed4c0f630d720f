"""Helpers for the report tests: a small real project with two independent bugs (so that fixing
them in either order meets in one state: a transposition), its search config, and a headless
Chromium driven by playwright."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from treesearch.app import SearchOutcome, run_from_config
from treesearch.config import validate

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
TEST_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

MATHS = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a + b\n"
TESTS = (
    "from maths import add, mul\n\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_mul():\n    assert mul(2, 3) == 6\n\n\n"
    "def test_zero():\n    assert add(0, 0) == 0\n"
)
FIX_ADD = {"replace": "maths.py", "old": "return a - b", "new": "return a + b", "check": False}


def two_bug_project(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "maths.py").write_text(MATHS)
    (folder / "tests").mkdir()
    (folder / "tests" / "test_maths.py").write_text(TESTS)
    (folder / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    return folder


def config(tmp: Path, workspace: Path, *, policy: str = "bfs", **extra: Any) -> dict[str, Any]:
    """Two commuting fixes (``fix-add`` edits add's line, ``fix-mul`` mul's: bfs reaches both
    fixed by two paths) and a strategy that changes nothing (a no-op)."""
    mul_only = {
        "replace": "maths.py",
        "old": "def mul(a, b):\n    return a + b",
        "new": "def mul(a, b):\n    return a * b",
        "check": False,
    }
    cfg: dict[str, Any] = {
        "workspace": {"path": str(workspace)},
        "store": {"home": str(tmp / "home")},
        "task": "Fix the tests.",
        "strategies": {
            "fix-add": {"kind": "scripted", "steps": [FIX_ADD]},
            "fix-mul": {"kind": "scripted", "steps": [mul_only]},
            "nothing": {
                "kind": "scripted",
                "steps": [{"replace": "maths.py", "old": "zzz", "new": "y", "check": False}],
            },
        },
        "scoring": {"search_tests": {"command": f"{PYTEST} tests", "timeout": 60, "env": TEST_ENV}},
        "search": {
            "policy": policy,
            "seed": 0,
            "stop_on_perfect": False,
            "budget": {"expansions": 12},
        },
        "sandbox": {"writable": [str(tmp)]},
        "output": {"runs_dir": str(tmp / "runs"), "instance_id": "maths"},
    }
    for key, value in extra.items():
        cfg[key] = value
    return cfg


def run_search(tmp: Path, name: str, **kw: Any) -> SearchOutcome:
    """A real search of a fresh two-bug project under ``tmp/name``."""
    ws = two_bug_project(tmp / name / "ws")
    cfg = config(tmp / name, ws, **kw)
    loaded = validate(cfg, source="<test>", base_dir=tmp)
    return run_from_config(loaded, runs_dir=tmp / name / "runs")


def graph_nodes(run_dir: Path) -> list[dict[str, Any]]:
    return list(json.loads((run_dir / "graph.json").read_text())["nodes"])


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


@contextmanager
def browser() -> Iterator[Any]:
    """A headless Debian Chromium driven by playwright (never playwright's own downloads); the
    test skips, saying why, only when no Chromium is installed."""
    exe = chromium_path()
    if exe is None:
        pytest.skip("no Chromium on this machine (.ci/run installs Debian's `chromium`)")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')"
    )
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_FLAGS)
        try:
            yield b
        finally:
            b.close()


@contextmanager
def open_page(b: Any, path: Path) -> Iterator[tuple[Any, list[str]]]:
    """``path`` opened in a new page; the list collects console errors and uncaught exceptions,
    and every request that is not for a local file (a page must need no network)."""
    page = b.new_page(viewport={"width": 1400, "height": 900})
    problems: list[str] = []
    page.on(
        "console",
        lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None,
    )
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on(
        "request",
        lambda r: (
            None
            if r.url.startswith(("file:", "data:", "about:"))
            else problems.append(f"network request: {r.url}")
        ),
    )
    page.goto(path.resolve().as_uri())
    page.wait_for_load_state("load")
    try:
        yield page, problems
    finally:
        page.close()
