"""SWE-bench's official grade, exactly: its log parsers, ids as it cuts them, its status rules.

Ported from SWE-bench (MIT licence, https://github.com/SWE-bench/SWE-bench), release 4.1.0:
``harness/log_parsers/python.py`` (every parser, line by line), ``harness/grading.py``
(``get_logs_eval``, ``get_eval_tests_report``, ``get_resolution_status``, ``get_eval_report``),
``harness/test_spec/python.py::get_test_directives`` and the marker strings and
``NON_TEST_EXTS`` of ``harness/constants``. The ports are used when ``swebench`` is not
installed (or ``official=False``); when an installed release 2.x-4.x has the piece, the
``official=None`` default uses swebench's own function instead, and every result says which
(``parser_for``'s label, ``official_report``'s ``"parser"`` and ``"grader"``). swebench 5.x grades
with per-instance parsers of another design and is treated as "not usable, use ours". swebench
is imported lazily (it pulls in pandas and datasets); whether it is installed is found with
``importlib.util.find_spec`` and its version from the package metadata, without importing it.

Faithful means faithful to the quirks too: ``parse_log_pytest`` keys a line by its second
whitespace-separated word, so a test id with a space is cut there
(``tests/x.py::t[required-Missing``) and old verbose lines like ``PASSED   [100%]`` give the
id ``[100%]``; a later line for the same key wins; ``XPASS`` is no status, so an XPASS test is
missing, which is a failure; a SKIPPED test is neither a success nor a failure, so a
FAIL_TO_PASS list of only skipped tests is RESOLVED_FULL; the seaborn parser raises IndexError on
a lone ``FAILED`` line as swebench's does. ``strict_report`` is the second, stricter verdict,
computed from treesearch's own per-test outcomes.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import importlib.util
import inspect
import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from treesearch.errors import ScoringError

__all__ = [
    "APPLY_PATCH_FAIL",
    "DEFAULT_PARSER",
    "END_TEST_OUTPUT",
    "FAIL_ONLY_REPOS",
    "NON_TEST_EXTS",
    "PARSERS",
    "REPO_PARSERS",
    "RESET_FAILED",
    "START_TEST_OUTPUT",
    "STATUSES",
    "TESTS_ERROR",
    "TESTS_TIMEOUT",
    "LogParser",
    "cut_id",
    "eval_tests_report",
    "harness_log",
    "logs_eval",
    "official_report",
    "parser_for",
    "resolution_status",
    "strict_report",
    "swebench_version",
    "test_directives",
]

LogParser = Callable[[str], dict[str, str]]

# swebench.harness.constants: TestStatus values (its enum order: FAILED, PASSED, SKIPPED, ERROR,
# XFAIL; the order does not matter to any parser, which only asks "starts/ends with any").
STATUSES = ("PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL")
_PASSED, _FAILED, _SKIPPED, _ERROR, _XFAIL = STATUSES

APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed"
RESET_FAILED = ">>>>> Reset Failed"
TESTS_ERROR = ">>>>> Tests Errored"
TESTS_TIMEOUT = ">>>>> Tests Timed Out"
START_TEST_OUTPUT = ">>>>> Start Test Output"
END_TEST_OUTPUT = ">>>>> End Test Output"
_BAD_CODES = (APPLY_PATCH_FAIL, RESET_FAILED, TESTS_ERROR, TESTS_TIMEOUT)

# Spelled as swebench spells them: "csv" has no dot (so "tests/fixtures_csv" is left out too).
NON_TEST_EXTS = (
    ".json",
    ".png",
    "csv",
    ".txt",
    ".md",
    ".jpg",
    ".jpeg",
    ".pkl",
    ".yml",
    ".yaml",
    ".toml",
)
# Repositories graded FAIL_ONLY by get_eval_report (SWE-bench Multimodal's JavaScript ones).
FAIL_ONLY_REPOS = frozenset({"chartjs/Chart.js", "processing/p5.js", "markedjs/marked"})

_FAIL_TO_PASS, _PASS_TO_PASS = "FAIL_TO_PASS", "PASS_TO_PASS"
_FAIL_TO_FAIL, _PASS_TO_FAIL = "FAIL_TO_FAIL", "PASS_TO_FAIL"


# ------------------------------------------------------------------------------------ parsers


def _parse_log_pytest(log: str) -> dict[str, str]:
    """Port of ``parse_log_pytest``: lines starting with a status, keyed by their second word."""
    test_status_map: dict[str, str] = {}
    for line in log.split("\n"):
        if line.startswith(STATUSES):
            if line.startswith(_FAILED):
                line = line.replace(" - ", " ")
            test_case = line.split()
            if len(test_case) <= 1:
                continue
            test_status_map[test_case[1]] = test_case[0]
    return test_status_map


_OPTION = re.compile(r"(.*?)\[(.*)\]")


def _parse_log_pytest_options(log: str) -> dict[str, str]:
    """Port of ``parse_log_pytest_options``: as pytest's, an absolute-path option cut to its
    last component (``t[/a/b/f.txt]`` -> ``t[/f.txt]``)."""
    test_status_map: dict[str, str] = {}
    for line in log.split("\n"):
        if line.startswith(STATUSES):
            if line.startswith(_FAILED):
                line = line.replace(" - ", " ")
            test_case = line.split()
            if len(test_case) <= 1:
                continue
            has_option = _OPTION.search(test_case[1])
            if has_option:
                main, option = has_option.groups()
                if option.startswith("/") and not option.startswith("//") and "*" not in option:
                    option = "/" + option.split("/")[-1]
                test_name = f"{main}[{option}]"
            else:
                test_name = test_case[1]
            test_status_map[test_name] = test_case[0]
    return test_status_map


_DJANGO_PASS_SUFFIXES = (" ... ok", " ... OK", " ...  OK")
# A bug of django's logger: a long multi-line print can split "name ... ok" over two lines.
_DJANGO_SPLIT_PASSES = (
    r"^(.*?)\s\.\.\.\sTesting\ against\ Django\ installed\ in\ ((?s:.*?))\ silenced\)\.\nok$",
    r"^(.*?)\s\.\.\.\sInternal\ Server\ Error:\ \/(.*)\/\nok$",
    r"^(.*?)\s\.\.\.\sSystem check identified no issues \(0 silenced\)\nok$",
)


def _django_line(line: str, test_status_map: dict[str, str], prev_test: str | None) -> str | None:
    """One stripped line of ``parse_log_django``'s loop; returns the new ``prev_test``."""
    if "--version is equivalent to version" in line:
        test_status_map["--version is equivalent to version"] = _PASSED
    if " ... " in line:
        prev_test = line.split(" ... ")[0]
    for suffix in _DJANGO_PASS_SUFFIXES:
        if line.endswith(suffix):
            # swebench's "temporary, exclusive fix for django__django-7188"
            if line.strip().startswith(
                "Applying sites.0002_alter_domain_unique...test_no_migrations"
            ):
                line = line.split("...", 1)[-1].strip()
            test = line.rsplit(suffix, 1)[0]
            test_status_map[test] = _PASSED
            break
    if " ... skipped" in line:
        test_status_map[line.split(" ... skipped")[0]] = _SKIPPED
    if line.endswith(" ... FAIL"):
        test_status_map[line.split(" ... FAIL")[0]] = _FAILED
    if line.startswith("FAIL:"):
        test_status_map[line.split()[1].strip()] = _FAILED
    if line.endswith(" ... ERROR"):
        test_status_map[line.split(" ... ERROR")[0]] = _ERROR
    if line.startswith("ERROR:"):
        test_status_map[line.split()[1].strip()] = _ERROR
    if line.lstrip().startswith("ok") and prev_test is not None:
        # passed, with other output (new lines included) between "..." and "ok"
        test_status_map[prev_test] = _PASSED
    return prev_test


