"""A pytest plugin for scoring runs: which tests run, when to stop, how long each may take.

Loaded beside the session probe (``pytest_probe``: copied into the same temporary folder and
named in ``PYTEST_PLUGINS``) when the runner's environment holds ``TREESEARCH_PYTEST_ORDER``, the
path of a JSON file with an object with any of:

* ``first``: test ids (pytest node ids, or the JUnit ``classname::name`` key pytest writes for
  them) that run before every other collected test, in one session: a *screen* that leaves
  nothing out. The session stops (``session.shouldfail``, as ``--maxfail`` does) as soon as one
  of them fails, or with ``progress`` when the last of them has finished and none passes while
  at least one fails; otherwise the rest run after them, in the order pytest collected them.
  With ``progress`` and ``parent_failed`` (how many tests the parent failed), a screen that
  made no progress does not stop the session yet: the rest run until more tests have failed
  than ``parent_failed`` (the candidate then scores below its parent, whatever the tests not
  run do), so a candidate that may still tie its parent is run to the end.
  The command's own paths and options still decide what is collected (``pytest -q tests`` is
  screened as well as a bare ``pytest``). The report says how many tests were collected and
  screened, and whether the screen stopped the session.
* ``timeouts``: ``{"default": seconds or null, "tests": {id: seconds}}``: a per-test limit on
  the test's call phase (setup and teardown stay under the whole run's timeout: a session
  fixture is paid by whichever test comes first, which is not the test it was measured on).
  Past it, SIGALRM makes the test fail with a message that says so; a test that swallows that
  failure (a bare ``except:``) gets it again every second, and after three more the pytest
  process exits with status 3 (no report: never a pass).
* ``report``: a file where the plugin writes what it did (the screen, how many tests ran, the
  tests it cut), first when it is loaded, again at the end of the session.

It removes the variable from ``os.environ`` at import, so a pytest that the tests start
themselves is not screened. Standard library and pytest only, Python 3.7 syntax: it runs in
the interpreter of the tests.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from typing import Any

import pytest

ENV = "TREESEARCH_PYTEST_ORDER"
TIMEOUT_MARK = "treesearch per-test timeout"
"""Start of the failure message of a test cut by its per-test limit."""
RETRIES = 3

_path = os.environ.pop(ENV, None)
_cfg: dict[str, Any] = {}
if _path:
    try:
        with open(_path, encoding="utf-8") as _handle:
            _loaded = json.load(_handle)
        _cfg = _loaded if isinstance(_loaded, dict) else {}
    except (OSError, ValueError):
        _cfg = {}

_state: dict[str, Any] = {
    "loaded": True,
    "screen": None,
    "missing": [],
    "ran": 0,
    "timed_out": [],
    "aborted": "",
}
_screen: dict[str, Any] = {
    "ids": set(),
    "left": 0,
    "passed": 0,
    "failed": 0,
    "outcome": {},
    "waiting": False,  # no progress: stop once more tests fail than the parent's failures
    "failing": set(),  # every test of the session that failed (any phase)
}
_session: list = []


def _write() -> None:
    path = _cfg.get("report")
    if not path:
        return
    try:
        with open(str(path), "w", encoding="utf-8") as handle:
            json.dump(_state, handle)
    except OSError:
        # Never taken for a result: without a report the screen's verdict is "void" and the
        # scorer runs the whole suite (``order.screen_verdict``, ``ordered.evaluate``).
        return


def _junit_key(nodeid: str) -> str:
    """``classname::name`` as pytest's junitxml writes them for a node id."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    module = names[0].replace("/", ".")
    if module.endswith(".py"):
        module = module[:-3]
    names[0] = module
    names[-1] += bracket + params
    return ".".join(names[:-1]) + "::" + names[-1]


def _wanted(ids: Any) -> set:
    out = set()
    for test_id in ids or ():
        out.add(str(test_id))
    return out


_config: list = []


def pytest_configure(config: Any) -> None:
    _config.append(config)
    if _cfg:
        _write()


def pytest_collection_modifyitems(session: Any, config: Any, items: list) -> None:
    if "first" not in _cfg:
        return
    wanted = _wanted(_cfg.get("first"))
    keep, rest = [], []
    seen = set()
    for item in items:
        key = _junit_key(item.nodeid)
        if item.nodeid in wanted or key in wanted:
            keep.append(item)
            seen.add(item.nodeid)
            seen.add(key)
        else:
            rest.append(item)
    items[:] = keep + rest
    _session.append(session)
    _screen["ids"] = {item.nodeid for item in keep}
    _screen["left"] = len(keep)
    _state["screen"] = {"screened": len(keep), "collected": len(items), "stopped": False}
    _state["missing"] = sorted(wanted - seen)[:50]


