"""SWE-bench grading: our ports of the harness's parsers and rules, on hand-written logs, and
(where ``swebench`` 4.x is installed) equal to swebench's own functions on every log we have.

Real logs go in ``tests/data/swebench_logs/`` as ``<instance_id>.<gold|empty>.log.gz`` next to
``<instance_id>.json`` (the instance row); the equivalence tests pick up every one. Those there
now are the grading logs of ``treesearch eval --gold`` and ``--empty`` on the six official rows of
``shared/corpora/swebench-dev`` (made with ``experiments/swebench/setup-dev.yaml``).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import random
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from treesearch.errors import ScoringError
from treesearch.eval.swebench_grading import (
    APPLY_PATCH_FAIL,
    END_TEST_OUTPUT,
    PARSERS,
    REPO_PARSERS,
    RESET_FAILED,
    START_TEST_OUTPUT,
    TESTS_ERROR,
    TESTS_TIMEOUT,
    cut_id,
    eval_tests_report,
    harness_log,
    logs_eval,
    official_report,
    parser_for,
    resolution_status,
    strict_report,
    swebench_version,
)
from treesearch.eval.swebench_grading import test_directives as directives_of
from treesearch.scoring.results import Outcome

LOG_DIR = Path(__file__).parent / "data" / "swebench_logs"

# ------------------------------------------------------------------------- hand-written logs

PYTEST_LOG = """\
+ pytest -rA tests/test_fields.py
============================= test session starts ==============================
collected 9 items

tests/test_fields.py ..F.sxXE.                                           [100%]