def _parse_log_django(log: str) -> dict[str, str]:
    """Port of ``parse_log_django``: unittest's verbose ``name ... ok|FAIL|ERROR|skipped`` lines,
    ``FAIL:``/``ERROR:`` headers, a lone ``ok`` for the last test seen, three split-line patterns."""
    test_status_map: dict[str, str] = {}
    prev_test: str | None = None
    for line in log.split("\n"):
        prev_test = _django_line(line.strip(), test_status_map, prev_test)
    for pattern in _DJANGO_SPLIT_PASSES:
        for match in re.finditer(pattern, log, re.MULTILINE):
            test_status_map[match.group(1)] = _PASSED
    return test_status_map


_ANSI_COLOUR = re.compile(r"\[(\d+)m")
_CONTROL = str.maketrans("", "", "".join(chr(char) for char in range(1, 32)))


def _parse_log_pytest_v2(log: str) -> dict[str, str]:
    """Port of ``parse_log_pytest_v2``: ``[<n>m`` colour codes and control characters (tabs
    included) removed; lines starting with a status as pytest's, lines ending with one keyed by
    their first word with their second word as the status."""
    test_status_map: dict[str, str] = {}
    for raw in log.split("\n"):
        line = _ANSI_COLOUR.sub("", raw).translate(_CONTROL)
        if line.startswith(STATUSES):
            if line.startswith(_FAILED):
                line = line.replace(" - ", " ")
            test_case = line.split()
            if len(test_case) >= 2:
                test_status_map[test_case[1]] = test_case[0]
        elif line.endswith(STATUSES):
            test_case = line.split()
            if len(test_case) >= 2:
                test_status_map[test_case[0]] = test_case[1]
    return test_status_map


