"""Set up and read the session probe (``pytest_probe``) of a pytest run.

``probe_env`` copies the plugin into a folder outside the workspace (once per process: the
runner keeps it, ``lifecycle.process_dir``) and returns the variables that make pytest load it;
``read_probe`` reads what it recorded. A run whose probe left nothing (the command did not pass
the variables on to pytest, pytest died before the end of its session) falls back to what the
output and the report say.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from treesearch._atomic import write_text
from treesearch.scoring import pytest_probe
from treesearch.scoring._words import shell_words

if TYPE_CHECKING:
    from treesearch.scoring.spec import TestSpec

MODULE = "_treesearch_pytest_probe"
"""Module name the plugin is loaded under."""
ORDER_MODULE = "_treesearch_pytest_order"
"""Module name ``pytest_order`` is loaded under (when the run's env holds ``ORDER_ENV``)."""
ORDER_ENV = "TREESEARCH_PYTEST_ORDER"
"""``pytest_order.ENV`` (that module imports pytest, so treesearch never imports it)."""
_ORDER_FILE = Path(__file__).with_name("pytest_order.py")
_MAX_PROBE_BYTES = 16 * 1024 * 1024

# Interpreter options that make Python ignore PYTHONPATH (-I isolated, -E no environment): with
# them the plugin could not be imported, and pytest would refuse to start.
_ISOLATED = re.compile(r"^-[A-Za-z]*[IE][A-Za-z]*$")
_PYTHON = re.compile(r"^python[\d.]*$")
# pytest's banner for a session cut short (used when the probe left nothing).
_INTERRUPT_BANNER = re.compile(
    r"^!{3,} (?P<what>(?:_pytest\.outcomes\.)?Exit\b.*?|KeyboardInterrupt\b.*?"
    r"|Interrupted: (?!\d+ errors? during collection|stopping after ).*?) !{3,}$",
    re.MULTILINE,
)


@dataclass(frozen=True)
class Probe:
    """What the plugin recorded about one pytest session."""

    collected: int | None = None
    """Tests collected (after deselection); ``None`` when collection did not finish here."""
    finished: int = 0
    """Tests whose run protocol finished."""
    collect_errors: tuple[str, ...] = ()
    """Node ids of the collectors (modules, packages) that failed to collect."""
    interrupted: str = ""
    """The exception that cut the session short (``Exit: ...``, ``KeyboardInterrupt``)."""
    exitstatus: int | None = None
    """pytest's exit status as the session saw it."""
    maxfail_stop: str = ""
    """Set when ``-x``/``--maxfail`` stopped the session after failures."""
    xpassed: frozenset[str] = field(default_factory=frozenset)
    """Node ids of the tests marked xfail that passed."""
    not_run: frozenset[str] = field(default_factory=frozenset)
    """Node ids of the tests marked ``xfail(run=False)``: never run."""


def probe_env(
    command: str | Sequence[str],
    folder: Path,
    out_file: Path,
    env: Mapping[str, str],
    inherited: Mapping[str, str],
) -> dict[str, str]:
    """The variables that load the probe into pytest (empty when it cannot be loaded).

    ``env`` is what the spec sets, ``inherited`` the environment the command inherits; the
    plugin gives the tests ``PYTEST_PLUGINS`` and ``PYTHONPATH`` back as they were. When ``env``
    holds ``ORDER_ENV`` (a screen or per-test limits, see ``scoring.order``), that
    plugin is copied beside the probe and loaded too.
    """
    if _isolated(command):
        return {}
    _install(Path(pytest_probe.__file__), folder / f"{MODULE}.py")
    out: dict[str, str] = {pytest_probe.ENV_FILE: str(out_file)}
    plugins = MODULE
    if ORDER_ENV in env:  # selection, stop at first failure, per-test limits
        _install(_ORDER_FILE, folder / f"{ORDER_MODULE}.py")
        plugins = f"{ORDER_MODULE},{MODULE}"
    for name, saved in (
        ("PYTEST_PLUGINS", pytest_probe.ENV_PLUGINS),
        ("PYTHONPATH", pytest_probe.ENV_PATH),
    ):
        before = env.get(name, inherited.get(name))
        if name == "PYTEST_PLUGINS":
            out[name] = f"{before},{plugins}" if before else plugins
        else:
            out[name] = f"{folder}{os.pathsep}{before}" if before else str(folder)
        if before is not None:
            out[saved] = before
    return out


_INSTALLED: set[tuple[int, Path]] = set()


def _install(source: Path, dest: Path) -> None:
    """Copy a plugin to ``dest`` unless this process did already and it is still there (the
    folder is kept between runs: ``lifecycle.process_dir``); a reader never sees half of it."""
    key = (os.getpid(), dest)
    if key in _INSTALLED and os.path.isfile(dest):
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    write_text(dest, source.read_text(encoding="utf-8"))
    _INSTALLED.add(key)


def _isolated(command: str | Sequence[str]) -> bool:
    if isinstance(command, str):
        try:
            words = shell_words(command)
        except ValueError:
            return False
    else:
        words = list(command)
    # Only a Python interpreter's own options count: those between the interpreter and `-m`,
    # `-c` or the script (pytest's `-rE` is not Python's -E).
    for i, word in enumerate(words):
        if not _PYTHON.match(os.path.basename(word)):
            continue
        for option in words[i + 1 :]:
            if option in ("-m", "-c") or not option.startswith("-"):
                break
            if _ISOLATED.match(option):
                return True
    return False


def read_probe(path: Path) -> Probe | None:
    """The probe's record, or ``None`` when the plugin wrote nothing usable."""
    try:
        with open(path, "rb") as handle:
            data = json.loads(handle.read(_MAX_PROBE_BYTES))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    try:
        collected = data.get("collected")
        exitstatus = data.get("exitstatus")
        return Probe(
            collected=None if collected is None else int(collected),
            finished=int(data.get("finished") or 0),
            collect_errors=tuple(str(x) for x in data.get("collect_errors") or ()),
            interrupted=str(data.get("interrupted") or ""),
            exitstatus=None if exitstatus is None else int(exitstatus),
            maxfail_stop=str(data.get("maxfail_stop") or ""),
            xpassed=frozenset(str(x) for x in data.get("xpassed") or ()),
            not_run=frozenset(str(x) for x in data.get("not_run") or ()),
        )
    except (TypeError, ValueError):
        return None


def interrupt_banner(output: str) -> str:
    """What pytest's ``!!! ... !!!`` banner says cut the session short (empty if none)."""
    found = _INTERRUPT_BANNER.search(output)
    return found.group("what").strip() if found else ""


def supports(spec: TestSpec) -> bool:
    """True when runs of ``spec`` can load the ``pytest_order`` plugin."""
    return spec.is_pytest and not _isolated(spec.command)


def unsupported(spec: TestSpec) -> str | None:
    """Why ``spec`` cannot run a screen or per-test limits (``None``: it can)."""
    if supports(spec):
        return None
    if not spec.is_pytest:
        return "it needs a pytest command"
    return "the command's Python ignores PYTHONPATH (-I or -E), so the plugin cannot load"
