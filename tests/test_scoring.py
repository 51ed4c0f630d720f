"""Scoring with real pytest runs on small fixture projects (no mocks)."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from treesearch.scoring import (
    Outcome,
    RunStatus,
    Scorer,
    TestCase,
    TestRun,
    TestSpec,
    make_score,
    run_tests,
    score_workspace,
)
from treesearch.store import ShadowStore

# Plugin autoloading (hypothesis, benchmark, ...) costs seconds per inner run and is not needed.
QUICK_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTEST_ADDOPTS": ""}


def pytest_spec(*args: str, **kwargs: object) -> TestSpec:
    fields: dict[str, object] = {
        "command": (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args),
        "timeout": 60,
        "env": QUICK_ENV,
    }
    fields.update(kwargs)
    return TestSpec(**fields)  # type: ignore[arg-type]


def make_project(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pytest.ini").write_text("[pytest]\n")
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def listing(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"<dir>")
        for p in sorted(root.rglob("*"))
    }


def is_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


CALC = """
def add(a, b):
    return a + b
"""


def test_run_all_passing_suite_is_ok_and_resolved(tmp_path: Path) -> None:
    ws = make_project(
        tmp_path / "ws",
        {
            "calc.py": CALC,
            "tests/test_calc.py": """
                from calc import add
                def test_add(): assert add(1, 2) == 3
                def test_add_neg(): assert add(-1, 1) == 0
            """,
        },
    )
    result = Scorer(pytest_spec()).score(ws)
    assert result.status is RunStatus.OK
    assert result.run.totals["passed"] == 2 and result.run.exit_code == 0
    assert result.score == 1.0 and result.resolved
    assert result.rows() == [
        ("tests/test_calc.py::test_add", "passed"),
        ("tests/test_calc.py::test_add_neg", "passed"),
    ]
    assert not result.cached


def test_run_some_failing_gives_fraction_and_feedback_with_failing_ids(tmp_path: Path) -> None:
    ws = make_project(
        tmp_path / "ws",
        {
            "calc.py": "def add(a, b):\n    return a - b\n",
            "tests/test_calc.py": """
                from calc import add
                def test_zero(): assert add(0, 0) == 0
                def test_same(): assert add(2, 0) == 2
                def test_add(): assert add(1, 2) == 3, "one plus two"
            """,
        },
    )
    result = Scorer(pytest_spec()).score(ws)
    assert result.status is RunStatus.OK
    assert result.score == pytest.approx(2 / 3) and not result.resolved
    feedback = result.feedback()
    assert "FAILED tests/test_calc.py::test_add - AssertionError: one plus two" in feedback
    assert "test_zero" not in feedback.split("--- ")[0]
    assert "assert -1 == 3" in feedback  # the traceback tail


def test_run_syntax_error_in_code_under_test_fails_run_with_error_text(tmp_path: Path) -> None:
    ws = make_project(
        tmp_path / "ws",
        {
            "calc.py": "def add(a, b)\n    return a + b\n",
            "tests/test_calc.py": "from calc import add\ndef test_add(): assert add(1, 2) == 3\n",
        },
    )
    result = Scorer(pytest_spec()).score(ws)
    assert result.run.exit_code == 2
    assert result.run.tests == (result.run.tests[0],)
    assert result.run.tests[0].id == "tests/test_calc.py"
    assert result.run.tests[0].outcome is Outcome.ERROR
    assert result.score == 0.0 and not result.resolved
    assert "collection" in result.run.problem
    assert "SyntaxError" in result.feedback()


def test_run_hanging_test_times_out_and_its_process_group_is_gone(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    ws = make_project(
        tmp_path / "ws",
        {
            "tests/test_hang.py": f"""
                import os, subprocess, time
                def test_hang():
                    child = subprocess.Popen(["sleep", "300"])
                    with open({str(pids)!r}, "w") as f:
                        f.write(f"{{os.getpid()}} {{child.pid}}")
                    time.sleep(300)
            """,
        },
    )
    started = time.monotonic()
    result = Scorer(pytest_spec(timeout=6)).score(ws)
    assert time.monotonic() - started < 30
    assert result.status is RunStatus.TIMEOUT and result.run.timed_out
    assert result.score == 0.0 and not result.resolved
    assert "did not finish within 6 s" in result.run.problem
    pytest_pid, sleep_pid = (int(p) for p in pids.read_text().split())
    deadline = time.monotonic() + 5
    while (is_alive(pytest_pid) or is_alive(sleep_pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not is_alive(pytest_pid) and not is_alive(sleep_pid)


def test_run_tests_that_delete_their_junit_report_is_never_a_pass(tmp_path: Path) -> None:
    ws = make_project(
        tmp_path / "ws",
        {
            "tests/test_sneaky.py": """
                import atexit, os, sys
                def test_sneaky():
                    flag = "--junitxml="
                    report = next(a[len(flag):] for a in sys.argv if a.startswith(flag))
                    atexit.register(os.remove, report)  # runs after pytest wrote the report
            """,
        },
    )
    result = Scorer(pytest_spec()).score(ws)
    assert result.run.exit_code == 0
    assert result.status is RunStatus.CRASHED
    assert "missing" in result.run.problem and "tests ran" in result.run.problem
    assert result.score == 0.0 and not result.resolved
    assert make_score("resolved")(result.run).value == 0.0


def test_run_junit_report_with_entity_bomb_is_invalid(tmp_path: Path) -> None:
    bomb = (
        '<?xml version="1.0"?><!DOCTYPE b [<!ENTITY a "aaaaaaaaaa">'
        + "".join(f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(8))
        + ']><testsuite><testcase classname="x" name="&i;"/></testsuite>'
    )
    ws = make_project(tmp_path / "ws", {})
    before = listing(ws)
    spec = TestSpec(
        command=(sys.executable, "-c", f"open('report.xml', 'w').write({bomb!r})"),
        junit_xml="report.xml",
        timeout=30,
    )
    assert not spec.is_pytest
    result = Scorer(spec).score(ws)
    assert result.status is RunStatus.INVALID
    assert "DTD" in result.run.problem
    assert result.score == 0.0 and not result.resolved
    assert listing(ws) == before  # the report the command wrote is not left behind


def test_run_parametrized_ids_with_spaces_and_brackets_are_node_ids(tmp_path: Path) -> None:
    ws = make_project(
        tmp_path / "ws",
        {
            "tests/test_params.py": """
                import pytest
                class TestGroup:
                    @pytest.mark.parametrize("value", ["a b", "x[1]", "p::q", "dot.ted"])
                    def test_value(self, value):
                        assert value != "x[1]"
            """,
        },
    )
    run = run_tests(pytest_spec(), ws)
    ids = [t.id for t in run.tests]
    base = "tests/test_params.py::TestGroup::test_value"
    assert ids == [f"{base}[a b]", f"{base}[x[1]]", f"{base}[p::q]", f"{base}[dot.ted]"]
    assert run.outcome(f"{base}[x[1]]") is Outcome.FAILED
    grade = make_score(
        {"kind": "swebench", "fail_to_pass": [f"{base}[a b]"], "pass_to_pass": [f"{base}[p::q]"]}
    )(run)
    assert grade.resolved
    # Explicit ids are passed through the shell intact.
    shell_spec = TestSpec(
        command=f"{sys.executable} -m pytest -q -p no:cacheprovider",
        tests=(f"{base}[a b]", f"{base}[p::q]"),
        env=QUICK_ENV,
        timeout=60,
    )
    only = run_tests(shell_spec, ws)
    assert [t.id for t in only.tests] == [f"{base}[a b]", f"{base}[p::q]"]
    assert only.all_passed


def test_run_fail_to_pass_test_that_is_skipped_is_not_resolved(tmp_path: Path) -> None:
    ws = make_project(
        tmp_path / "ws",
        {
            "tests/test_feature.py": """
                import pytest
                def test_old(): pass
                @pytest.mark.skip(reason="not yet")
                def test_new(): assert False
            """,
        },
    )
    scorer = Scorer(
        pytest_spec(),
        {
            "kind": "swebench",
            "fail_to_pass": ["tests/test_feature.py::test_new"],
            "pass_to_pass": ["tests/test_feature.py::test_old"],
        },
    )
    result = scorer.score(ws)
    assert result.status is RunStatus.OK and result.run.all_passed  # pytest calls it green
    assert not result.resolved
    assert result.details["tests_status"]["FAIL_TO_PASS"]["failure"] == [
        "tests/test_feature.py::test_new"
    ]
    assert result.details["resolution"] == "RESOLVED_NO"


def test_run_reports_xfail_and_xpass_outcomes(tmp_path: Path) -> None:
    ws = make_project(
        tmp_path / "ws",
        {
            "tests/test_x.py": """
                import pytest
                @pytest.mark.xfail(reason="known bug")
                def test_xfail(): assert False
                @pytest.mark.xfail(reason="fixed now")
                def test_xpass(): pass
                @pytest.mark.xfail(reason="strict", strict=True)
                def test_xpass_strict(): pass
            """,
        },
    )
    run = run_tests(pytest_spec("-rX"), ws)
    outcomes = {t.id.split("::")[1]: t.outcome for t in run.tests}
    assert outcomes == {
        "test_xfail": Outcome.XFAIL,
        "test_xpass": Outcome.XPASS,
        "test_xpass_strict": Outcome.FAILED,
    }


def test_run_missing_report_and_no_sign_of_tests_is_invalid(tmp_path: Path) -> None:
    ws = make_project(tmp_path / "ws", {})
    spec = TestSpec(command=(sys.executable, "-c", "pass"), junit_xml="out/report.xml", timeout=30)
    result = Scorer(spec).score(ws)
    assert result.run.exit_code == 0
    assert result.status is RunStatus.INVALID
    assert "missing" in result.run.problem and "no sign" in result.run.problem
    assert result.score == 0.0 and not result.resolved


def test_run_pytest_collecting_nothing_is_invalid(tmp_path: Path) -> None:
    ws = make_project(tmp_path / "ws", {"tests/helper.py": "X = 1\n"})
    result = Scorer(pytest_spec()).score(ws)
    assert result.run.exit_code == 5
    assert result.status is RunStatus.INVALID
    assert "no tests" in result.run.problem
    assert result.score == 0.0


def test_run_generic_command_without_report_uses_exit_code(tmp_path: Path) -> None:
    ws = make_project(tmp_path / "ws", {})
    ok = Scorer(TestSpec(command="exit 0", timeout=30)).score(ws)
    bad = Scorer(TestSpec(command="echo broken >&2; exit 3", timeout=30)).score(ws)
    assert ok.status is RunStatus.OK and not ok.run.has_report and ok.score == 1.0 and ok.resolved
    assert bad.status is RunStatus.OK and bad.score == 0.0 and bad.run.exit_code == 3
    assert "broken" in bad.feedback()


def test_run_command_that_cannot_start_is_crashed(tmp_path: Path) -> None:
    ws = make_project(tmp_path / "ws", {})
    result = Scorer(TestSpec(command=(str(tmp_path / "no-such-program"),), timeout=30)).score(ws)
    assert result.status is RunStatus.CRASHED and result.run.exit_code is None
    assert "could not start" in result.run.problem
    assert result.score == 0.0


GO_LIKE_REPORT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="3" failures="1">
  <testsuite name="example.com/calc" tests="3" failures="1" errors="0">
    <testcase classname="example.com/calc" name="TestAdd" time="0.01"/>
    <testcase classname="example.com/calc" name="TestSub" time="0.01">
      <failure message="Failed">calc_test.go:12: got 1, want 2</failure>
    </testcase>
    <testcase classname="example.com/calc" name="TestMul" time="0.00"><skipped/></testcase>
  </testsuite>
</testsuites>
"""


