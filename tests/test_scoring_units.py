"""Scoring without subprocesses: specs, JUnit parsing, score functions, SWE-bench tables."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import treesearch.scoring as scoring
from treesearch.errors import ConfigError
from treesearch.scoring import (
    Outcome,
    RunStatus,
    Scorer,
    ScoreResult,
    SweBench,
    TestCase,
    TestRun,
    TestSpec,
    make_score,
)
from treesearch.scoring.junit import RawCase, ReportError, parse_junit, pytest_node_id, read_report


def run_of(
    *cases: tuple[str, Outcome], status: RunStatus = RunStatus.OK, exit_code: int = 1
) -> TestRun:
    return TestRun(
        status=status,
        tests=tuple(TestCase(id=i, outcome=o) for i, o in cases),
        exit_code=exit_code,
    )


# --- public surface ---------------------------------------------------------------------------


def test_all_lists_exactly_the_public_names() -> None:
    # The package loads a name's module at its first use (PEP 562): ``dir()`` lists every name,
    # and each resolves.
    helpers = {"annotations", "Any", "TYPE_CHECKING"}
    public = {
        name
        for name in dir(scoring)
        if not name.startswith("_")
        and name not in helpers
        and not isinstance(getattr(scoring, name), type(os))
    }
    assert set(scoring.__all__) == public
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        scoring.Nope  # noqa: B018


# --- TestSpec ---------------------------------------------------------------------------------


def test_spec_from_config_reads_every_field() -> None:
    spec = TestSpec.from_config(
        {
            "command": ["pytest", "-x"],
            "cwd": "sub",
            "timeout": 30,
            "env": {"PYTHONHASHSEED": 0, "A": "b"},
            "tests": ["t.py::test_a"],
            "reruns": 2,
        },
        source="run.yaml",
    )
    assert spec.command == ("pytest", "-x")
    assert spec.cwd == "sub" and spec.timeout == 30.0 and spec.reruns == 2
    assert dict(spec.env) == {"A": "b", "PYTHONHASHSEED": "0"}
    assert spec.tests == ("t.py::test_a",)
    assert spec.is_pytest


def test_spec_from_config_unknown_key_lists_allowed_keys() -> None:
    with pytest.raises(ConfigError) as info:
        TestSpec.from_config({"comand": "pytest"}, source="run.yaml", where="scoring.search_tests")
    message = str(info.value)
    assert "run.yaml: scoring.search_tests" in message and "comand" in message
    assert "command" in message and "junit_xml" in message


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("timeout", -1, "positive number"),
        ("timeout", True, "positive number"),
        ("cwd", "../elsewhere", "inside the workspace"),
        ("cwd", "/abs", "inside the workspace"),
        ("command", "", "must not be empty"),
        ("command", [1, 2], "list of strings"),
        ("env", {"A": None}, "string or a number"),
        ("tests", "t.py::x", "list of test ids"),
        ("reruns", 99, "0 to 20"),
        ("runner", "nose", "auto, pytest, generic"),
    ],
)
def test_spec_from_config_bad_value_names_key_and_allowed(
    key: str, value: object, expected: str
) -> None:
    with pytest.raises(ConfigError) as info:
        TestSpec.from_config({key: value}, source="run.yaml")
    assert f"run.yaml: {key}" in str(info.value)
    assert expected in str(info.value)


def test_spec_fingerprint_is_stable_and_tracks_result_fields() -> None:
    a = TestSpec(command="pytest -q", env={"A": "1", "B": "2"})
    b = TestSpec(command="pytest -q", env={"B": "2", "A": "1"})
    assert a.fingerprint() == b.fingerprint() and len(a.fingerprint()) == 64
    assert a == b and hash(a) == hash(b)
    assert TestSpec.from_config(a.to_config()).fingerprint() == a.fingerprint()
    others = [
        TestSpec(command="pytest -x", env={"A": "1", "B": "2"}),
        TestSpec(command="pytest -q", env={"A": "1"}),
        TestSpec(command="pytest -q", env={"A": "1", "B": "2"}, timeout=5),
        TestSpec(command="pytest -q", env={"A": "1", "B": "2"}, tests=("t.py::x",)),
        TestSpec(command="pytest -q", env={"A": "1", "B": "2"}, cwd="sub"),
        TestSpec(command="pytest -q", env={"A": "1", "B": "2"}, reruns=1),
    ]
    assert len({a.fingerprint(), *(o.fingerprint() for o in others)}) == 1 + len(others)


def test_spec_detects_pytest_commands() -> None:
    assert TestSpec(command="python -m pytest -q").is_pytest
    assert TestSpec(command=("/venv/bin/pytest",)).is_pytest
    assert TestSpec(command="py.test").is_pytest
    assert not TestSpec(command="go test ./...").is_pytest
    assert not TestSpec(command="pytest", runner="generic").is_pytest
    assert TestSpec(command="make test", runner="pytest").is_pytest


# --- JUnit parsing ----------------------------------------------------------------------------

BOMB = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
]>
<testsuite><testcase classname="a" name="&lol3;"/></testsuite>
"""