def _parse_log_seaborn(log: str) -> dict[str, str]:
    """Port of ``parse_log_seaborn`` (raises IndexError on a lone ``FAILED`` line, as it does)."""
    test_status_map: dict[str, str] = {}
    for line in log.split("\n"):
        if line.startswith(_FAILED):
            test_status_map[line.split()[1]] = _FAILED
        elif f" {_PASSED} " in line:
            parts = line.split()
            if parts[1] == _PASSED:
                test_status_map[parts[0]] = _PASSED
        elif line.startswith(_PASSED):
            test_status_map[line.split()[1]] = _PASSED
    return test_status_map


_SYMPY_FAILURE_HEADER = re.compile(r"(_*) (.*)\.py:(.*) (_*)")


def _parse_log_sympy(log: str) -> dict[str, str]:
    """Port of ``parse_log_sympy``: ``___ file.py:test ___`` headers anywhere are failures, then
    ``test_x ok|F|E`` lines of ``bin/test --verbose``."""
    test_status_map: dict[str, str] = {}
    for match in _SYMPY_FAILURE_HEADER.findall(log):
        test_status_map[f"{match[1]}.py:{match[2]}"] = _FAILED
    for raw in log.split("\n"):
        line = raw.strip()
        if line.startswith("test_"):
            if line.endswith(" E"):
                test_status_map[line.split()[0]] = _ERROR
            if line.endswith(" F"):
                test_status_map[line.split()[0]] = _FAILED
            if line.endswith(" ok"):
                test_status_map[line.split()[0]] = _PASSED
    return test_status_map


def _parse_log_matplotlib(log: str) -> dict[str, str]:
    """Port of ``parse_log_matplotlib``: pytest's, with ``MouseButton.LEFT/RIGHT`` read as 1/3."""
    test_status_map: dict[str, str] = {}
    for raw in log.split("\n"):
        line = raw.replace("MouseButton.LEFT", "1").replace("MouseButton.RIGHT", "3")
        if line.startswith(STATUSES):
            if line.startswith(_FAILED):
                line = line.replace(" - ", " ")
            test_case = line.split()
            if len(test_case) <= 1:
                continue
            test_status_map[test_case[1]] = test_case[0]
    return test_status_map


PARSERS: Mapping[str, LogParser] = {
    "pytest": _parse_log_pytest,
    "pytest_options": _parse_log_pytest_options,
    "pytest_v2": _parse_log_pytest_v2,
    "django": _parse_log_django,
    "seaborn": _parse_log_seaborn,
    "sympy": _parse_log_sympy,
    "matplotlib": _parse_log_matplotlib,
}