def test_run_generic_junit_report_is_read_and_stale_report_put_back(tmp_path: Path) -> None:
    ws = make_project(tmp_path / "ws", {"report.xml": "stale report, tracked by the project\n"})
    before = listing(ws)
    writer = f"open('report.xml', 'w').write({GO_LIKE_REPORT!r}); raise SystemExit(1)"
    spec = TestSpec(command=(sys.executable, "-c", writer), junit_xml="report.xml", timeout=30)
    run = run_tests(spec, ws)
    assert run.status is RunStatus.OK and run.exit_code == 1
    assert [(t.id, t.outcome) for t in run.tests] == [
        ("example.com/calc::TestAdd", Outcome.PASSED),
        ("example.com/calc::TestSub", Outcome.FAILED),
        ("example.com/calc::TestMul", Outcome.SKIPPED),
    ]
    assert "got 1, want 2" in run.feedback()
    assert listing(ws) == before


def test_run_does_not_read_a_stale_report_the_command_did_not_write(tmp_path: Path) -> None:
    ws = make_project(tmp_path / "ws", {"report.xml": GO_LIKE_REPORT})
    spec = TestSpec(command="true", junit_xml="report.xml", timeout=30)
    run = run_tests(spec, ws)
    assert run.status is RunStatus.INVALID and run.tests == ()
    assert (ws / "report.xml").read_text() == GO_LIKE_REPORT