def test_parse_junit_refuses_entity_expansion_bomb() -> None:
    with pytest.raises(ReportError, match="DTD"):
        parse_junit(BOMB)


def test_parse_junit_refuses_external_entity() -> None:
    xxe = (
        b'<?xml version="1.0"?><!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        b'<testsuite><testcase name="&x;"/></testsuite>'
    )
    with pytest.raises(ReportError, match="DTD"):
        parse_junit(xxe)


def test_parse_junit_refuses_doctype_in_utf16_document() -> None:
    doc = '<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE t []><testsuite/>'
    with pytest.raises(ReportError, match="DTD"):
        parse_junit(doc.encode("utf-16"))


@pytest.mark.parametrize(
    "data",
    [b"<testsuite><testcase name='a'>", b"not xml at all", b"<html><body/></html>", b"&undefined;"],
)
def test_parse_junit_malformed_or_foreign_document_is_an_error(data: bytes) -> None:
    with pytest.raises(ReportError):
        parse_junit(data)


def test_parse_junit_reads_outcomes_nested_suites_and_suite_errors() -> None:
    doc = b"""<testsuites>
      <testsuite name="outer">
        <testsuite name="inner" errors="2">
          <testcase classname="pkg.mod" name="ok" time="0.5"/>
          <testcase classname="pkg.mod" name="bad"><failure message="boom">trace</failure>
            <system-out>noise</system-out></testcase>
          <testcase classname="pkg.mod" name="err"><error message="E">tb</error></testcase>
          <testcase classname="pkg.mod" name="skip"><skipped message="why"/></testcase>
        </testsuite>
      </testsuite>
    </testsuites>"""
    report = parse_junit(doc)
    results = [(c.name, c.result, c.message, c.text) for c in report.cases]
    assert results == [
        ("ok", "passed", "", ""),
        ("bad", "failure", "boom", "trace"),
        ("err", "error", "E", "tb"),
        ("skip", "skipped", "why", ""),
    ]
    assert report.cases[0].seconds == 0.5
    assert report.suite_errors == 1  # errors="2" but only one error testcase


def test_read_report_refuses_symlink_fifo_oversize_and_empty(tmp_path: Path) -> None:
    real = tmp_path / "real.xml"
    real.write_bytes(b"<testsuite/>")
    link = tmp_path / "link.xml"
    link.symlink_to(real)
    fifo = tmp_path / "fifo.xml"
    os.mkfifo(fifo)
    empty = tmp_path / "empty.xml"
    empty.write_bytes(b"  \n")
    with pytest.raises(ReportError, match="symlink"):
        read_report(link)
    with pytest.raises(ReportError, match="not a regular file"):
        read_report(fifo)
    with pytest.raises(ReportError, match="too large"):
        read_report(real, max_bytes=5)
    with pytest.raises(ReportError, match="empty"):
        read_report(empty)
    with pytest.raises(ReportError, match="missing"):
        read_report(tmp_path / "absent.xml")
    assert read_report(real) == b"<testsuite/>"


def test_pytest_node_id_without_file_attribute_finds_module_on_disk(tmp_path: Path) -> None:
    (tmp_path / "tests" / "sub.dir").mkdir(parents=True)
    (tmp_path / "tests" / "sub.dir" / "test_x.py").write_text("")
    case = RawCase(
        classname="tests.sub.dir.test_x.TestA", name="test_b[a.b c]", file=None, seconds=0
    )
    assert pytest_node_id(case, tmp_path) == "tests/sub.dir/test_x.py::TestA::test_b[a.b c]"