# swebench 4.1.0's MAP_REPO_TO_PARSER_PY, by the name of the function each alias points to.
REPO_PARSERS: Mapping[str, str] = {
    "astropy/astropy": "pytest_v2",
    "django/django": "django",
    "marshmallow-code/marshmallow": "pytest",
    "matplotlib/matplotlib": "matplotlib",
    "mwaskom/seaborn": "seaborn",
    "pallets/flask": "pytest",
    "psf/requests": "pytest_options",
    "pvlib/pvlib-python": "pytest",
    "pydata/xarray": "pytest",
    "pydicom/pydicom": "pytest_options",
    "pylint-dev/astroid": "pytest",
    "pylint-dev/pylint": "pytest_options",
    "pytest-dev/pytest": "pytest",
    "pyvista/pyvista": "pytest",
    "scikit-learn/scikit-learn": "pytest_v2",
    "sqlfluff/sqlfluff": "pytest",
    "sphinx-doc/sphinx": "pytest_v2",
    "sympy/sympy": "sympy",
}
DEFAULT_PARSER = "pytest"


# ------------------------------------------------------------------------- installed swebench


def swebench_version() -> str | None:
    """The installed ``swebench``'s version (without importing it), or ``None`` when it is not
    installed; ``"unknown"`` when installed without package metadata."""
    try:
        if importlib.util.find_spec("swebench") is None:
            return None
    except (ImportError, ValueError):
        return None
    try:
        return importlib.metadata.version("swebench")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _major(version: str | None) -> int:
    """The major release number of ``version`` (-1 when there is none)."""
    match = re.match(r"(\d+)\.", version or "")
    return int(match.group(1)) if match else -1


def _unusable(version: str | None) -> str | None:
    """Why the installed swebench cannot grade here (``None``: it can: a 2.x-4.x release)."""
    if version is None:
        return "swebench is not installed"
    major = _major(version)
    if major < 0:
        return f"swebench {version} installed: unknown release"
    if major >= 5:
        return f"swebench {version} installed: 5.x parses per instance, not used"
    if major < 2:
        return f"swebench {version} installed: releases before 2.x are not used"
    return None


@lru_cache(maxsize=1)
def _swebench_python_parsers() -> dict[str, Callable[..., dict[str, str]]]:
    """swebench's log parsers of Python repositories (imports swebench: slow, done once)."""
    try:  # 3.x and 4.x: one module per language
        module = importlib.import_module("swebench.harness.log_parsers.python")
        return dict(module.MAP_REPO_TO_PARSER_PY)
    except ImportError:  # 2.x: a single module, Python repositories only
        module = importlib.import_module("swebench.harness.log_parsers")
        return dict(module.MAP_REPO_TO_PARSER)


def _one_argument(fn: Callable[..., dict[str, str]]) -> LogParser:
    """swebench's parser as ``parse(log)``: 3.x/4.x parsers also take a test spec, which the
    Python ones never read (2.x parsers take the log only)."""
    takes_spec = len(inspect.signature(fn).parameters) >= 2

    def parse(log: str) -> dict[str, str]:
        return dict(fn(log, None) if takes_spec else fn(log))

    parse.__name__ = getattr(fn, "__name__", "parse")
    return parse


def _unavailable(reason: str) -> ScoringError:
    return ScoringError(
        f"official SWE-bench grading needs swebench 2.x-4.x ({reason}); "
        "install it with pip install 'swebench>=4,<5', or grade with official=False"
    )


def parser_for(repo: str, *, official: bool | None = None) -> tuple[LogParser, str]:
    """``(parse, label)`` for ``repo``: ``parse(log)`` maps test ids to statuses.

    ``official=None``: swebench's own parser when an installed 2.x-4.x release has one for
    ``repo`` among its Python repositories, else our port; ``True``: swebench's, or a
    ``ScoringError`` saying why not; ``False``: our port. The label says which, e.g.
    ``"swebench 4.1.0 parse_log_pytest"`` or ``"treesearch port of parse_log_pytest"``.
    Repositories swebench does not know get our port of ``parse_log_pytest``."""
    name = REPO_PARSERS.get(repo, DEFAULT_PARSER)
    ours, label = PARSERS[name], f"treesearch port of parse_log_{name}"
    if official is False:
        return ours, label
    version = swebench_version()
    reason = _unusable(version)
    if reason is not None:
        if official:
            raise _unavailable(reason)
        return ours, label if version is None else f"{label} ({reason})"
    fn = _swebench_python_parsers().get(repo)
    if fn is None:
        if official:
            raise _unavailable(f"swebench {version} has no Python log parser for {repo!r}")
        return ours, label
    return _one_argument(fn), f"swebench {version} {getattr(fn, '__name__', 'parser')}"