def pytest_runtest_logreport(report: Any) -> None:
    if report.failed:
        _screen["failing"].add(report.nodeid)
    if report.nodeid not in _screen["ids"]:
        return
    outcome = _screen["outcome"]
    if report.failed:
        outcome[report.nodeid] = "failed"
    elif report.when == "call" and outcome.get(report.nodeid) != "failed":
        # passed, xpassed (non-strict: a strict xpass is reported failed) or xfailed
        passed = report.passed or hasattr(report, "wasxfail")
        outcome[report.nodeid] = "passed" if passed else "skipped"


def _stop_after_screen(nodeid: str) -> None:
    """After a screened test: stop the session if the screen says the rest need not run."""
    outcome = _screen["outcome"].get(nodeid, "skipped")
    _screen[outcome] = _screen.get(outcome, 0) + 1
    _screen["left"] -= 1
    progress = _cfg.get("progress")
    if outcome == "failed" and not progress:
        _stop()
    elif progress and not _screen["left"] and _screen["failed"] and not _screen["passed"]:
        if isinstance(_cfg.get("parent_failed"), int):
            _screen["waiting"] = True
            _stop_when_worse(nodeid)
        else:
            _stop()


def _stop_when_worse(nodeid: str) -> None:
    """After a screen without progress: stop once more tests failed than the parent did."""
    if len(_screen["failing"]) > _cfg["parent_failed"]:
        _state["screen"]["worse"] = nodeid
        _stop()


def _stop() -> None:
    _state["screen"]["stopped"] = True
    if _session:
        _session[0].shouldfail = "treesearch screen: the parent's failing tests still fail"


def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:
    _state["ran"] += 1
    if nodeid in _screen["ids"]:
        _stop_after_screen(nodeid)
    elif _screen["waiting"] and not _state["screen"]["stopped"]:
        _stop_when_worse(nodeid)


def _limit(item: Any) -> float | None:
    limits = _cfg.get("timeouts")
    if not isinstance(limits, dict):
        return None
    tests = limits.get("tests") or {}
    value = tests.get(item.nodeid)
    if value is None:
        value = tests.get(_junit_key(item.nodeid))
    if value is None:
        value = limits.get("default")
    try:
        seconds = float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
    return seconds if seconds is not None and seconds > 0 else None


class _Alarm:
    def __init__(self, nodeid: str, seconds: float) -> None:
        self.nodeid = nodeid
        self.seconds = seconds
        self.fired = 0
        self.previous: Any = None
        self.outer = (0.0, 0.0)
        self.started = 0.0

    def on_alarm(self, signum: int, frame: Any) -> None:
        self.fired += 1
        if self.fired == 1:
            _state["timed_out"].append(self.nodeid)
        if self.fired > 1 + RETRIES:
            _state["aborted"] = self.nodeid
            _write()
            capture = _config[0].pluginmanager.getplugin("capturemanager") if _config else None
            if capture is not None:
                # So that the message reaches the terminal, not a capture buffer; the exit
                # below must happen whatever this does.
                with contextlib.suppress(Exception):
                    capture.suspend_global_capture(in_=True)
            sys.stderr.write(
                f"\n{TIMEOUT_MARK}: {self.nodeid} kept running after its {self.seconds:g} s "
                "limit (it swallows the failure); pytest stopped\n"
            )
            sys.stderr.flush()
            os._exit(3)
        pytest.fail(
            f"{TIMEOUT_MARK}: the test ran past its limit of {self.seconds:g} s "
            "(scoring.per_test_timeout)",
            pytrace=False,
        )

    def __enter__(self) -> _Alarm:
        self.previous = signal.signal(signal.SIGALRM, self.on_alarm)
        self.started = time.monotonic()
        self.outer = signal.setitimer(signal.ITIMER_REAL, self.seconds, 1.0)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self.previous)
        left, interval = self.outer
        if left > 0:  # an outer timer (the project's own guard): give it back what is left
            spent = time.monotonic() - self.started
            signal.setitimer(signal.ITIMER_REAL, max(left - spent, 0.001), interval)


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_call(item: Any) -> Any:
    # trylast: the innermost wrapper, so a conftest's own alarm around the call does not
    # replace this limit (it gets its timer back afterwards).
    seconds = _limit(item)
    if seconds is None or not hasattr(signal, "SIGALRM"):
        yield
        return
    with _Alarm(item.nodeid, seconds):
        yield


def pytest_sessionfinish(session: Any, exitstatus: Any) -> None:
    if hasattr(session.config, "workerinput"):
        return  # a pytest-xdist worker
    _write()