def test_pytest_node_id_with_file_attribute_and_collection_error() -> None:
    case = RawCase(classname="tests.test_x.A.B", name="t[x::y]", file="tests/test_x.py", seconds=0)
    assert pytest_node_id(case) == "tests/test_x.py::A::B::t[x::y]"
    err = RawCase(classname="", name="tests.test_x", file="tests/test_x.py", seconds=0)
    assert pytest_node_id(err) == "tests/test_x.py"


# --- results ----------------------------------------------------------------------------------


def test_run_lookup_matches_pytest_node_id_through_junit_key() -> None:
    run = TestRun(
        status=RunStatus.OK,
        tests=(
            TestCase(
                id="odd", outcome=Outcome.PASSED, classname="tests.test_x.TestA", name="t[p q]"
            ),
        ),
    )
    assert run.outcome("tests/test_x.py::TestA::t[p q]") is Outcome.PASSED
    assert run.outcome("tests/test_x.py::TestA::t[p r]") is None


def test_run_round_trips_through_dict_and_json() -> None:
    run = TestRun(
        status=RunStatus.OK,
        tests=(
            TestCase(
                id="a",
                outcome=Outcome.FAILED,
                message="m",
                text="tb",
                reruns=(Outcome.PASSED,),
                flaky=True,
            ),
            TestCase(id="b", outcome=Outcome.XFAIL, seconds=0.25),
        ),
        exit_code=1,
        seconds=1.5,
        output="out",
        command="pytest",
    )
    again = TestRun.from_dict(json.loads(json.dumps(run.to_dict())))
    assert again == run
    result = ScoreResult(score=0.5, resolved=False, score_name="pass_fraction", run=run)
    assert json.loads(json.dumps(result.to_dict()))["run"]["tests"][0]["flaky"] is True
    assert result.rows() == [("a", "failed (flaky)"), ("b", "xfail")]


def test_feedback_names_failing_tests_and_keeps_within_budget() -> None:
    run = TestRun(
        status=RunStatus.OK,
        tests=(
            TestCase(
                id="t.py::test_a",
                outcome=Outcome.FAILED,
                message="AssertionError: 1 != 2",
                text="x" * 9000,
            ),
            TestCase(id="t.py::test_b", outcome=Outcome.PASSED),
        ),
        exit_code=1,
        output="y" * 9000,
    )
    text = run.feedback(max_chars=3000)
    assert "FAILED t.py::test_a - AssertionError: 1 != 2" in text
    assert "t.py::test_b" not in text
    assert len(text) <= 3000


# --- score functions --------------------------------------------------------------------------


def test_pass_fraction_ignores_skips_by_default_and_can_count_them() -> None:
    run = run_of(
        ("a", Outcome.PASSED),
        ("b", Outcome.FAILED),
        ("c", Outcome.SKIPPED),
        ("d", Outcome.XFAIL),
    )
    assert make_score("pass_fraction")(run).value == pytest.approx(2 / 3)
    assert make_score({"kind": "pass_fraction", "skipped": "fail"})(run).value == pytest.approx(
        2 / 4
    )


def test_pass_fraction_is_zero_for_runs_that_are_not_ok() -> None:
    for status in (RunStatus.TIMEOUT, RunStatus.CRASHED, RunStatus.INVALID):
        grade = make_score("pass_fraction")(
            run_of(("a", Outcome.PASSED), status=status, exit_code=0)
        )
        assert grade.value == 0.0 and not grade.resolved


def test_pass_fraction_without_report_follows_exit_code() -> None:
    ok = TestRun(status=RunStatus.OK, exit_code=0, has_report=False)
    bad = TestRun(status=RunStatus.OK, exit_code=3, has_report=False)
    assert make_score("pass_fraction")(ok).value == 1.0
    assert make_score("pass_fraction")(bad).value == 0.0


def test_resolved_needs_ok_run_exit_zero_and_no_failures() -> None:
    fn = make_score("resolved")
    assert fn(run_of(("a", Outcome.PASSED), ("b", Outcome.SKIPPED), exit_code=0)).value == 1.0
    assert fn(run_of(("a", Outcome.PASSED), ("b", Outcome.ERROR), exit_code=0)).value == 0.0
    assert fn(run_of(("a", Outcome.PASSED), exit_code=1)).value == 0.0
    assert fn(run_of(("a", Outcome.SKIPPED), exit_code=0)).value == 0.0
    assert fn(run_of(("a", Outcome.PASSED), status=RunStatus.CRASHED, exit_code=0)).value == 0.0