def test_run_oversized_report_is_invalid(tmp_path: Path) -> None:
    ws = make_project(tmp_path / "ws", {})
    writer = f"open('report.xml', 'w').write({GO_LIKE_REPORT!r})"
    spec = TestSpec(command=(sys.executable, "-c", writer), junit_xml="report.xml", timeout=30)
    run = run_tests(spec, ws, max_report_bytes=100)
    assert run.status is RunStatus.INVALID and "too large" in run.problem


def test_run_pytest_leaves_the_workspace_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The runner itself must keep Python from writing __pycache__ into the workspace.
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    ws = make_project(
        tmp_path / "ws",
        {
            "pkg/__init__.py": "",
            "pkg/calc.py": CALC,
            "tests/test_calc.py": """
                from pkg.calc import add
                def test_add(): assert add(1, 2) == 3
            """,
        },
    )
    before = listing(ws)
    spec = TestSpec(command=(sys.executable, "-m", "pytest", "-q"), env=QUICK_ENV, timeout=60)
    run = run_tests(spec, ws)
    assert run.all_passed
    assert listing(ws) == before  # no .pytest_cache, no __pycache__, no report


def test_run_cwd_outside_the_workspace_is_refused(tmp_path: Path) -> None:
    from treesearch.errors import ScoringError

    ws = make_project(tmp_path / "ws", {})
    (tmp_path / "ws" / "link").symlink_to(tmp_path)
    with pytest.raises(ScoringError, match="outside the workspace"):
        run_tests(TestSpec(command="true", cwd="link"), ws)
    with pytest.raises(ScoringError, match="not a folder"):
        run_tests(TestSpec(command="true", cwd="missing"), ws)


