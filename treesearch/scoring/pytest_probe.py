"""A pytest plugin the runner loads into pytest runs: what happened to the session as a whole.

The JUnit report lists the tests that ran; it cannot say that the session was cut short
(``pytest.exit()`` in a test, a ``KeyboardInterrupt``), how many tests were collected, which
modules failed to collect, or which expected failures were never run. This plugin records those
into a JSON side file at the end of the session, and the runner reads it next to the report.

It is copied into a temporary folder outside the workspace and loaded through ``PYTEST_PLUGINS``
and ``PYTHONPATH``; the side file's path comes in ``TREESEARCH_PYTEST_PROBE``. It removes those
from ``os.environ`` at import, so a pytest that the tests start themselves does not load it
again. Standard library only, and Python 3.7 syntax: it runs in the interpreter of the tests.
"""

from __future__ import annotations

import json
import os
from typing import Any

ENV_FILE = "TREESEARCH_PYTEST_PROBE"
ENV_PLUGINS = "TREESEARCH_PYTEST_PROBE_PLUGINS"
ENV_PATH = "TREESEARCH_PYTEST_PROBE_PATH"

_OUT = os.environ.pop(ENV_FILE, None)


def _restore(name: str, saved: str) -> None:
    # Give the tests (and whatever they start) back the variable as it was before the probe.
    value = os.environ.pop(saved, None)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


if _OUT is not None:  # loaded as the probe; a plain import (for the names above) changes nothing
    _restore("PYTEST_PLUGINS", ENV_PLUGINS)
    _restore("PYTHONPATH", ENV_PATH)

_state: dict[str, Any] = {
    "collected": None,
    "finished": [],
    "collect_errors": [],
    "interrupted": "",
    "exitstatus": None,
    "maxfail_stop": "",
    "xpassed": [],
    "not_run": [],
}
_finished: set[str] = set()
_written = [False]


def pytest_collectreport(report: Any) -> None:
    if report.failed:
        _state["collect_errors"].append(report.nodeid or ".")


def pytest_collection_finish(session: Any) -> None:
    _state["collected"] = len(session.items)


def pytest_runtest_logreport(report: Any) -> None:
    wasxfail = getattr(report, "wasxfail", None)
    if wasxfail is None:
        return
    if report.when == "setup" and report.skipped and str(wasxfail).startswith("[NOTRUN]"):
        _state["not_run"].append(report.nodeid)
    elif report.when == "call" and report.passed:
        _state["xpassed"].append(report.nodeid)


def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:
    _finished.add(nodeid)


def pytest_keyboard_interrupt(excinfo: Any) -> None:
    try:
        message = str(excinfo.value)
    except Exception:  # noqa: BLE001 - a broken __str__ must not hide the interrupt
        message = ""
    name = excinfo.typename
    _state["interrupted"] = (name + (": " + message if message else ""))[:500]


def pytest_sessionfinish(session: Any, exitstatus: Any) -> None:
    if _OUT is None or _written[0] or hasattr(session.config, "workerinput"):
        return  # not asked for, already written, or a pytest-xdist worker
    _written[0] = True
    _state["finished"] = len(_finished)
    _state["exitstatus"] = int(exitstatus)
    _state["maxfail_stop"] = str(getattr(session, "shouldfail", "") or "")[:500]
    with open(_OUT, "w", encoding="utf-8") as handle:
        json.dump(_state, handle)
