"""``treesearch eval`` / ``grade`` on rows shaped like published SWE-bench rows: ids cut at their
first space, a ``src/`` layout installed in editable mode elsewhere, grading only the test files
``test_patch`` touches, roots that cannot be scored or give no signal, gold / empty / any
system's predictions. Real repositories, real set-up, real test runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from eval_fixtures import PYTEST, ROOT, TEST_ENV, write_jsonl

from treesearch.eval import run_eval
from treesearch.store.source import commit_folder, diff_commits

# ------------------------------------------------------------------------------ a small project

_LIB = "def greet(name):\n    return 'Hello ' + name\n"
_LIB_FIXED = "def greet(name):\n    return 'Hello, ' + name + '!'\n"
# Parametrized ids hold spaces: the published rows cut them at the first one.
_VISIBLE = (
    "import pytest\nfrom greet import greet\n\n\n"
    "def test_greet_is_text():\n    assert isinstance(greet('x'), str)\n"
)
_HELDOUT = (
    "import pytest\nfrom greet import greet\n\n\n"
    "@pytest.mark.parametrize('name', ['Ada Lovelace', 'Alan Turing'])\n"
    "def test_greet_punctuates(name):\n    assert greet(name) == 'Hello, ' + name + '!'\n\n\n"
    "def test_greet_starts_with_hello():\n    assert greet('x').startswith('Hello')\n"
)
_SECOND = "from greet import greet\n\n\ndef test_second_file():\n    assert greet('y')\n"
# A test file the test_patch does not touch, which breaks any run of the whole suite.
_BROKEN = "raise RuntimeError('this module cannot be imported')\n"

F2P = [
    "tests/test_heldout.py::test_greet_punctuates[Ada",  # cut at the first space
    "tests/test_heldout.py::test_greet_punctuates[Alan",
]
P2P = [
    "tests/test_heldout.py::test_greet_starts_with_hello",
    "tests/test_second.py::test_second_file",
]


def _write(folder: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _project(tmp: Path, *, broken: bool = True) -> dict[str, Any]:
    """A repository ``acme/greet`` and its row: base commit, gold ``patch``, a ``test_patch``
    touching two test files."""
    base_files = {"greet.py": _LIB, "tests/test_visible.py": _VISIBLE}
    if broken:
        base_files["tests/test_broken.py"] = _BROKEN
    src = tmp / "src-base"
    _write(src, base_files)
    repo = tmp / "repos" / "acme__greet"
    base = commit_folder(repo, src, message="base")
    gold = tmp / "src-gold"
    _write(gold, {**base_files, "greet.py": _LIB_FIXED})
    gold_commit = commit_folder(repo, gold, message="gold", parent=base, branch="gold")
    tests = tmp / "src-tests"
    _write(
        tests, {**base_files, "tests/test_heldout.py": _HELDOUT, "tests/test_second.py": _SECOND}
    )
    test_commit = commit_folder(repo, tests, message="tests", parent=base, branch="tests")
    return {
        "instance_id": "acme__greet-7",
        "repo": "acme/greet",
        "base_commit": base,
        "patch": diff_commits(repo, base, gold_commit),
        "test_patch": diff_commits(repo, base, test_commit),
        "FAIL_TO_PASS": json.dumps(F2P),
        "PASS_TO_PASS": json.dumps(P2P),
        "problem_statement": "greet() must punctuate.",
        "version": "1.0",
    }


def _table(tmp: Path, repo: str = "acme/greet", version: str = "1.0", **entry: Any) -> Path:
    path = tmp / "setup.yaml"
    path.write_text(yaml.safe_dump({repo: {version: {"env": TEST_ENV, **entry}}}))
    return path


def _search_config(tmp: Path, command: str, **search: Any) -> Path:
    cfg = {
        "task": "Fix it.",
        "strategies": {
            "fix": {
                "kind": "scripted",
                "steps": [{"replace": "greet.py", "old": "'Hello ' + name", "new": "'Hi'"}],
            }
        },
        "scoring": {"search_tests": {"command": command, "timeout": 60, "env": TEST_ENV}},
        "search": {"policy": "bfs", "seed": 0, "budget": {"expansions": 5}, **search},
        "sandbox": {"writable": [str(tmp)]},
    }
    path = tmp / "search.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _search(tmp: Path, inst: dict[str, Any], command: str) -> Any:
    """``treesearch eval`` of one row steered by ``command``, into ``tmp/ev``."""
    return run_eval(
        _search_config(tmp, command),
        write_jsonl(tmp / "inst.jsonl", [inst]),
        repos=tmp / "repos",
        out=tmp / "ev",
        workers=1,
        setup=_table(tmp),
    )


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "treesearch", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )


def _gold(tmp: Path, inst: dict[str, Any]) -> Any:
    """``treesearch eval --gold`` of one row, into ``tmp/gold``."""
    return run_eval(
        None,
        write_jsonl(tmp / "inst.jsonl", [inst]),
        repos=tmp / "repos",
        out=tmp / "gold",
        workers=1,
        mode="gold",
        setup=_table(tmp),
    )


# ------------------------------------------------------------------------------ gold / empty


def test_eval_gold_resolves_a_row_whose_ids_are_cut_at_their_first_space(tmp_path: Path) -> None:
    inst = _project(tmp_path)
    out = _gold(tmp_path, inst)
    row = out.rows[0]
    assert row["status"] == "resolved", row
    assert row["resolution"] == "RESOLVED_FULL"
    assert row["tests"]["FAIL_TO_PASS"]["success"] == F2P
    assert row["strict"] == {"resolved": True, "reason": ""}
    report = json.loads((tmp_path / "gold" / "report.json").read_text())
    assert report["resolved_ids"] == ["acme__greet-7"] and report["error_ids"] == []
    per = json.loads((tmp_path / "gold" / "instances/acme__greet-7/grade/report.json").read_text())
    assert per["acme__greet-7"]["resolved"] is True
    log = (tmp_path / "gold" / "instances/acme__greet-7/grade/test_output.txt").read_text()
    assert ">>>>> Start Test Output" in log and "PASSED tests/test_heldout.py::" in log


def test_grading_runs_only_the_test_files_the_test_patch_touches(tmp_path: Path) -> None:
    # tests/test_broken.py cannot be imported: a run of the whole suite stops at collection.
    inst = _project(tmp_path, broken=True)
    out = _gold(tmp_path, inst)
    row = out.rows[0]
    assert row["status"] == "resolved", row
    assert row["grade_command"].endswith(
        "python -m pytest -rA tests/test_heldout.py tests/test_second.py"
    )
    assert row["grade_source"] == "default"
    assert row["grade_seconds"] > 0
    assert (
        "test_broken"
        not in (tmp_path / "gold" / "instances/acme__greet-7/grade/test_output.txt").read_text()
    )


def test_eval_empty_resolves_nothing_and_lists_it_as_the_harness_does(tmp_path: Path) -> None:
    inst = _project(tmp_path)
    proc = _cli(
        "eval",
        "--empty",
        "--instances",
        str(write_jsonl(tmp_path / "inst.jsonl", [inst])),
        "--repos",
        str(tmp_path / "repos"),
        "--setup",
        str(_table(tmp_path)),
        "--out",
        str(tmp_path / "empty"),
        "--workers",
        "1",
    )
    assert proc.returncode == 0, proc.stderr
    row = json.loads((tmp_path / "empty" / "results.jsonl").read_text())
    assert row["status"] == "unresolved" and row["empty_patch"] is True
    assert row["tests"]["FAIL_TO_PASS"]["failure"] == F2P  # the base fails them, as it must
    assert sorted(row["tests"]["PASS_TO_PASS"]["success"]) == sorted(P2P)
    report = json.loads((tmp_path / "empty" / "report.json").read_text())
    assert report["empty_patch_ids"] == ["acme__greet-7"] and report["resolved_ids"] == []
    assert "each base commit graded without a patch" in proc.stdout


# ------------------------------------------------------------------------------ grade


def test_grade_predictions_of_another_system_with_the_harness_report_fields(
    tmp_path: Path,
) -> None:
    inst = _project(tmp_path)
    rows = [dict(inst, instance_id=f"acme__greet-{n}") for n in (1, 2, 3, 4)]
    bad = "diff --git a/greet.py b/greet.py\n--- a/greet.py\n+++ b/greet.py\n@@ -1,2 +1,2 @@\n"
    bad += "-def nothing_here(name):\n+def x(name):\n     return 'Hello ' + name\n"
    preds = [
        {"instance_id": "acme__greet-1", "model_name_or_path": "sys", "model_patch": inst["patch"]},
        {"instance_id": "acme__greet-2", "model_name_or_path": "sys", "model_patch": bad},
        {"instance_id": "acme__greet-3", "model_name_or_path": "sys", "model_patch": ""},
    ]  # acme__greet-4 has no prediction
    proc = _cli(
        "grade",
        str(write_jsonl(tmp_path / "preds.jsonl", preds)),
        "--instances",
        str(write_jsonl(tmp_path / "inst.jsonl", rows)),
        "--repos",
        str(tmp_path / "repos"),
        "--setup",
        str(_table(tmp_path)),
        "--out",
        str(tmp_path / "graded"),
        "--workers",
        "1",
    )
    assert proc.returncode == 1, proc.stderr  # one instance is an error row
    assert "acme__greet-2: the patch does not apply" in proc.stderr
    report = json.loads((tmp_path / "graded" / "report.json").read_text())
    assert report["resolved_ids"] == ["acme__greet-1"]
    assert report["error_ids"] == ["acme__greet-2"]
    assert report["empty_patch_ids"] == ["acme__greet-3"]
    assert report["incomplete_ids"] == ["acme__greet-4"]
    assert report["submitted_instances"] == 3 and report["schema_version"] == 2
    results = {
        r["instance_id"]: r
        for r in map(json.loads, (tmp_path / "graded" / "results.jsonl").read_text().splitlines())
    }
    assert "does not apply" in results["acme__greet-2"]["reason"]
    assert "patch failed: greet.py:1" in results["acme__greet-2"]["reason"]  # git's own words
    written = [
        json.loads(x) for x in (tmp_path / "graded/predictions.jsonl").read_text().splitlines()
    ]
    assert {p["model_name_or_path"] for p in written} == {"sys"}


def test_grade_resets_the_test_files_a_prediction_changed(tmp_path: Path) -> None:
    # A prediction that writes its own (always passing) held-out test file is graded on the
    # real held-out tests: the files test_patch touches are put back as at the base first.
    inst = _project(tmp_path, broken=False)
    wrong = inst["patch"].replace("'Hello, ' + name + '!'", "'nope'")
    fake = (
        "diff --git a/tests/test_heldout.py b/tests/test_heldout.py\nnew file mode 100644\n"
        "--- /dev/null\n+++ b/tests/test_heldout.py\n@@ -0,0 +1,2 @@\n"
        "+def test_greet_starts_with_hello():\n+    assert True\n"
    )
    out = run_eval(
        None,
        write_jsonl(tmp_path / "inst.jsonl", [inst]),
        repos=tmp_path / "repos",
        out=tmp_path / "graded",
        workers=1,
        mode="predictions",
        predictions=write_jsonl(
            tmp_path / "p.jsonl",
            [
                {
                    "instance_id": inst["instance_id"],
                    "model_name_or_path": "m",
                    "model_patch": wrong + fake,
                }
            ],
        ),
        setup=_table(tmp_path),
    )
    row = out.rows[0]
    assert row["status"] == "unresolved", row
    assert row["tests"]["FAIL_TO_PASS"]["failure"] == F2P


# ------------------------------------------------------------------------------ search rows


def test_eval_root_that_cannot_be_scored_is_an_error_row_that_spends_nothing(
    tmp_path: Path,
) -> None:
    inst = _project(tmp_path, broken=False)
    out = _search(tmp_path, inst, f"{PYTEST} no_such_folder")
    row = out.rows[0]
    assert row["status"] == "error", row
    assert "INVALID" in row["reason"] and row["stop_reason"] == "root_invalid"
    assert row["test_runs"] == 1 and row["grade_test_runs"] == 0
    assert out.summary["error"] == 1


def test_eval_root_that_passes_every_search_test_says_no_signal(tmp_path: Path) -> None:
    inst = _project(tmp_path, broken=False)
    out = _search(tmp_path, inst, f"{PYTEST} tests/test_visible.py")
    row = out.rows[0]
    assert row["no_signal"] is True, row
    assert row["status"] == "unresolved" and row["reason"].startswith("no signal")
    assert row["stop_reason"] == "perfect_score" and row["test_runs"] == 1
    assert out.summary["no_signal"] == 1 and out.summary["no_signal_ids"] == [inst["instance_id"]]
    summary = json.loads((tmp_path / "ev" / "summary.json").read_text())
    assert summary["no_signal"] == 1
    from treesearch.report.batch_page import eval_page_data

    page = eval_page_data(tmp_path / "ev")
    (table,) = [t for t in page["tables"] if t["id"] == "instances"]
    signal = table["rows"][0][table["columns"].index("signal")]
    assert signal == {"text": "NO SIGNAL", "cls": "status-error"}
    assert "NO SIGNAL" in (tmp_path / "ev" / "report.html").read_text()


def test_instance_search_tests_give_the_search_a_signal(tmp_path: Path) -> None:
    inst = _project(tmp_path, broken=False)
    # Visible tests that check the punctuation fail at the root: a signal to climb. The row's
    # own search-test command replaces the config's (which names no folder at all).
    visible = tmp_path / "extra.py"
    visible.write_text(
        "from greet import greet\n\ndef test_punct():\n    assert greet('a').endswith('!')\n"
    )
    inst["search_tests"] = f"{PYTEST} tests/test_visible.py {visible}"
    out = _search(tmp_path, inst, f"{PYTEST} no_such_folder")
    row = out.rows[0]
    assert row["no_signal"] is False and row["stop_reason"] != "root_invalid", row
    assert row["steer"]["search_tests"] == inst["search_tests"]
    assert row["test_runs"] >= 2  # the root, then the scripted strategy's state


# ------------------------------------------------------------------------------ strict beside


def test_skipped_fail_to_pass_test_is_no_pass_in_either_verdict(tmp_path: Path) -> None:
    inst = _project(tmp_path, broken=False)
    inst["test_patch"] = inst["test_patch"].replace(
        "+@pytest.mark.parametrize", "+@pytest.mark.skip\n+@pytest.mark.parametrize", 1
    )
    inst["test_patch"] = _fix_hunk_counts(inst["test_patch"])
    out = _gold(tmp_path, inst)
    row = out.rows[0]
    # pytest's -rA summary lists skips by location (`SKIPPED [2] tests/test_heldout.py:5: ...`),
    # so the harness's parser never sees their ids: missing, hence failures.
    assert row["status"] == "unresolved" and row["resolution"] == "RESOLVED_NO", row
    assert row["tests"]["FAIL_TO_PASS"]["failure"] == F2P
    assert row["strict"]["resolved"] is False
    assert "test_greet_punctuates" in row["strict"]["reason"]
    assert out.summary["strict_resolved"] == 0


def _fix_hunk_counts(patch: str) -> str:
    """Recount the ``+`` lines of new-file hunks after an edit of the added text."""
    out: list[str] = []
    lines = patch.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("@@ -0,0 +1,"):
            j = i + 1
            while j < len(lines) and lines[j].startswith("+"):
                j += 1
            out.append(f"@@ -0,0 +1,{j - i - 1} @@")
            out.extend(lines[i + 1 : j])
            i = j
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


def test_eval_score_counts_an_unexpected_pass_as_the_grade_does() -> None:
    from treesearch.eval.runner import agreeing_score
    from treesearch.scoring import Outcome, RunStatus, TestCase, TestRun, make_score

    run = TestRun(
        RunStatus.OK,
        (TestCase("t.py::a", Outcome.PASSED), TestCase("t.py::b", Outcome.XPASS)),
        exit_code=0,
    )
    pytest_view = make_score("pass_fraction")(run)
    graded_view = make_score(agreeing_score("pass_fraction"))(run)
    assert pytest_view.value == 1.0 and pytest_view.resolved
    assert graded_view.value == 0.5 and not graded_view.resolved
    assert agreeing_score({"kind": "pass_fraction", "xpass": "pass"})["xpass"] == "pass"
    assert make_score(agreeing_score("resolved"))(run).resolved is False


# ------------------------------------------------------------------------------ tree under test


def _src_layout_row(tmp: Path, install: str, layout: str = "src") -> dict[str, Any]:
    """marshmallow-1343's shape: a ``src/`` layout (or a flat one) whose environment commit is
    LATER than the fix, with the project installed during set-up."""
    from test_eval_environment import BACKEND, PYPROJECT

    def tree(value: str) -> Path:
        folder = tmp / f"acme-{value}"
        package = folder / "src" / "acme" if layout == "src" else folder / "acme"
        package.mkdir(parents=True)
        (folder / "pyproject.toml").write_text(PYPROJECT)
        (folder / "backend.py").write_text(BACKEND)
        (folder / "NAME").write_text("acme\n")
        body = "a + b" if value == "fix" else "a - b"
        (package / "__init__.py").write_text(f"def add(a, b):\n    return {body}\n")
        return folder

    repo = tmp / "repos" / "acme__acme"
    base = commit_folder(repo, tree("bug"), message="base")
    fixed = commit_folder(repo, tree("fix"), message="fix", parent=base, branch="fix")
    with_tests = tree("bug-tests")
    (with_tests / "tests").mkdir()
    (with_tests / "tests" / "test_add.py").write_text(
        "from acme import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n"
    )
    tests = commit_folder(repo, with_tests, message="tests", parent=base, branch="tests")
    return {
        "instance_id": "acme__acme-1343",
        "repo": "acme/acme",
        "base_commit": base,
        "environment_setup_commit": fixed,  # later than the fix
        "patch": diff_commits(repo, base, fixed),
        "test_patch": diff_commits(repo, base, tests),
        "FAIL_TO_PASS": ["tests/test_add.py::test_add"],
        "PASS_TO_PASS": [],
        "version": "1.0",
        "install": install,
    }


@pytest.mark.slow
def test_editable_install_made_at_a_later_commit_is_not_what_the_tests_import(
    tmp_path: Path,
) -> None:
    from test_eval_environment import PIP

    inst = _src_layout_row(tmp_path, f"{PIP} -e .")
    common: dict[str, Any] = {
        "instances": write_jsonl(tmp_path / "inst.jsonl", [inst]),
        "repos": tmp_path / "repos",
        "workers": 1,
        "setup": _table(tmp_path, "acme/acme"),
        "overrides": [f"eval.env_dir={tmp_path / 'envs'}"],
    }
    empty = run_eval(None, out=tmp_path / "empty", mode="empty", **common)
    # The set-up copy holds the fix: a test importing it would pass with no change at all.
    assert empty.rows[0]["status"] == "unresolved", empty.rows[0]
    check = empty.rows[0]["import_check"]
    assert check["ok"] and check["imported"]["acme"].startswith(str(Path("/tmp").resolve()))
    assert "/grade/" in check["imported"]["acme"]
    gold = run_eval(None, out=tmp_path / "gold", mode="gold", **common)
    assert gold.rows[0]["status"] == "resolved", gold.rows[0]


@pytest.mark.slow
def test_a_copy_installed_elsewhere_is_an_error_row_naming_the_path(tmp_path: Path) -> None:
    from test_eval_environment import PIP

    # Not editable, flat layout: site-packages holds a copy that shadows the tree's acme/.
    inst = _src_layout_row(tmp_path, f"{PIP} .", layout="flat")
    out = run_eval(
        None,
        write_jsonl(tmp_path / "inst.jsonl", [inst]),
        repos=tmp_path / "repos",
        out=tmp_path / "gold",
        workers=1,
        mode="gold",
        setup=_table(tmp_path, "acme/acme"),
    )
    row = out.rows[0]
    assert row["status"] == "error", row
    assert "site-packages" in row["reason"] and "acme" in row["reason"]


def test_grade_uses_swebench_itself_when_installed_and_agrees_with_the_port(
    tmp_path: Path,
) -> None:
    pytest.importorskip("swebench.harness.grading", reason="the optional extra `swebench`")
    from treesearch.eval.swebench_grading import official_report

    # A repository swebench knows, at a version it has a spec for: its own functions grade.
    inst = dict(_project(tmp_path), repo="marshmallow-code/marshmallow", version="3.0")
    (tmp_path / "repos" / "acme__greet").rename(
        tmp_path / "repos" / "marshmallow-code__marshmallow"
    )
    table = _table(tmp_path, "marshmallow-code/marshmallow", "3.0", test_cmd="python -m pytest -rA")
    preds = [
        {
            "instance_id": inst["instance_id"],
            "model_name_or_path": "m",
            "model_patch": inst["patch"],
        }
    ]
    out = run_eval(
        None,
        write_jsonl(tmp_path / "inst.jsonl", [inst]),
        repos=tmp_path / "repos",
        out=tmp_path / "graded",
        workers=1,
        mode="predictions",
        predictions=write_jsonl(tmp_path / "p.jsonl", preds),
        setup=table,
    )
    row = out.rows[0]
    assert row["status"] == "resolved", row
    assert row["grade_parser"].startswith("swebench 4.")
    log = (tmp_path / "graded" / row["run_dir"] / "grade" / "test_output.txt").read_text()
    ours = official_report(
        inst["instance_id"], inst["repo"], F2P, P2P, log, version="3.0", official=False
    )
    theirs = json.loads(
        (tmp_path / "graded" / row["run_dir"] / "grade" / "report.json").read_text()
    )
    assert ours["tests_status"] == theirs[inst["instance_id"]]["tests_status"]
    assert ours["resolved"] is theirs[inst["instance_id"]]["resolved"] is True