def test_score_reruns_mark_tests_that_flip_as_flaky(tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    ws = make_project(
        tmp_path / "ws",
        {
            "tests/test_flip.py": f"""
                import os
                def _bump():
                    path = {str(counter)!r}
                    n = int(open(path).read()) + 1 if os.path.exists(path) else 1
                    open(path, "w").write(str(n))
                    return n
                def test_flaky():
                    assert _bump() % 2 == 0  # fails on the 1st and 3rd run, passes on the 2nd
                def test_broken():
                    assert False
                def test_stable():
                    pass
            """,
        },
    )
    base = "tests/test_flip.py::"
    parent = TestRun(
        status=RunStatus.OK,
        tests=tuple(
            TestCase(id=base + name, outcome=Outcome.PASSED)
            for name in ("test_flaky", "test_broken", "test_stable")
        ),
        exit_code=0,
    )
    scorer = Scorer(pytest_spec(reruns=2))
    result = scorer.score(ws, parent=parent)
    by_id = {t.id: t for t in result.run.tests}
    flaky, broken, stable = (by_id[base + n] for n in ("test_flaky", "test_broken", "test_stable"))
    assert flaky.flaky and flaky.reruns == (Outcome.PASSED, Outcome.FAILED)
    assert flaky.outcome is Outcome.FAILED  # majority of failed, passed, failed
    assert not broken.flaky and broken.reruns == (Outcome.FAILED, Outcome.FAILED)
    assert not stable.flaky and stable.reruns == ()
    assert result.run.flaky == (base + "test_flaky",)
    assert counter.read_text() == "3"
    assert scorer.test_runs == 3
    assert ("tests/test_flip.py::test_flaky", "failed (flaky)") in result.rows()


def test_scorer_grades_with_held_out_tests_only_when_asked(tmp_path: Path) -> None:
    ws = make_project(
        tmp_path / "ws",
        {
            "calc.py": CALC,
            "tests/visible/test_v.py": """
                from calc import add
                def test_v(): assert add(1, 1) == 2
            """,
        },
    )
    hidden = make_project(
        tmp_path / "hidden",
        {"test_h.py": "from calc import add\ndef test_h(): assert add(2, 2) == 5\n"},
    )
    search = pytest_spec("tests/visible")
    grade = pytest_spec(
        str(hidden / "test_h.py"), "--rootdir", str(ws), env={**QUICK_ENV, "PYTHONPATH": str(ws)}
    )
    scorer = Scorer(search, "pass_fraction", grade)
    searched = scorer.score(ws)
    assert [t.id for t in searched.run.tests] == ["tests/visible/test_v.py::test_v"]
    assert searched.score == 1.0 and not searched.held_out
    assert scorer.test_runs == 1
    graded = scorer.grade(ws)
    assert graded.held_out and graded.score == 0.0 and not graded.resolved
    assert [t.outcome for t in graded.run.tests] == [Outcome.FAILED]
    assert scorer.test_runs == 2
    fallback = Scorer(search).grade(ws)
    assert not fallback.held_out and fallback.score == 1.0


def test_score_workspace_scores_a_snapshot_materialized_elsewhere(tmp_path: Path) -> None:
    ws = make_project(
        tmp_path / "ws",
        {
            "calc.py": "def add(a, b):\n    return a - b\n",
            "tests/test_calc.py": "from calc import add\ndef test_add(): assert add(1, 2) == 3\n",
        },
    )
    store = ShadowStore.open(ws, home=tmp_path / "home")
    broken = store.capture(label="broken")
    (ws / "calc.py").write_text(CALC)
    before = listing(ws)
    result = score_workspace(ws, pytest_spec(), ref=broken.commit, store=store)
    assert result.tree == broken.tree
    assert result.run.tests[0].id == "tests/test_calc.py::test_add"
    assert result.score == 0.0 and result.run.tests[0].outcome is Outcome.FAILED
    assert listing(ws) == before
    live = score_workspace(ws, pytest_spec().to_config() | {"command": list(pytest_spec().command)})
    assert live.score == 1.0 and live.tree is None


def test_score_workspace_ref_without_store_is_an_error(tmp_path: Path) -> None:
    from treesearch.errors import ScoringError

    with pytest.raises(ScoringError, match="needs the snapshot store"):
        score_workspace(tmp_path, TestSpec(), ref="abcd")


def test_score_result_is_json_serialisable(tmp_path: Path) -> None:
    import json

    ws = make_project(tmp_path / "ws", {"tests/test_a.py": "def test_a(): pass\n"})
    result = Scorer(
        pytest_spec(), {"kind": "swebench", "fail_to_pass": ["tests/test_a.py::test_a"]}
    ).score(ws)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["resolved"] is True and data["status"] == "ok"
    assert data["run"]["totals"]["passed"] == 1
    assert os.path.isabs(str(ws))


def test_run_pytest_with_its_own_junit_path_reads_it_and_leaves_no_file(tmp_path: Path) -> None:
    ws = make_project(tmp_path / "ws", {"tests/test_a.py": "def test_a(): pass\n"})
    before = listing(ws)
    run = run_tests(pytest_spec("--junitxml=build/junit.xml", junit_xml="build/junit.xml"), ws)
    assert run.all_passed and [t.id for t in run.tests] == ["tests/test_a.py::test_a"]
    assert not (ws / "build" / "junit.xml").exists()
    assert set(listing(ws)) - set(before) <= {"build"}  # pytest made the folder


def test_run_pytest_with_unknown_test_id_is_invalid(tmp_path: Path) -> None:
    ws = make_project(tmp_path / "ws", {"tests/test_a.py": "def test_a(): pass\n"})
    spec = pytest_spec(tests=("tests/test_a.py::test_a", "tests/test_a.py::test_gone"))
    result = Scorer(spec, {"kind": "swebench", "fail_to_pass": ["tests/test_a.py::test_a"]}).score(
        ws
    )
    assert result.run.exit_code == 4
    assert result.status is RunStatus.INVALID and "usage error" in result.run.problem
    assert result.details["tests_status"]["FAIL_TO_PASS"]["failure"] == ["tests/test_a.py::test_a"]
    assert not result.resolved and result.score == 0.0