# --------------------------------------------------------------------------- test directives


_DIFF = re.compile(r"diff --git a/.* b/(.*)")


def test_directives(repo: str, test_patch: str) -> list[str]:
    """Port of ``get_test_directives``: the files ``test_patch`` touches, less non-test files
    (duplicates kept); django's as test modules (``tests/a/b.py`` -> ``a.b``)."""
    if repo == "swe-bench/humaneval":
        return ["test.py"]
    directives = [d for d in _DIFF.findall(test_patch) if not d.endswith(NON_TEST_EXTS)]
    if repo == "django/django":
        transformed = []
        for d in directives:
            d = d[: -len(".py")] if d.endswith(".py") else d
            d = d[len("tests/") :] if d.startswith("tests/") else d
            transformed.append(d.replace("/", "."))
        directives = transformed
    return directives


# ----------------------------------------------------------------------------------- grading


def harness_log(output: str, *, timed_out: bool = False, error: str | None = None) -> str:
    """``output`` as the harness's log: between the start and end markers, so that swebench's
    ``get_logs_eval`` reads the file written from it. A timeout ends the log with the timeout
    marker in place of the end marker (the run was killed); an ``error`` adds the error marker
    and message. Either makes the grade "patch not applied, no tests"."""
    parts = [START_TEST_OUTPUT, output]
    if timed_out:
        parts.append(TESTS_TIMEOUT)
    else:
        parts.append(END_TEST_OUTPUT)
    if error is not None:
        parts.append(f"{TESTS_ERROR}: {error}")
    return "\n".join(parts) + "\n"


def logs_eval(log: str, parse: LogParser) -> tuple[dict[str, str], bool]:
    """Port of ``get_logs_eval``: ``(statuses, found)``. A log with a bad marker (patch apply
    failed, reset failed, tests errored or timed out), or without both output markers, gives
    ``({}, False)``; else the text between the markers is parsed, and the whole log when that
    finds nothing. Line ends are read as swebench's text-mode ``open`` reads them."""
    content = log.replace("\r\n", "\n").replace("\r", "\n")
    if any(code in content for code in _BAD_CODES):
        return {}, False
    if not (START_TEST_OUTPUT in content and END_TEST_OUTPUT in content):
        return {}, False
    test_content = content.split(START_TEST_OUTPUT)[1].split(END_TEST_OUTPUT)[0]
    status_map = parse(test_content)
    if not status_map:
        status_map = parse(content)
    return status_map, True


def _passed(case: str, statuses: Mapping[str, str]) -> bool:
    return case in statuses and statuses[case] in (_PASSED, _XFAIL)


def _failed(case: str, statuses: Mapping[str, str]) -> bool:
    return case not in statuses or statuses[case] in (_FAILED, _ERROR)


def eval_tests_report(
    statuses: Mapping[str, str],
    fail_to_pass: Sequence[str],
    pass_to_pass: Sequence[str],
    *,
    fail_only: bool = False,
) -> dict[str, dict[str, list[str]]]:
    """Port of ``get_eval_tests_report`` (PASS_AND_FAIL; ``fail_only`` for FAIL_ONLY): a test
    PASSED or XFAIL is a success, one FAILED, ERROR or missing a failure, one SKIPPED (or with
    any other status) neither. FAIL_TO_FAIL and PASS_TO_FAIL are empty, as swebench leaves them."""

    def split(tests: Sequence[str]) -> dict[str, list[str]]:
        success: list[str] = []
        failure: list[str] = []
        for case in tests:
            if fail_only:
                (failure if statuses.get(case) == _FAILED else success).append(case)
            elif _passed(case, statuses):
                success.append(case)
            elif _failed(case, statuses):
                failure.append(case)
        return {"success": success, "failure": failure}

    return {
        _FAIL_TO_PASS: split(fail_to_pass),
        _PASS_TO_PASS: split(pass_to_pass),
        _FAIL_TO_FAIL: {"success": [], "failure": []},
        _PASS_TO_FAIL: {"success": [], "failure": []},
    }


