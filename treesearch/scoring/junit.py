"""Read a JUnit XML report written by untrusted code: bounded, no DTDs, no entities.

The report comes from a test run of code the agent changed, so it is hostile input. The parser
is expat driven directly (stdlib only): any DOCTYPE, entity declaration or external entity
reference rejects the report before expansion can start, the file is opened without following
symlinks and must be a regular file under a size cap, and the parse is streaming (only the
testcase records are kept, with capped texts), so memory stays bounded.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn
from xml.parsers import expat

MAX_REPORT_BYTES = 50 * 1024 * 1024
"""Reports larger than this are refused (the run is then INVALID or CRASHED)."""
MAX_TEXT_CHARS = 4000
"""Tail kept of each failure/error text."""
MAX_MESSAGE_CHARS = 1000
"""Head kept of each failure/error/skip message attribute."""


class ReportError(Exception):
    """The report is missing or unusable; the message says why (for ``TestRun.problem``)."""


@dataclass
class RawCase:
    """One ``<testcase>`` element as written."""

    classname: str
    name: str
    file: str | None
    seconds: float
    result: str = "passed"
    """``passed``, ``failure``, ``error`` or ``skipped`` (the worst child element seen)."""
    skip_type: str = ""
    message: str = ""
    text: str = ""


@dataclass
class Report:
    """The parsed report."""

    cases: list[RawCase] = field(default_factory=list)
    suite_errors: int = 0
    """Errors counted by leaf ``<testsuite errors=...>`` attributes beyond their error cases."""


def read_report(path: Path, max_bytes: int = MAX_REPORT_BYTES) -> bytes:
    """The report's bytes; ``ReportError`` if missing, not a regular file, empty or too large."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise ReportError(f"the report {path} is missing") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ReportError(f"the report {path} is a symlink (refused)") from None
        raise ReportError(f"the report {path} cannot be opened: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ReportError(f"the report {path} is not a regular file")
        if st.st_size > max_bytes:
            raise ReportError(f"the report {path} is too large ({st.st_size} bytes > {max_bytes})")
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            size += len(chunk)
            if size > max_bytes:
                raise ReportError(f"the report {path} is too large (> {max_bytes} bytes)")
            chunks.append(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if not data.strip():
        raise ReportError(f"the report {path} is empty")
    return data


class _Rejected(Exception):
    pass


def parse_junit(data: bytes) -> Report:
    """Parse JUnit XML (pytest, gotestsum, jest-junit, surefire, ...); ``ReportError`` when the
    document is malformed, declares a DTD or entities, or has no ``testsuite``/``testcase``."""
    state = _State()
    parser = expat.ParserCreate()
    parser.buffer_text = True
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)

    def reject(*_: object) -> NoReturn:
        raise _Rejected("the report declares a DTD or entities (refused: untrusted XML)")

    parser.StartDoctypeDeclHandler = reject
    parser.EntityDeclHandler = reject
    parser.UnparsedEntityDeclHandler = reject
    parser.ExternalEntityRefHandler = reject
    parser.StartElementHandler = state.start
    parser.EndElementHandler = state.end
    parser.CharacterDataHandler = state.data
    try:
        parser.Parse(data, True)
    except _Rejected as exc:
        raise ReportError(str(exc)) from None
    except expat.ExpatError as exc:
        raise ReportError(f"the report is not well-formed XML: {exc}") from None
    except RecursionError:
        raise ReportError("the report nests too deeply") from None
    if not state.saw_suite and not state.report.cases:
        raise ReportError("the report has no testsuite or testcase element")
    return state.report


_CHILD_RANK = {"error": 0, "failure": 1, "skipped": 2}


@dataclass
class _Suite:
    errors_attr: int
    error_cases: int = 0
    has_child_suite: bool = False


class _State:
    def __init__(self) -> None:
        self.report = Report()
        self.saw_suite = False
        self.depth = 0
        self.suites: list[_Suite] = []
        self.case: RawCase | None = None
        self.case_depth = -1
        self.capture: list[str] | None = None
        self.captured = 0

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        self.depth += 1
        if tag == "testsuite":
            self.saw_suite = True
            if self.suites:
                self.suites[-1].has_child_suite = True
            self.suites.append(_Suite(_int(attrs.get("errors"))))
        elif tag == "testsuites":
            self.saw_suite = True
        elif tag == "testcase" and self.case is None:
            self.case = RawCase(
                classname=attrs.get("classname", ""),
                name=attrs.get("name", ""),
                file=attrs.get("file"),
                seconds=_float(attrs.get("time")),
            )
            self.case_depth = self.depth
        elif self.case is not None and self.depth == self.case_depth + 1 and tag in _CHILD_RANK:
            case = self.case
            if case.result == "passed" or _CHILD_RANK[tag] < _CHILD_RANK[case.result]:
                case.result = tag
                case.message = attrs.get("message", "")[:MAX_MESSAGE_CHARS]
                case.skip_type = attrs.get("type", "") if tag == "skipped" else ""
                case.text = ""
                if tag != "skipped":
                    self.capture = []
                    self.captured = 0

    def data(self, text: str) -> None:
        if self.capture is not None:
            self.capture.append(text)
            self.captured += len(text)
            if self.captured > 4 * MAX_TEXT_CHARS:
                joined = "".join(self.capture)[-MAX_TEXT_CHARS:]
                self.capture = [joined]
                self.captured = len(joined)

    def end(self, tag: str) -> None:
        if self.capture is not None and self.case is not None and self.depth == self.case_depth + 1:
            self.case.text = "".join(self.capture)[-MAX_TEXT_CHARS:]
            self.capture = None
        if tag == "testcase" and self.case is not None and self.depth == self.case_depth:
            if self.case.result == "error" and self.suites:
                self.suites[-1].error_cases += 1
            self.report.cases.append(self.case)
            self.case = None
            self.case_depth = -1
        elif tag == "testsuite" and self.suites:
            suite = self.suites.pop()
            if not suite.has_child_suite:
                self.report.suite_errors += max(0, suite.errors_attr - suite.error_cases)
        self.depth -= 1


def _int(text: str | None) -> int:
    try:
        return max(0, int(text or 0))
    except ValueError:
        return 0


def _float(text: str | None) -> float:
    try:
        value = float(text or 0.0)
    except ValueError:
        return 0.0
    return value if value >= 0 and value != float("inf") else 0.0


def pytest_node_id(case: RawCase, root: Path | None = None) -> str:
    """The pytest node id of a testcase written by pytest's junitxml plugin.

    pytest writes ``classname`` = dotted file path + classes and ``name`` = function + params
    (``junitxml.mangle_test_address``); with ``junit_family=xunit1`` it also writes ``file``.
    The file attribute gives the exact split; without it (or when it names another file, as for
    inherited tests), the longest dotted prefix that is a ``.py`` file under ``root`` is taken.
    """
    classname, name = case.classname, case.name
    if case.file and case.file.endswith(".py"):
        file = case.file.replace(os.sep, "/")
        module = file[:-3].replace("/", ".")
        if classname == module:
            return f"{file}::{name}"
        if classname.startswith(module + "."):
            return "::".join([file, *classname[len(module) + 1 :].split("."), name])
        if not classname and name == module:
            return file  # a collection error of the module itself
    dotted = classname or name
    parts = dotted.split(".")
    found = _find_module(root, parts, 0) if root is not None else None
    if found is not None:
        candidate, used = found
        if not classname:
            return "::".join([candidate, *parts[used:]])
        return "::".join([candidate, *parts[used:], name])
    if case.file and not classname:
        return case.file
    return f"{classname}::{name}" if classname else name


def generic_test_id(case: RawCase) -> str:
    """Test id for a non-pytest JUnit producer: ``classname::name`` (or ``name`` alone)."""
    return f"{case.classname}::{case.name}" if case.classname else case.name


def _find_module(folder: Path, parts: list[str], start: int) -> tuple[str, int] | None:
    """The longest run of ``parts`` from ``start`` that names a ``.py`` file under ``folder``,
    each path component being one or more dot-joined parts (folders may contain dots)."""
    best: tuple[str, int] | None = None
    for end in range(len(parts), start, -1):
        piece = ".".join(parts[start:end])
        if not piece or piece in (".", ".."):
            continue
        if best is None and (folder / f"{piece}.py").is_file():
            best = (f"{piece}.py", end)
        if end < len(parts) and (folder / piece).is_dir():
            deeper = _find_module(folder / piece, parts, end)
            if deeper is not None and (best is None or deeper[1] > best[1]):
                best = (f"{piece}/{deeper[0]}", deeper[1])
    return best