def test_make_score_unknown_name_lists_known_scores() -> None:
    with pytest.raises(ConfigError) as info:
        make_score("pass_rate", source="run.yaml")
    assert "pass_rate" in str(info.value)
    for name in ("pass_fraction", "resolved", "swebench"):
        assert name in str(info.value)


def test_make_score_bad_parameters_name_the_key() -> None:
    with pytest.raises(ConfigError, match="run.yaml: score: unknown parameter"):
        make_score({"kind": "resolved", "strict": True}, source="run.yaml")
    with pytest.raises(ConfigError, match="fail_to_pass: must list at least one"):
        make_score({"kind": "swebench", "pass_to_pass": ["a"]})
    with pytest.raises(ConfigError, match="needs a kind"):
        make_score({"fail_to_pass": ["a"]})


F2P = [
    "t.py::test_fixed",
    "t.py::test_xfail",
    "t.py::test_skipped",
    "t.py::test_missing",
    "t.py::test_broken",
]
P2P = ["t.py::test_kept", "t.py::test_p2p_skip", "t.py::test_regressed", "t.py::test_gone"]


def swebench_run(status: RunStatus = RunStatus.OK) -> TestRun:
    return run_of(
        ("t.py::test_fixed", Outcome.PASSED),
        ("t.py::test_xfail", Outcome.XFAIL),
        ("t.py::test_skipped", Outcome.SKIPPED),
        ("t.py::test_broken", Outcome.ERROR),
        ("t.py::test_kept", Outcome.PASSED),
        ("t.py::test_p2p_skip", Outcome.SKIPPED),
        ("t.py::test_regressed", Outcome.FAILED),
        status=status,
    )


def test_swebench_table_follows_harness_rules() -> None:
    grade = SweBench(fail_to_pass=F2P, pass_to_pass=P2P)(swebench_run())
    assert grade.details["tests_status"] == {
        "FAIL_TO_PASS": {
            "success": ["t.py::test_fixed", "t.py::test_xfail"],
            "failure": ["t.py::test_skipped", "t.py::test_missing", "t.py::test_broken"],
        },
        "PASS_TO_PASS": {
            "success": ["t.py::test_kept", "t.py::test_p2p_skip"],
            "failure": ["t.py::test_regressed", "t.py::test_gone"],
        },
    }
    assert grade.details["fail_to_pass_rate"] == pytest.approx(2 / 5)
    assert grade.details["pass_to_pass_rate"] == pytest.approx(2 / 4)
    assert grade.details["resolution"] == "RESOLVED_NO"
    assert not grade.resolved
    assert grade.value == pytest.approx((2 / 5 + 2 / 4) / 2)


def test_swebench_strict_pass_to_pass_fails_skipped_tests() -> None:
    grade = SweBench(fail_to_pass=F2P, pass_to_pass=P2P, strict_pass_to_pass=True)(swebench_run())
    assert "t.py::test_p2p_skip" in grade.details["tests_status"]["PASS_TO_PASS"]["failure"]


def test_swebench_skipped_fail_to_pass_test_is_not_resolved() -> None:
    run = run_of(("t.py::a", Outcome.SKIPPED), ("t.py::b", Outcome.PASSED), exit_code=0)
    grade = SweBench(fail_to_pass=["t.py::a"], pass_to_pass=["t.py::b"])(run)
    assert grade.details["tests_status"]["FAIL_TO_PASS"] == {"success": [], "failure": ["t.py::a"]}
    assert not grade.resolved and grade.value == pytest.approx(0.5)


def test_swebench_resolved_and_partial_resolution() -> None:
    run = run_of(
        ("t.py::a", Outcome.PASSED), ("t.py::b", Outcome.FAILED), ("t.py::c", Outcome.PASSED)
    )
    full = SweBench(fail_to_pass=["t.py::a"], pass_to_pass=["t.py::c"])(run)
    assert full.resolved and full.value == 1.0 and full.details["resolution"] == "RESOLVED_FULL"
    partial = SweBench(fail_to_pass=["t.py::a", "t.py::b"], pass_to_pass=["t.py::c"])(run)
    assert not partial.resolved and partial.details["resolution"] == "RESOLVED_PARTIAL"