def _rate(part: Mapping[str, Sequence[str]]) -> float:
    total = len(part["success"]) + len(part["failure"])
    return 1 if total == 0 else len(part["success"]) / total


def resolution_status(report: Mapping[str, Mapping[str, Sequence[str]]]) -> str:
    """Port of ``get_resolution_status``: ``RESOLVED_FULL`` when every FAIL_TO_PASS and every
    PASS_TO_PASS counted is a success (none counted is a rate of 1), ``RESOLVED_PARTIAL`` when
    some but not all FAIL_TO_PASS and all PASS_TO_PASS are, else ``RESOLVED_NO``."""
    f2p = _rate(report[_FAIL_TO_PASS])
    p2p = _rate(report[_PASS_TO_PASS])
    if f2p == 1 and p2p == 1:
        return "RESOLVED_FULL"
    if 0 < f2p < 1 and p2p == 1:
        return "RESOLVED_PARTIAL"
    return "RESOLVED_NO"


def _swebench_eval_report(
    instance_id: str,
    repo: str,
    version: str,
    tests: tuple[list[str], list[str]],
    log: str,
    patch_is_none: bool,
) -> dict[str, Any] | None:
    """swebench's own ``get_eval_report`` on a temporary file holding ``log``, with a test spec
    holding what grading reads; ``None`` when that swebench has no spec for (repo, version)."""
    constants = importlib.import_module("swebench.harness.constants")
    grading = importlib.import_module("swebench.harness.grading")
    test_spec_module = importlib.import_module("swebench.harness.test_spec.test_spec")
    if version not in constants.MAP_REPO_VERSION_TO_SPECS.get(repo, {}):
        return None
    values = {
        "instance_id": instance_id,
        "repo": repo,
        "version": version,
        "FAIL_TO_PASS": tests[0],
        "PASS_TO_PASS": tests[1],
        "arch": "x86_64",
        "language": constants.MAP_REPO_TO_EXT.get(repo, "py"),
        "docker_specs": {},
        "namespace": None,
    }
    fields = dataclasses.fields(test_spec_module.TestSpec)
    kwargs = {f.name: values.get(f.name, []) for f in fields if f.name in values or _required(f)}
    spec = test_spec_module.TestSpec(**kwargs)
    prediction = {"instance_id": instance_id, "model_patch": None if patch_is_none else ""}
    # swebench reads the log from a file: a scratch folder of its own, removed at once.
    with tempfile.TemporaryDirectory(prefix="swebench-log-") as scratch:
        path = os.path.join(scratch, "test_output.txt")
        with open(path, "w", encoding="utf-8", errors="replace", newline="") as f:
            f.write(log)
        report = grading.get_eval_report(spec, prediction, path, True)[instance_id]
        status = report.get("tests_status")
        resolution = grading.get_resolution_status(status) if status else "RESOLVED_NO"
    parsers = importlib.import_module("swebench.harness.log_parsers").MAP_REPO_TO_PARSER
    version_label = swebench_version()
    parser_name = getattr(parsers.get(repo), "__name__", "parser")
    return {
        **report,
        "resolution": resolution,
        "parser": f"swebench {version_label} {parser_name}",
        "grader": f"swebench {version_label} get_eval_report",
    }