=========================== short test summary info ============================
PASSED tests/test_fields.py::test_a
PASSED tests/test_fields.py::test_required[required-Missing data for required field.]
PASSED tests/test_fields.py::test_dup[a b]
FAILED tests/test_fields.py::test_dup[a c] - AssertionError: assert 1 == 2
FAILED tests/test_fields.py::test_c - AssertionError: assert 1 == 2
FAILED tests/test_fields.py::test_p[x - y] - ValueError
SKIPPED [1] tests/test_fields.py:30: no network
XFAIL tests/test_fields.py::test_e - reason: known bug
XPASS tests/test_fields.py::test_f unexpected
ERROR tests/test_fields.py::test_g - ValueError: fixture
FAILED
============ 3 failed, 4 passed, 1 skipped, 1 xfailed, 1 xpassed in 0.12s ============
"""

# pytest of ~2018 in verbose mode: a long id wraps, its status line starts with the status.
OLD_VERBOSE_LOG = """\
tests/test_long.py::test_with_a_very_long_name_that_wraps_the_terminal_line[case-0]
PASSED                                                                   [ 50%]
tests/test_long.py::test_other PASSED                                    [100%]
"""

OPTIONS_LOG = """\
PASSED tests/test_utils.py::test_netrc[/home/user/venv/lib/site-packages/certs/ca.pem]
PASSED tests/test_utils.py::test_unc[//server/share/x]
FAILED tests/test_utils.py::test_glob[/tmp/*.txt] - AssertionError
PASSED tests/test_utils.py::test_plain
PASSED tests/test_utils.py::test_brackets[a[b]]
"""

V2_LOG = (
    "astropy/io/tests/test_a.py::test_one PASSED\n"
    "astropy/io/tests/test_a.py::test_two \x1b[31mFAILED\x1b[0m\n"
    "\x1b[32mPASSED\x1b[0m astropy/io/tests/test_a.py::test_three\n"
    "PASSED\tastropy/io/tests/test_a.py::test_tab\n"
    "FAILED astropy/io/tests/test_a.py::test_four - AssertionError\n"
    "astropy/io/tests/test_a.py::test_five SKIPPED\n"
    "a b c XFAIL\n"
    "ERROR\n"
)

DJANGO_LOG = """\
Testing against Django installed in '/testbed/django'
Importing application admin_views
test_ok (admin_views.tests.AdminViewTests) ... ok
test_upper (admin_views.tests.AdminViewTests) ... OK
test_fail (admin_views.tests.AdminViewTests) ... FAIL
test_error (admin_views.tests.AdminViewTests) ... ERROR
test_skip (admin_views.tests.AdminViewTests) ... skipped 'no database'
test_noisy (admin_views.tests.AdminViewTests) ... printing something
more output
ok
test_server (admin_views.tests.ServerTests) ... Internal Server Error: /admin/x/
ok
test_check (check_framework.tests.Tests) ... System check identified no issues (0 silenced)
ok
Applying sites.0002_alter_domain_unique...test_no_migrations (migrations.tests.T) ... ok
test_version (admin_scripts.tests.CommandTypes)
--version is equivalent to version ... ok
======================================================================
FAIL: test_fail (admin_views.tests.AdminViewTests)
----------------------------------------------------------------------
ERROR: test_error (admin_views.tests.AdminViewTests)
----------------------------------------------------------------------
Ran 9 tests in 0.5s
FAILED (failures=1, errors=1, skipped=1)
"""

SYMPY_LOG = """\
============================= test process starts ==============================
executable:         /opt/miniconda3/envs/testbed/bin/python  (3.9.19-final-0) [CPython]
sympy/core/tests/test_basic.py[4]
test_basic ok
test_fail F
test_error E
test_later_ok F
test_later_ok ok
  test_indented ok
sympy/core/tests/test_expr.py[1]
test_expr ok                                                                [OK]

________________________________________________________________________________
___________ sympy/core/tests/test_basic.py:test_fail ___________
  File "/testbed/sympy/core/tests/test_basic.py", line 12, in test_fail
    assert False
AssertionError
 tests ended in x.py:line 3 spaces
============ tests finished: 3 passed, 2 failed, 1 exceptions in 0.1 seconds ============
"""

SEABORN_LOG = """\
tests/test_core.py::TestSemantic::test_a PASSED                          [ 33%]
tests/test_core.py::TestSemantic::test_b FAILED                          [ 66%]
tests/test_core.py::TestSemantic::test_c SKIPPED                         [100%]
PASSED tests/test_core.py::TestSemantic::test_d
FAILED tests/test_core.py::TestSemantic::test_e - ValueError
ERROR tests/test_core.py::TestSemantic::test_f
some words PASSED here
"""

MATPLOTLIB_LOG = """\
PASSED lib/matplotlib/tests/test_widgets.py::test_span_selector_drag[MouseButton.LEFT]
FAILED lib/matplotlib/tests/test_widgets.py::test_click[MouseButton.RIGHT] - assert
PASSED lib/matplotlib/tests/test_widgets.py::test_plain
SKIPPED [2] lib/matplotlib/tests/test_widgets.py:99: needs display
"""

HAND_LOGS = {
    "pytest": PYTEST_LOG,
    "old_verbose": OLD_VERBOSE_LOG,
    "options": OPTIONS_LOG,
    "v2": V2_LOG,
    "django": DJANGO_LOG,
    "sympy": SYMPY_LOG,
    "seaborn": SEABORN_LOG.replace("ERROR", "XFAIL"),  # no lone FAILED line: see its own test
    "matplotlib": MATPLOTLIB_LOG,
    "crlf": PYTEST_LOG.replace("\n", "\r\n"),
    "progress_cr": "tests/t.py .\r..F\rPASSED tests/t.py::a\r\nFAILED tests/t.py::b\n",
    "empty": "",
}


def _pytest(log: str) -> dict[str, str]:
    return PARSERS["pytest"](log)


# ----------------------------------------------------------------------------- pytest parser


def test_parse_pytest_cuts_an_id_with_spaces_at_its_first_space() -> None:
    statuses = _pytest(PYTEST_LOG)
    assert statuses["tests/test_fields.py::test_required[required-Missing"] == "PASSED"
    assert statuses["tests/test_fields.py::test_a"] == "PASSED"


def test_parse_pytest_failed_line_loses_its_dash_message_and_dashes_inside_the_id() -> None:
    statuses = _pytest(PYTEST_LOG)
    assert statuses["tests/test_fields.py::test_c"] == "FAILED"
    # " - " inside the parameter is replaced too, then the id is cut at the space
    assert statuses["tests/test_fields.py::test_p[x"] == "FAILED"


def test_parse_pytest_duplicate_cut_ids_keep_the_last_line() -> None:
    # test_dup[a b] passed, test_dup[a c] failed: both cut to test_dup[a, the later wins
    assert _pytest(PYTEST_LOG)["tests/test_fields.py::test_dup[a"] == "FAILED"
    assert _pytest("FAILED t.py::x[a c]\nPASSED t.py::x[a b]\n") == {"t.py::x[a": "PASSED"}


def test_parse_pytest_old_verbose_status_line_gives_the_percent_id() -> None:
    statuses = _pytest(OLD_VERBOSE_LOG)
    assert statuses == {"[": "PASSED"}  # "[ 50%]" splits into "[" and "50%]"
    assert _pytest("PASSED                                  [100%]\n") == {"[100%]": "PASSED"}


def test_parse_pytest_skip_error_xfail_and_xpass_lines() -> None:
    statuses = _pytest(PYTEST_LOG)
    assert statuses["[1]"] == "SKIPPED"  # "SKIPPED [1] file:line: reason"
    assert statuses["tests/test_fields.py::test_e"] == "XFAIL"
    assert statuses["tests/test_fields.py::test_g"] == "ERROR"
    assert "tests/test_fields.py::test_f" not in statuses  # XPASS is no status
    assert len(statuses) == 8  # the lone "FAILED" line adds nothing


def test_xpass_test_is_missing_so_a_fail_to_pass_list_of_it_fails() -> None:
    log = harness_log(PYTEST_LOG)
    report = official_report(
        "x__y-1", "pytest-dev/pytest", ["tests/test_fields.py::test_f"], [], log, official=False
    )
    assert report["tests_status"]["FAIL_TO_PASS"]["failure"] == ["tests/test_fields.py::test_f"]
    assert report["resolution"] == "RESOLVED_NO" and report["resolved"] is False


def test_skipped_only_fail_to_pass_is_resolved_officially_but_not_strictly() -> None:
    log = harness_log("SKIPPED tests/t.py::test_s\nPASSED tests/t.py::test_p\n")
    report = official_report(
        "x__y-1", "pytest-dev/pytest", ["tests/t.py::test_s"], ["tests/t.py::test_p"], log,
        official=False,
    )  # fmt: skip
    f2p = report["tests_status"]["FAIL_TO_PASS"]
    assert f2p == {"success": [], "failure": []}  # a skip is neither
    assert report["resolution"] == "RESOLVED_FULL" and report["resolved"] is True
    strict = strict_report(
        {"tests/t.py::test_s": "skipped", "tests/t.py::test_p": "passed"},
        ["tests/t.py::test_s"],
        ["tests/t.py::test_p"],
    )
    assert strict["resolved"] is False
    assert strict["tests_status"]["FAIL_TO_PASS"]["failure"] == ["tests/t.py::test_s"]


# ------------------------------------------------------------------------------ other parsers


def test_parse_pytest_options_shortens_an_absolute_path_option_only() -> None:
    assert PARSERS["pytest_options"](OPTIONS_LOG) == {
        "tests/test_utils.py::test_netrc[/ca.pem]": "PASSED",
        "tests/test_utils.py::test_unc[//server/share/x]": "PASSED",
        "tests/test_utils.py::test_glob[/tmp/*.txt]": "FAILED",
        "tests/test_utils.py::test_plain": "PASSED",
        "tests/test_utils.py::test_brackets[a[b]]": "PASSED",
    }


def test_parse_pytest_v2_strips_colours_and_reads_trailing_statuses() -> None:
    assert PARSERS["pytest_v2"](V2_LOG) == {
        "astropy/io/tests/test_a.py::test_one": "PASSED",
        "astropy/io/tests/test_a.py::test_two": "FAILED",
        "astropy/io/tests/test_a.py::test_three": "PASSED",
        "astropy/io/tests/test_a.py::test_four": "FAILED",
        "astropy/io/tests/test_a.py::test_five": "SKIPPED",
        "a": "b",  # a trailing-status line takes its second word as the status
    }
    # the plain pytest parser keeps the colour codes and misses the trailing statuses
    assert "astropy/io/tests/test_a.py::test_one" not in _pytest(V2_LOG)
    # a tab is a control character: removed, it glues the status to the id (one word: no entry)
    assert "astropy/io/tests/test_a.py::test_tab" not in PARSERS["pytest_v2"](V2_LOG)
    assert PARSERS["pytest_v2"]("PASSED\tt.py::x") == {}
    assert _pytest("PASSED\tt.py::x") == {"t.py::x": "PASSED"}


def test_parse_django_reads_unittest_verbose_output() -> None:
    statuses = PARSERS["django"](DJANGO_LOG)
    assert statuses == {
        "test_ok (admin_views.tests.AdminViewTests)": "PASSED",
        "test_upper (admin_views.tests.AdminViewTests)": "PASSED",
        "test_fail (admin_views.tests.AdminViewTests)": "FAILED",
        "test_error (admin_views.tests.AdminViewTests)": "ERROR",
        "test_skip (admin_views.tests.AdminViewTests)": "SKIPPED",
        "test_noisy (admin_views.tests.AdminViewTests)": "PASSED",
        "test_server (admin_views.tests.ServerTests)": "PASSED",
        "test_check (check_framework.tests.Tests)": "PASSED",
        "test_no_migrations (migrations.tests.T)": "PASSED",
        "--version is equivalent to version": "PASSED",
        "test_fail": "FAILED",  # "FAIL: name (class)" keys the bare name
        "test_error": "ERROR",
    }


def test_parse_sympy_reads_verbose_lines_and_failure_headers() -> None:
    statuses = PARSERS["sympy"](SYMPY_LOG)
    assert statuses["test_basic"] == "PASSED"
    assert statuses["test_fail"] == "FAILED"
    assert statuses["test_error"] == "ERROR"
    assert statuses["test_later_ok"] == "PASSED"  # the later line wins
    assert statuses["test_indented"] == "PASSED"
    assert "test_expr" not in statuses  # "... ok   [OK]" ends with neither " ok" nor " F"
    assert statuses["sympy/core/tests/test_basic.py:test_fail"] == "FAILED"
    assert statuses["tests ended in x.py:line 3"] == "FAILED"  # any " a.py:b " line is a header


def test_parse_seaborn_reads_pass_and_fail_only() -> None:
    statuses = PARSERS["seaborn"](SEABORN_LOG.replace("ERROR", "XFAIL"))
    assert statuses == {
        "tests/test_core.py::TestSemantic::test_a": "PASSED",
        "tests/test_core.py::TestSemantic::test_d": "PASSED",
        "tests/test_core.py::TestSemantic::test_e": "FAILED",
    }


def test_parse_seaborn_lone_failed_line_raises_index_error_as_swebench_does() -> None:
    with pytest.raises(IndexError):
        PARSERS["seaborn"]("FAILED\n")


def test_parse_matplotlib_reads_mouse_buttons_as_numbers() -> None:
    assert PARSERS["matplotlib"](MATPLOTLIB_LOG) == {
        "lib/matplotlib/tests/test_widgets.py::test_span_selector_drag[1]": "PASSED",
        "lib/matplotlib/tests/test_widgets.py::test_click[3]": "FAILED",
        "lib/matplotlib/tests/test_widgets.py::test_plain": "PASSED",
        "[2]": "SKIPPED",
    }


def test_parser_for_without_official_gives_our_port_and_its_label() -> None:
    parse, label = parser_for("django/django", official=False)
    assert parse is PARSERS["django"] and label == "treesearch port of parse_log_django"
    parse, label = parser_for("someone/unknown", official=False)
    assert parse is PARSERS["pytest"] and label == "treesearch port of parse_log_pytest"
    assert REPO_PARSERS["scikit-learn/scikit-learn"] == "pytest_v2"


@pytest.mark.skipif(swebench_version() is not None, reason="swebench is installed here")
def test_parser_for_without_swebench_falls_back_or_refuses_when_official() -> None:
    assert parser_for("psf/requests")[1] == "treesearch port of parse_log_pytest_options"
    with pytest.raises(ScoringError, match="swebench is not installed"):
        parser_for("psf/requests", official=True)
    with pytest.raises(ScoringError, match="swebench is not installed"):
        official_report("a", "psf/requests", [], [], harness_log(""), official=True)


def test_swebench_usable_only_from_2_to_4() -> None:
    from treesearch.eval.swebench_grading import _unusable

    assert _unusable("4.1.0") is None and _unusable("2.1.8") is None
    assert "5.x parses per instance, not used" in str(_unusable("5.0.2"))
    assert "before 2.x" in str(_unusable("1.1.0"))
    assert _unusable(None) == "swebench is not installed"
    assert "unknown release" in str(_unusable("unknown"))


def test_module_and_port_grading_do_not_import_swebench() -> None:
    code = (
        "import sys\n"
        "from treesearch.eval import swebench_grading as g\n"
        "g.swebench_version()\n"
        "g.official_report('a', 'psf/requests', ['x'], [], g.harness_log('PASSED x'), official=False)\n"
        "print('swebench' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "False"


# -------------------------------------------------------------------------- logs and markers


def test_harness_log_wraps_output_between_markers_and_parses_back() -> None:
    log = harness_log("PASSED t.py::a")
    assert log.index(START_TEST_OUTPUT) < log.index("PASSED") < log.index(END_TEST_OUTPUT)
    assert logs_eval(log, _pytest) == ({"t.py::a": "PASSED"}, True)


@pytest.mark.parametrize(
    "log",
    [
        harness_log("PASSED t.py::a", timed_out=True),
        harness_log("PASSED t.py::a", error="could not start pytest"),
        harness_log(f"PASSED t.py::a\n{APPLY_PATCH_FAIL}"),
        harness_log(f"PASSED t.py::a\n{RESET_FAILED}"),
        "PASSED t.py::a\n",  # no markers
        f"{START_TEST_OUTPUT}\nPASSED t.py::a\n",  # no end marker
    ],
    ids=["timeout", "error", "apply-failed", "reset-failed", "no-markers", "no-end"],
)
def test_logs_eval_bad_or_missing_markers_are_not_found(log: str) -> None:
    assert logs_eval(log, _pytest) == ({}, False)
    report = official_report("a__b-1", "pytest-dev/pytest", ["t.py::a"], [], log, official=False)
    assert report["patch_successfully_applied"] is False and report["resolved"] is False
    assert "tests_status" not in report and report["resolution"] == "RESOLVED_NO"


def test_harness_log_timeout_and_error_write_the_harness_markers() -> None:
    assert TESTS_TIMEOUT in harness_log("x", timed_out=True)
    assert f"{TESTS_ERROR}: boom" in harness_log("x", error="boom")


def test_logs_eval_falls_back_to_the_whole_log_when_nothing_is_between_markers() -> None:
    log = f"PASSED t.py::before\n{START_TEST_OUTPUT}\nno tests\n{END_TEST_OUTPUT}\n"
    assert logs_eval(log, _pytest) == ({"t.py::before": "PASSED"}, True)
    # and reads only between the markers when that finds something
    log = f"PASSED t.py::before\n{harness_log('FAILED t.py::inside')}"
    assert logs_eval(log, _pytest) == ({"t.py::inside": "FAILED"}, True)


def test_logs_eval_reads_carriage_returns_as_line_ends() -> None:
    assert logs_eval(harness_log("x\rPASSED t.py::a\r\n"), _pytest)[0] == {"t.py::a": "PASSED"}


# ------------------------------------------------------------------------- rules and reports


def test_eval_tests_report_counts_skip_as_neither_and_missing_as_failure() -> None:
    statuses = {"a": "PASSED", "b": "SKIPPED", "c": "XFAIL", "d": "FAILED", "e": "ERROR"}
    report = eval_tests_report(statuses, ["a", "b", "missing"], ["c", "d", "e"])
    assert report == {
        "FAIL_TO_PASS": {"success": ["a"], "failure": ["missing"]},
        "PASS_TO_PASS": {"success": ["c"], "failure": ["d", "e"]},
        "FAIL_TO_FAIL": {"success": [], "failure": []},
        "PASS_TO_FAIL": {"success": [], "failure": []},
    }
    fail_only = eval_tests_report(statuses, ["a", "b", "missing", "d", "e"], [], fail_only=True)
    assert fail_only["FAIL_TO_PASS"] == {"success": ["a", "b", "missing", "e"], "failure": ["d"]}


@pytest.mark.parametrize(
    ("f2p", "p2p", "expected"),
    [
        ((2, 0), (3, 0), "RESOLVED_FULL"),
        ((0, 0), (0, 0), "RESOLVED_FULL"),  # nothing counted is a rate of 1
        ((1, 1), (3, 0), "RESOLVED_PARTIAL"),
        ((1, 1), (3, 1), "RESOLVED_NO"),
        ((0, 2), (3, 0), "RESOLVED_NO"),
        ((2, 0), (0, 1), "RESOLVED_NO"),
    ],
)
def test_resolution_status_follows_the_rates(
    f2p: tuple[int, int], p2p: tuple[int, int], expected: str
) -> None:
    def part(n: tuple[int, int]) -> dict[str, list[str]]:
        return {"success": ["s"] * n[0], "failure": ["f"] * n[1]}

    assert resolution_status({"FAIL_TO_PASS": part(f2p), "PASS_TO_PASS": part(p2p)}) == expected


def test_official_report_of_a_resolved_log_has_the_harness_shape() -> None:
    log = harness_log(PYTEST_LOG)
    report = official_report(
        "pytest-dev__pytest-1",
        "pytest-dev/pytest",
        ["tests/test_fields.py::test_required[required-Missing", "tests/test_fields.py::test_e"],
        ["tests/test_fields.py::test_a"],
        log,
        official=False,
    )
    assert report == {
        "patch_is_None": False,
        "patch_exists": True,
        "patch_successfully_applied": True,
        "resolved": True,
        "tests_status": eval_tests_report(
            _pytest(PYTEST_LOG),
            [
                "tests/test_fields.py::test_required[required-Missing",
                "tests/test_fields.py::test_e",
            ],
            ["tests/test_fields.py::test_a"],
        ),
        "resolution": "RESOLVED_FULL",
        "parser": "treesearch port of parse_log_pytest",
        "grader": "treesearch port of get_eval_report",
    }


def test_official_report_without_patch_or_log_is_not_applied() -> None:
    none = official_report("a", "psf/requests", ["x"], [], None, patch_is_none=True, official=False)
    assert none["patch_is_None"] is True and none["patch_exists"] is False
    no_log = official_report("a", "psf/requests", ["x"], [], None, official=False)
    assert no_log["patch_exists"] is True and no_log["patch_successfully_applied"] is False
    assert no_log["resolution"] == "RESOLVED_NO" and "tests_status" not in no_log


def test_official_report_partial_fail_to_pass_is_partial_and_not_resolved() -> None:
    log = harness_log("PASSED t.py::a\nFAILED t.py::b\nPASSED t.py::p\n")
    report = official_report("a", "x/y", ["t.py::a", "t.py::b"], ["t.py::p"], log, official=False)
    assert report["resolution"] == "RESOLVED_PARTIAL" and report["resolved"] is False


def test_cut_id_keeps_the_first_word() -> None:
    assert cut_id("t.py::x[a b]") == "t.py::x[a"
    assert cut_id("t.py::x[ab]") == "t.py::x[ab]"
    assert cut_id("   ") == "   "


def test_strict_report_matches_full_ids_by_their_cut_and_every_match_must_pass() -> None:
    outcomes = {
        "t.py::x[a b]": Outcome.PASSED,
        "t.py::x[a c]": "failed",  # cuts to the same id as the one above
        "t.py::y[p q]": "passed",
        "t.py::z": "xfail",
        "t.py::w": "xpass",
        "t.py::s": "skipped",
    }
    report = strict_report(outcomes, ["t.py::x[a", "t.py::y[p", "t.py::z"], ["t.py::w", "t.py::s"])
    assert report["tests_status"]["FAIL_TO_PASS"] == {
        "success": ["t.py::y[p", "t.py::z"],
        "failure": ["t.py::x[a"],
    }
    assert report["tests_status"]["PASS_TO_PASS"]["failure"] == ["t.py::w", "t.py::s"]
    assert report["resolved"] is False and report["unmatched"] == []
    assert report["reason"].startswith("1/3 FAIL_TO_PASS and 2/2 PASS_TO_PASS")


def test_strict_report_never_run_test_is_unmatched_and_a_failure() -> None:
    report = strict_report({"t.py::a": "passed"}, ["t.py::a", "t.py::gone"], ["t.py::gone"])
    assert report["resolved"] is False and report["unmatched"] == ["t.py::gone"]
    assert report["tests_status"]["PASS_TO_PASS"]["failure"] == ["t.py::gone"]
    assert "1 never ran (first: t.py::gone)" in report["reason"]
    full = strict_report({"t.py::a": "passed", "t.py::p": "passed"}, ["t.py::a"], ["t.py::p"])
    assert full["resolved"] is True and full["reason"] == ""


# ------------------------------------------------------------------------- test directives


def test_test_directives_drops_non_test_files_and_keeps_duplicates() -> None:
    patch = (
        "diff --git a/tests/test_a.py b/tests/test_a.py\n--- a/tests/test_a.py\n"
        "diff --git a/tests/data.json b/tests/data.json\n"
        "diff --git a/tests/export_csv b/tests/export_csv\n"  # "csv" has no dot
        "diff --git a/tests/test_b.py b/tests/test_b.py\n"
        "diff --git a/tests/test_a.py b/tests/test_a.py\n"
    )
    assert directives_of("pytest-dev/pytest", patch) == [
        "tests/test_a.py",
        "tests/test_b.py",
        "tests/test_a.py",
    ]
    assert directives_of("swe-bench/humaneval", patch) == ["test.py"]


def test_test_directives_of_django_are_dotted_modules() -> None:
    patch = (
        "diff --git a/tests/admin_views/tests.py b/tests/admin_views/tests.py\n"
        "diff --git a/tests/admin_views/templates/x.html b/tests/admin_views/templates/x.html\n"
        "diff --git a/django/test/utils.py b/django/test/utils.py\n"
    )
    assert directives_of("django/django", patch) == [
        "admin_views.tests",
        "admin_views.templates.x.html",
        "django.test.utils",
    ]


# ============================================================ equivalence with swebench itself


def _import(name: str) -> ModuleType:
    """A swebench module, importing it with its warnings silenced (the suite errors on any)."""
    version = swebench_version()
    if version is not None and not version.startswith("4."):
        pytest.skip(f"the ports follow swebench 4.x; {version} is installed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pytest.importorskip(
            name, reason="swebench not installed: pip install 'swebench>=4,<5'"
        )


def _read_log(path: Path) -> str:
    # As the harness reads its log file: text mode, universal newlines.
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return f.read()


def _folder_cases() -> Iterator[tuple[str, dict[str, Any], Path]]:
    """(instance id, row, log file) for every log of ``tests/data/swebench_logs/``."""
    if not LOG_DIR.is_dir():
        return
    for log in sorted(LOG_DIR.glob("*.log.gz")):
        instance_id = log.name.removesuffix(".log.gz").rsplit(".", 1)[0]
        row = json.loads((LOG_DIR / f"{instance_id}.json").read_text(encoding="utf-8"))
        yield instance_id, row, log


def _fuzz_logs(count: int = 400, seed: int = 7) -> list[str]:
    """Logs of random lines made of the words the parsers look for."""
    words = [
        "PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL", "XPASS", "ok", "OK", "F", "E",
        "t.py::a", "t.py::b[x y]", "t.py::c[/abs/dir/f.txt]", "t.py::d[//net/x]", "t.py::e[/a/*]",
        " - ", "...", " ... ok", " ... OK", " ...  OK", " ... FAIL", " ... ERROR",
        " ... skipped 'why'", "FAIL:", "ERROR:", "\x1b[31m", "[0m", "\t", "\r", " ", "  ", "___",
        " x.py:test_q ", "test_a", "test_b", " E", " F", " ok", "MouseButton.LEFT", "[100%]",
        "--version is equivalent to version", "Applying sites.0002_alter_domain_unique...",
        "test_no_migrations (m.T) ... ok", "Internal Server Error: /a/", "\nok",
        "System check identified no issues (0 silenced)", START_TEST_OUTPUT, END_TEST_OUTPUT,
        START_TEST_OUTPUT, END_TEST_OUTPUT, TESTS_TIMEOUT, "\r\n",
    ]  # fmt: skip
    rng = random.Random(seed)
    logs = []
    for _ in range(count):
        lines = []
        for _ in range(rng.randint(0, 12)):
            picked = rng.choices(words, k=rng.randint(0, 5))
            lines.append(rng.choice(["", " "]).join(picked))
        logs.append("\n".join(lines))
    return logs


def _corpus() -> list[tuple[str, str]]:
    cases = list(HAND_LOGS.items()) + [("seaborn-crash", SEABORN_LOG)]
    cases += [(f"fuzz-{i}", log) for i, log in enumerate(_fuzz_logs())]
    cases += [(p.name, _read_log(p)) for _, _, p in _folder_cases()]
    return cases


def _outcome(parse: Callable[[str], dict[str, str]], log: str) -> Any:
    try:
        return parse(log)
    except Exception as exc:  # noqa: BLE001 - a crash must be the same crash
        return type(exc).__name__


def test_repo_parsers_are_swebench_python_parser_map() -> None:
    python = _import("swebench.harness.log_parsers.python")
    theirs = {repo: fn.__name__ for repo, fn in python.MAP_REPO_TO_PARSER_PY.items()}
    assert {repo: f"parse_log_{name}" for repo, name in REPO_PARSERS.items()} == theirs


@pytest.mark.parametrize("repo", sorted(REPO_PARSERS))
def test_port_parser_equals_swebench_parser_on_the_corpus(repo: str) -> None:
    _import("swebench.harness.log_parsers")
    theirs, label = parser_for(repo, official=True)
    ours, _ = parser_for(repo, official=False)
    assert label.startswith("swebench 4.")
    differ = [name for name, log in _corpus() if _outcome(ours, log) != _outcome(theirs, log)]
    assert differ == []


def test_parser_for_prefers_installed_swebench() -> None:
    _import("swebench.harness.log_parsers")
    parse, label = parser_for("django/django")
    assert label == f"swebench {swebench_version()} parse_log_django"
    assert parse(DJANGO_LOG) == PARSERS["django"](DJANGO_LOG)
    assert parser_for("someone/unknown")[1] == "treesearch port of parse_log_pytest"
    with pytest.raises(ScoringError, match="no Python log parser for 'someone/unknown'"):
        parser_for("someone/unknown", official=True)


def test_test_directives_equal_get_test_directives() -> None:
    python = _import("swebench.harness.test_spec.python")
    patches = [
        "diff --git a/tests/a/test_x.py b/tests/a/test_x.py\n"
        "diff --git a/tests/a/x.csv b/tests/a/x.csv\ndiff --git a/docs/x.md b/docs/x.md\n"
        "diff --git a/tests/a/test_x.py b/tests/a/test_x.py\n"
        "diff --git a/src/a b/c.py b/src/a b/c.py\n  diff --git a/in b/text.py\n",
        "diff --git a/tests/export_csv b/tests/export_csv\n",
        "",
    ]
    patches += [row.get("test_patch", "") for _, row, _ in _folder_cases()]
    for repo in ["django/django", "sympy/sympy", "swe-bench/humaneval", "x/y"]:
        for patch in patches:
            theirs = python.get_test_directives({"repo": repo, "test_patch": patch})
            assert directives_of(repo, patch) == theirs


def _listed(row: dict[str, Any], key: str) -> list[str]:
    value = row.get(key, [])
    return list(json.loads(value) if isinstance(value, str) else value)


def _test_spec(row: dict[str, Any]) -> Any:
    """swebench's ``make_test_spec`` for the row; where that needs the network (a spec whose
    requirements are downloaded) a ``TestSpec`` holding the row's fields that grading reads."""
    test_spec = _import("swebench.harness.test_spec.test_spec")
    try:
        return test_spec.make_test_spec(row)
    except OSError:  # requests' ConnectionError: no network here
        pass
    fields = {f.name for f in dataclasses.fields(test_spec.TestSpec)}
    values = {
        "instance_id": row["instance_id"],
        "repo": row["repo"],
        "version": row["version"],
        "FAIL_TO_PASS": _listed(row, "FAIL_TO_PASS"),
        "PASS_TO_PASS": _listed(row, "PASS_TO_PASS"),
        "arch": "x86_64",
        "language": "py",
        "docker_specs": {},
        "namespace": None,
    }
    return test_spec.TestSpec(**{name: values.get(name, []) for name in fields})


def _synthetic_cases() -> list[tuple[dict[str, Any], str]]:
    constants = _import("swebench.harness.constants")

    def row(repo: str, f2p: list[str], p2p: list[str]) -> dict[str, Any]:
        version = sorted(constants.MAP_REPO_VERSION_TO_SPECS[repo])[-1]
        return {
            "instance_id": f"{repo.replace('/', '__')}-1",
            "repo": repo,
            "version": version,
            "base_commit": "0" * 40,
            "environment_setup_commit": "0" * 40,
            "test_patch": "diff --git a/tests/test_x.py b/tests/test_x.py\n",
            "patch": "",
            "problem_statement": "",
            "hints_text": "",
            "FAIL_TO_PASS": json.dumps(f2p),
            "PASS_TO_PASS": json.dumps(p2p),
        }

    fields = "tests/test_fields.py::"
    pytest_row = row(
        "pytest-dev/pytest",
        [f"{fields}test_required[required-Missing", f"{fields}test_f", "[1]"],
        [f"{fields}test_a", f"{fields}test_dup[a", f"{fields}test_e"],
    )
    skipped_row = row("pytest-dev/pytest", ["[1]"], [f"{fields}test_a"])
    django_row = row(
        "django/django",
        ["test_noisy (admin_views.tests.AdminViewTests)", "test_skip (admin_views.tests.X)"],
        ["test_ok (admin_views.tests.AdminViewTests)", "test_fail"],
    )
    sympy_row = row("sympy/sympy", ["test_basic", "test_later_ok"], ["test_indented"])
    requests_row = row("psf/requests", ["tests/test_utils.py::test_netrc[/ca.pem]"], [])
    return [
        (pytest_row, harness_log(PYTEST_LOG)),
        (pytest_row, harness_log(PYTEST_LOG.replace("\n", "\r\n"))),
        (pytest_row, harness_log(PYTEST_LOG, timed_out=True)),
        (pytest_row, harness_log(PYTEST_LOG, error="docker went away")),
        (pytest_row, PYTEST_LOG),
        (pytest_row, f"{PYTEST_LOG}{harness_log('nothing here')}"),
        (skipped_row, harness_log("SKIPPED [1] x.py:3: why\nPASSED tests/test_fields.py::test_a")),
        (django_row, harness_log(DJANGO_LOG)),
        (sympy_row, harness_log(SYMPY_LOG)),
        (requests_row, harness_log(OPTIONS_LOG)),
    ]


def _report_cases() -> list[tuple[str, dict[str, Any], str]]:
    cases = [
        (f"synthetic-{i}-{r['repo']}", r, log) for i, (r, log) in enumerate(_synthetic_cases())
    ]
    for _, row, path in _folder_cases():
        cases.append((path.name, row, _read_log(path)))
    return cases


def _swebench_report(row: dict[str, Any], log: str, tmp_path: Path, patch: str | None) -> Any:
    grading = _import("swebench.harness.grading")
    path = tmp_path / "test_output.txt"
    path.write_text(log, encoding="utf-8", newline="")
    prediction = {"instance_id": row["instance_id"], "model_patch": patch}
    report = grading.get_eval_report(_test_spec(row), prediction, str(path), True)
    theirs = report[row["instance_id"]]
    status = theirs.get("tests_status")
    resolution = grading.get_resolution_status(status) if status else "RESOLVED_NO"
    return theirs, resolution


def test_official_report_port_equals_get_eval_report(tmp_path: Path) -> None:
    constants = _import("swebench.harness.constants")
    checked = 0
    for name, row, log in _report_cases():
        if row["version"] not in constants.MAP_REPO_VERSION_TO_SPECS.get(row["repo"], {}):
            continue  # swebench has no spec for this (repo, version)
        f2p, p2p = _listed(row, "FAIL_TO_PASS"), _listed(row, "PASS_TO_PASS")
        for patch in ["diff", None]:
            theirs, resolution = _swebench_report(row, log, tmp_path, patch)
            ours = official_report(
                row["instance_id"], row["repo"], f2p, p2p, log,
                patch_is_none=patch is None, official=False,
            )  # fmt: skip
            assert ours.pop("grader") == "treesearch port of get_eval_report", name
            assert ours.pop("parser").startswith("treesearch port of parse_log_"), name
            assert ours.pop("resolution") == resolution, name
            assert ours == theirs, name
            checked += 1
    assert checked >= 2 * len(_synthetic_cases())


def test_official_report_calls_get_eval_report_when_it_can() -> None:
    constants = _import("swebench.harness.constants")
    for name, row, log in _report_cases():
        if row["version"] not in constants.MAP_REPO_VERSION_TO_SPECS.get(row["repo"], {}):
            continue
        f2p, p2p = _listed(row, "FAIL_TO_PASS"), _listed(row, "PASS_TO_PASS")
        ours = official_report(row["instance_id"], row["repo"], f2p, p2p, log, official=False)
        theirs = official_report(
            row["instance_id"], row["repo"], f2p, p2p, log, version=row["version"]
        )
        assert theirs.pop("grader") == f"swebench {swebench_version()} get_eval_report", name
        assert theirs.pop("parser").startswith(f"swebench {swebench_version()} parse_log_"), name
        ours.pop("grader"), ours.pop("parser")
        assert ours == theirs, name
    # undecodable output (a lone surrogate) is written as the harness log is, replaced
    odd = harness_log("PASSED t.py::a\udcff\nPASSED t.py::b\n")
    report = official_report("r-1", "psf/requests", ["t.py::b"], [], odd, version="2.0")
    assert report["grader"].startswith("swebench ") and report["resolved"] is True


def test_logs_eval_equals_get_logs_eval_on_fuzzed_logs(tmp_path: Path) -> None:
    grading = _import("swebench.harness.grading")
    for name, row, _ in _report_cases()[:4]:
        spec = _test_spec(row)
        ours = parser_for(row["repo"], official=False)[0]
        for i, log in enumerate(_fuzz_logs(count=150, seed=11)):
            path = tmp_path / "log.txt"
            path.write_text(log, encoding="utf-8", newline="")
            expected = grading.get_logs_eval(spec, str(path))
            assert logs_eval(log, ours) == expected, f"{name} fuzz-{i}"


def test_eval_tests_report_and_resolution_equal_swebench_on_random_maps() -> None:
    grading = _import("swebench.harness.grading")
    rng = random.Random(3)
    names = [f"t{i}" for i in range(6)]
    for _ in range(300):
        statuses = {n: rng.choice(["PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL", "odd"])
                    for n in rng.sample(names, rng.randint(0, 6))}  # fmt: skip
        f2p, p2p = rng.sample(names, rng.randint(0, 3)), rng.sample(names, rng.randint(0, 3))
        gold = {"FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p}
        theirs = grading.get_eval_tests_report(statuses, gold)
        assert eval_tests_report(statuses, f2p, p2p) == theirs
        assert resolution_status(theirs) == grading.get_resolution_status(theirs)