def test_swebench_run_without_results_fails_every_listed_test() -> None:
    grade = SweBench(fail_to_pass=["t.py::test_fixed"])(swebench_run(RunStatus.TIMEOUT))
    assert grade.details["tests_status"]["FAIL_TO_PASS"]["failure"] == ["t.py::test_fixed"]
    assert grade.value == 0.0 and not grade.resolved


def test_swebench_accepts_dataset_json_lists_and_upper_case_keys() -> None:
    fn = make_score(
        {
            "kind": "swebench",
            "FAIL_TO_PASS": json.dumps(["t.py::a"]),
            "PASS_TO_PASS": "[]",
        }
    )
    assert isinstance(fn, SweBench)
    assert fn.fail_to_pass == ("t.py::a",) and fn.pass_to_pass == ()


def test_scorer_from_config_builds_search_and_grade_specs() -> None:
    scorer = Scorer.from_config(
        {
            "search_tests": {"command": "pytest tests/visible"},
            "grade_tests": {"command": "pytest tests/hidden", "timeout": 100},
            "score": "pass_fraction",
            "grade_score": {"kind": "swebench", "fail_to_pass": ["tests/hidden/t.py::a"]},
        },
        source="run.yaml",
    )
    assert scorer.search_spec.command == "pytest tests/visible"
    assert scorer.grade_spec is not None and scorer.grade_spec.timeout == 100
    assert scorer.score_fn.name == "pass_fraction" and scorer.grade_fn.name == "swebench"
    with pytest.raises(ConfigError, match="run.yaml: scoring.grade_tests.timeout"):
        Scorer.from_config({"grade_tests": {"timeout": "soon"}}, source="run.yaml")
    with pytest.raises(ConfigError, match="allowed: search_tests, grade_tests, score, grade_score"):
        Scorer.from_config({"tests": {}}, source="run.yaml")


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"order": "fast"}, "Scorer: order: input should be 'auto', 'failing_first',"),
        ({"warm": "hot"}, "Scorer: warm: input should be 'auto', 'on' or 'off', got 'hot'"),
        ({"per_test_timeout": -1}, "Scorer: per_test_timeout: must be auto, off or a number"),
        ({"per_test_timeout": True}, "Scorer: per_test_timeout: must be auto, off or a number"),
        ({"cache_inputs": ["../up"]}, "Scorer: cache_inputs: '../up' must be a path relative"),
        (
            {"order": "failing_first", "command": "make test"},
            "Scorer: order: failing_first: it needs a pytest command (use auto or all)",
        ),
    ],
)
def test_scorer_built_directly_checks_its_options_as_the_scoring_section_does(
    options: dict[str, object], says: str
) -> None:
    """The library path: the same model checks the options of ``Scorer(...)`` and of a config's
    ``scoring`` section, so one bad value gets one kind of answer."""
    options = dict(options)
    spec = TestSpec(command=str(options.pop("command", "python -m pytest -q")))
    with pytest.raises(ConfigError) as err:
        Scorer(spec, **options)  # type: ignore[arg-type]
    assert str(err.value).startswith(says), str(err.value)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=rf"scoring\.{next(iter(options))}: "):
        Scorer.from_config({"search_tests": spec.to_config(), **options}, source="c.yaml")


def test_scorer_takes_per_test_timeout_as_value_or_parsed() -> None:
    spec = TestSpec(command="python -m pytest -q")
    fixed = Scorer(spec, per_test_timeout=3).per_test_timeout
    assert (fixed.mode, fixed.seconds) == ("fixed", 3.0)
    assert Scorer(spec, per_test_timeout=fixed).per_test_timeout == fixed
    assert Scorer(spec, per_test_timeout="off").per_test_timeout.mode == "off"


def test_a_warm_runner_built_directly_refuses_an_unknown_mode() -> None:
    """A typo must not act as ``on`` (the check is the scoring section's values)."""
    from treesearch.scoring.warm import WarmRunner

    with pytest.raises(ConfigError, match="warm: must be one of auto, on, off, got 'hot'"):
        WarmRunner("hot")  # type: ignore[arg-type]
    assert WarmRunner("off").mode == "off"