def _required(field: dataclasses.Field[Any]) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def official_report(
    instance_id: str,
    repo: str,
    fail_to_pass: Sequence[str],
    pass_to_pass: Sequence[str],
    log: str | None,
    *,
    patch_is_none: bool = False,
    official: bool | None = None,
    version: str | None = None,
) -> dict[str, Any]:
    """The harness's per-instance report: ``patch_is_None``, ``patch_exists``,
    ``patch_successfully_applied``, ``resolved`` and (when the log was found) ``tests_status``,
    plus ``resolution`` (``RESOLVED_FULL/PARTIAL/NO``), ``parser`` and ``grader`` (labels).

    ``log`` is the harness log (``harness_log``); ``None`` means the patch did not apply. With
    ``official`` not False, a ``version`` and an installed swebench 3.x/4.x that has a spec for
    (repo, version), swebench's own ``get_eval_report`` grades a temporary file holding the log
    (``official=True`` raises a ``ScoringError`` when swebench is not usable). Otherwise the
    ports grade: ``logs_eval``, ``eval_tests_report`` and ``resolution_status``, with
    ``parser_for(repo, official=official)``'s parser."""
    f2p, p2p = list(fail_to_pass), list(pass_to_pass)
    parse, parser_label = parser_for(repo, official=official)
    if official is not False and version is not None and log is not None:
        version_now = swebench_version()
        if _unusable(version_now) is None and _major(version_now) >= 3:
            theirs = _swebench_eval_report(
                instance_id, repo, version, (f2p, p2p), log, patch_is_none
            )
            if theirs is not None:
                return theirs
    report: dict[str, Any] = {
        "patch_is_None": False,
        "patch_exists": False,
        "patch_successfully_applied": False,
        "resolved": False,
    }
    labels = {"parser": parser_label, "grader": "treesearch port of get_eval_report"}
    if patch_is_none:
        report["patch_is_None"] = True
        return {**report, "resolution": "RESOLVED_NO", **labels}
    report["patch_exists"] = True
    statuses, found = logs_eval(log, parse) if log is not None else ({}, False)
    if not found:
        return {**report, "resolution": "RESOLVED_NO", **labels}
    report["patch_successfully_applied"] = True
    tests_status = eval_tests_report(statuses, f2p, p2p, fail_only=repo in FAIL_ONLY_REPOS)
    resolution = resolution_status(tests_status)
    report["resolved"] = resolution == "RESOLVED_FULL"
    report["tests_status"] = tests_status
    return {**report, "resolution": resolution, **labels}


# ---------------------------------------------------------------------------- strict verdict


def cut_id(full_id: str) -> str:
    """The id as the harness's parser cuts it: the first whitespace-separated word."""
    words = full_id.split()
    return words[0] if words else full_id


_STRICT_PASS = ("passed", "xfail")


def strict_report(
    outcomes: Mapping[str, str], fail_to_pass: Sequence[str], pass_to_pass: Sequence[str]
) -> dict[str, Any]:
    """The stricter second verdict, from per-test outcomes keyed by full pytest node ids (values
    ``treesearch.scoring.results.Outcome`` values). A listed id matches every full id equal to it
    or whose ``cut_id`` equals it; it succeeds when it has a match and every match passed or
    xfailed. A skip, an xpass, a failure, an error and no match at all are failures.

    Returns ``resolved`` (every listed test succeeded), ``tests_status`` (the official report's
    shape), ``unmatched`` (listed ids matching no outcome) and ``reason`` (one line, "" when
    resolved)."""
    index: dict[str, list[str]] = {}
    for full, outcome in outcomes.items():
        value = str(getattr(outcome, "value", outcome))
        index.setdefault(full, []).append(value)
        cut = cut_id(full)
        if cut != full:
            index.setdefault(cut, []).append(value)
    unmatched: list[str] = []
    seen: set[str] = set()

    def split(tests: Sequence[str]) -> dict[str, list[str]]:
        success: list[str] = []
        failure: list[str] = []
        for case in tests:
            found = index.get(case, [])
            if not found and case not in seen:
                seen.add(case)
                unmatched.append(case)
            ok = bool(found) and all(v in _STRICT_PASS for v in found)
            (success if ok else failure).append(case)
        return {"success": success, "failure": failure}

    status: dict[str, dict[str, list[str]]] = {
        _FAIL_TO_PASS: split(fail_to_pass),
        _PASS_TO_PASS: split(pass_to_pass),
        _FAIL_TO_FAIL: {"success": [], "failure": []},
        _PASS_TO_FAIL: {"success": [], "failure": []},
    }
    f2p_bad, p2p_bad = status[_FAIL_TO_PASS]["failure"], status[_PASS_TO_PASS]["failure"]
    resolved = not f2p_bad and not p2p_bad
    reason = ""
    if not resolved:
        first = (f2p_bad or p2p_bad)[0]
        reason = (
            f"{len(f2p_bad)}/{len(fail_to_pass)} FAIL_TO_PASS and {len(p2p_bad)}/"
            f"{len(pass_to_pass)} PASS_TO_PASS tests did not pass, {len(unmatched)} never ran "
            f"(first: {first})"
        )
    return {"resolved": resolved, "tests_status": status, "unmatched": unmatched, "reason": reason}
