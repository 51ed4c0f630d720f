"""Units of the eval layer that need no search: repositories, patches, instance files, configs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import tree_digest
from eval_fixtures import ROOT, calc_repo, eval_config, make_calc, write_jsonl

from treesearch.errors import ConfigError
from treesearch.eval import EvalError, InstanceFileError, load_instances, run_eval
from treesearch.eval.batch import load_eval_config
from treesearch.eval.instances import find_repo
from treesearch.store.source import PatchError, SourceError, apply_patch, materialize_commit


def test_importing_scoring_keeps_pythonpath_regression_probe_popped_it() -> None:
    # Bug: importing treesearch.scoring (which imports the pytest probe for its constants) ran
    # the probe's clean-up and removed PYTHONPATH from os.environ of the importing process, so
    # every process it started (Ray workers, agents) lost it.
    code = "import os, treesearch.scoring; print(os.environ.get('PYTHONPATH'))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), "/somewhere/else"])}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == env["PYTHONPATH"]


# ------------------------------------------------------------------------------ store.source


def test_materialize_commit_writes_tree_and_leaves_repository_byte_identical(
    tmp_path: Path,
) -> None:
    inst = calc_repo(tmp_path)
    repo = tmp_path / "repos" / "acme__calc"
    before = tree_digest(repo, include_mtime=True)
    dest = tmp_path / "ws"
    materialize_commit(repo, inst["base_commit"], dest)
    assert (dest / "calc.py").read_text().startswith("def add")
    assert sorted(p.name for p in dest.iterdir()) == ["calc.py", "pyproject.toml", "tests"]
    assert tree_digest(repo, include_mtime=True) == before


def test_materialize_commit_missing_commit_says_so(tmp_path: Path) -> None:
    calc_repo(tmp_path)
    with pytest.raises(SourceError, match="commit deadbeef is not in"):
        materialize_commit(tmp_path / "repos" / "acme__calc", "deadbeef", tmp_path / "ws")
    with pytest.raises(SourceError, match="not a git repository"):
        materialize_commit(tmp_path, "HEAD", tmp_path / "ws2")


def test_apply_patch_that_does_not_fit_changes_nothing(tmp_path: Path) -> None:
    ws = make_calc(tmp_path / "ws")
    before = tree_digest(ws)
    bad = (
        "diff --git a/new.py b/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/new.py\n"
        "@@ -0,0 +1 @@\n+x = 1\n"
        "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n"
        "@@ -1,2 +1,2 @@\n-def nothing():\n+def x():\n     return a - b\n"
    )
    with pytest.raises(PatchError, match="does not apply"):
        apply_patch(ws, bad)
    assert tree_digest(ws) == before  # all or nothing: new.py was not created


@pytest.mark.parametrize(
    "layout,found",
    [
        ("owner__name", "acme__calc"),
        ("owner/name", "acme/calc"),
        ("owner/name.git", "acme/calc.git"),
    ],
)
def test_find_repo_accepts_each_layout(tmp_path: Path, layout: str, found: str) -> None:
    (tmp_path / found).mkdir(parents=True)
    path, why = find_repo(tmp_path, "acme/calc")
    assert path == tmp_path / found and why == ""


def test_find_repo_missing_names_what_it_looked_for(tmp_path: Path) -> None:
    path, why = find_repo(tmp_path, "acme/calc")
    assert path is None
    assert "acme__calc, acme__calc.git, acme/calc, acme/calc.git" in why
    assert find_repo(None, "acme/calc")[1].startswith("repository acme/calc needs --repos DIR")


# ------------------------------------------------------------------------------ instance files


GOOD = {
    "instance_id": "a__b-1",
    "repo": "a/b",
    "base_commit": "abc123",
    "FAIL_TO_PASS": ["t.py::x"],
    "PASS_TO_PASS": '["t.py::y"]',
    "version": 1.5,
    "created_at": "2024-01-01",
}


def test_load_instances_reads_jsonl_and_json_with_encoded_lists_and_extras(
    tmp_path: Path,
) -> None:
    jsonl = write_jsonl(tmp_path / "i.jsonl", [GOOD])
    (inst,) = load_instances(jsonl)
    assert inst.fail_to_pass == ("t.py::x",) and inst.pass_to_pass == ("t.py::y",)
    assert inst.version == "1.5" and inst.extra == {"created_at": "2024-01-01"}
    arr = tmp_path / "i.json"
    arr.write_text(json.dumps([GOOD, dict(GOOD, instance_id="a__b-2")], indent=2))
    assert [i.instance_id for i in load_instances(arr)] == ["a__b-1", "a__b-2"]
    local = write_jsonl(
        tmp_path / "l.jsonl",
        [{"instance_id": "l-1", "workspace": "proj", "FAIL_TO_PASS": ["t::x"]}],
    )
    assert load_instances(local)[0].workspace == str(tmp_path / "proj")


def test_load_instances_takes_published_swebench_rows_as_they_are(tmp_path: Path) -> None:
    """The official rows (tests/data/swebench_logs/*.json, as SWE-bench publishes them: test
    ids as JSON-encoded text, ``version`` as text, ``created_at`` and other fields of no use
    here) load, and an instance written back (``to_json``) loads as the same instance."""
    rows = [
        json.loads(p.read_text())
        for p in sorted((ROOT / "tests" / "data" / "swebench_logs").glob("*.json"))
    ]
    assert len(rows) >= 6
    loaded = load_instances(write_jsonl(tmp_path / "official.jsonl", rows))
    for row, inst in zip(rows, loaded, strict=True):
        assert inst.instance_id == row["instance_id"] and inst.repo == row["repo"]
        assert inst.fail_to_pass == tuple(json.loads(row["FAIL_TO_PASS"]))
        assert inst.pass_to_pass == tuple(json.loads(row["PASS_TO_PASS"]))
        assert inst.version == row["version"] and inst.patch == row["patch"]
        assert inst.environment_setup_commit == row["environment_setup_commit"]
        assert inst.extra == {"created_at": row["created_at"]}
        assert inst.where == f"{tmp_path / 'official.jsonl'}:{loaded.index(inst) + 1}"
    again = load_instances(write_jsonl(tmp_path / "again.jsonl", [i.to_json() for i in loaded]))
    assert [i.model_dump() for i in again] == [i.model_dump() for i in loaded]


def test_instance_row_nulls_are_left_out_fields_and_where_is_never_read_from_the_row(
    tmp_path: Path,
) -> None:
    nulls = dict(GOOD, PASS_TO_PASS=None, environment_setup_commit=None, search_tests=None)
    (inst,) = load_instances(write_jsonl(tmp_path / "n.jsonl", [dict(nulls, where="elsewhere")]))
    assert inst.pass_to_pass == () and inst.environment_setup_commit is None
    assert inst.search_tests is None and inst.where.endswith("n.jsonl:1")
    assert "where" not in inst.to_json() and "search_tests" not in inst.to_json()


@pytest.mark.parametrize(
    "lines,expected",
    [
        (['{"instance_id": "x"', ""], ":1: (line): not a JSON object"),
        ([json.dumps(GOOD), "[1, 2]"], ":2: (line): must be a JSON object, got list"),
        (
            [json.dumps({k: v for k, v in GOOD.items() if k != "instance_id"})],
            ":1: instance_id: missing (required)",
        ),
        ([json.dumps(dict(GOOD, instance_id="../up"))], ":1: instance_id: '../up' is not"),
        ([json.dumps(dict(GOOD, repo=None))], ":1: repo: missing (required unless"),
        ([json.dumps(dict(GOOD, base_commit=None))], ":1: base_commit: missing (required"),
        ([json.dumps(dict(GOOD, repo="just-a-name"))], ":1: repo: 'just-a-name' must look like"),
        ([json.dumps(dict(GOOD, workspace="p"))], ":1: workspace: give either workspace or"),
        (
            [json.dumps(dict(GOOD, FAIL_TO_PASS="not json"))],
            ":1: FAIL_TO_PASS: a string must be a JSON-encoded list",
        ),
        ([json.dumps(dict(GOOD, FAIL_TO_PASS=[]))], ":1: FAIL_TO_PASS: empty"),
        ([json.dumps(dict(GOOD, FAIL_TO_PASS=None))], ":1: FAIL_TO_PASS: missing (required)"),
        ([json.dumps(dict(GOOD, PASS_TO_PASS=[1]))], ":1: PASS_TO_PASS: must be a list"),
        ([json.dumps(dict(GOOD, PASS_TO_PASS=["a", "a"]))], ":1: PASS_TO_PASS: lists a test"),
        ([json.dumps(dict(GOOD, test_patch=3))], ":1: test_patch: must be a string, got int"),
        ([json.dumps(dict(GOOD, install={"x": 1}))], ":1: install: must be a shell command"),
        (
            [json.dumps(GOOD), "", json.dumps(GOOD)],
            ":3: instance_id: duplicate 'a__b-1' (first at line 1)",
        ),
        ([""], ":1: (file): no instances"),
    ],
)
def test_load_instances_bad_input_is_one_line_with_file_line_field(
    tmp_path: Path, lines: list[str], expected: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InstanceFileError) as err:
        load_instances(path)
    message = str(err.value)
    assert message.startswith(f"{path}:") and expected in message and "\n" not in message


def test_load_instances_json_array_error_names_the_object_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([GOOD, dict(GOOD, instance_id="a__b-2", repo=7)], indent=2))
    with pytest.raises(InstanceFileError) as err:
        load_instances(path)
    starts = [i + 1 for i, text in enumerate(path.read_text().splitlines()) if text == "  {"]
    line = starts[1]  # the second object's first line
    assert str(err.value) == f"{path}:{line}: repo: must be a string, got int"
    path.write_text('[\n {"instance_id": "x"},\n oops\n]')
    with pytest.raises(InstanceFileError, match=r"bad.json:3: \(file\): not valid JSON"):
        load_instances(path)
    with pytest.raises(InstanceFileError, match=r"missing.jsonl:1: \(file\): cannot read"):
        load_instances(tmp_path / "missing.jsonl")


# ------------------------------------------------------------------------------ configs, CLI


def test_eval_config_rejects_workspace_unknown_eval_key_and_bad_values(tmp_path: Path) -> None:
    cfg = eval_config(tmp_path)
    raw, section, _source, _base = load_eval_config(cfg)
    assert "workspace" not in raw and section.grade_tests is not None
    with pytest.raises(ConfigError, match="workspace: an eval config has no workspace"):
        load_eval_config(cfg, ["workspace.path=."])
    with pytest.raises(
        ConfigError, match=r"^-c eval.colour=red: eval.colour: unknown key \(allowed: oracle"
    ):
        load_eval_config(cfg, ["eval.colour=red"])
    with pytest.raises(ConfigError, match="eval.oracle: must be true or false, got 'maybe'"):
        load_eval_config(cfg, ["eval.oracle=maybe"])
    with pytest.raises(ConfigError, match="eval.setup_timeout: must be a positive number"):
        load_eval_config(cfg, ["eval.setup_timeout=0"])
    with pytest.raises(ConfigError, match="eval.env_dir: must be a folder path, got 3$"):
        load_eval_config(cfg, ["eval.env_dir=3"])
    with pytest.raises(ConfigError, match=r"eval.grade_tests.comand: unknown key \(allowed: comm"):
        load_eval_config(cfg, ["eval.grade_tests.comand=pytest"])
    with pytest.raises(ConfigError, match=r"^-c eval=3: eval: must be a mapping, got 3$"):
        load_eval_config(cfg, ["eval=3"])
    with pytest.raises(ConfigError, match="search.policy"):
        load_eval_config(cfg, ["search.policy=sideways"])


def test_eval_built_in_config_loads() -> None:
    raw, section, _, _ = load_eval_config(ROOT / "configs/eval-mutation.yaml")
    assert raw["strategies"]["mutate"]["kind"] == "mutation" and section.oracle is False


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "treesearch", "eval", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_eval_cli_bad_instances_file_exits_1_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(dict(GOOD, FAIL_TO_PASS=7)) + "\n")
    proc = _cli(str(eval_config(tmp_path)), "--instances", str(bad), "--out", str(tmp_path / "e"))
    assert proc.returncode == 1
    assert proc.stderr == (
        f"treesearch: error: {bad}:1: FAIL_TO_PASS: must be a list of test ids "
        "(non-empty strings)\n"
    )
    assert not (tmp_path / "e").exists()  # nothing was started


@pytest.mark.parametrize(
    "args,message",
    [
        ([], "give CONFIG and --instances FILE"),
        (["cfg.yaml"], "give CONFIG and --instances FILE"),
        (["cfg.yaml", "--instances", "i.jsonl", "--resume", "d"], "--resume DIR takes no"),
        (["cfg.yaml", "--instances", "i.jsonl", "--workers", "0"], "--workers must be"),
        (["cfg.yaml", "--instances", "i.jsonl", "--executor", "slurm"], "invalid choice"),
    ],
)
def test_eval_cli_usage_errors_exit_2(args: list[str], message: str) -> None:
    proc = _cli(*args)
    assert proc.returncode == 2 and message in proc.stderr


def test_eval_resume_of_a_folder_that_is_no_eval_dir_exits_1(tmp_path: Path) -> None:
    proc = _cli("--resume", str(tmp_path))
    assert proc.returncode == 1 and "not an eval directory (no eval.yaml)" in proc.stderr


def test_eval_missing_repos_folder_is_refused(tmp_path: Path) -> None:
    inst = write_jsonl(tmp_path / "i.jsonl", [GOOD])
    with pytest.raises(Exception, match="--repos .*nowhere: not a folder"):
        run_eval(eval_config(tmp_path), inst, repos=tmp_path / "nowhere", out=tmp_path / "e")


# ------------------------------------------------------------------------------ SWE-bench's way


def test_swebench_test_directives_list_the_test_files_of_test_patch() -> None:
    from treesearch.eval.swebench_grading import test_directives as directives

    patch = (
        "diff --git a/tests/test_a.py b/tests/test_a.py\n--- a/tests/test_a.py\n"
        "diff --git a/tests/data.json b/tests/data.json\n--- a/tests/data.json\n"
        "diff --git a/tests/test_b.py b/tests/test_b.py\n"
    )
    assert directives("x/y", patch) == ["tests/test_a.py", "tests/test_b.py"]


# ------------------------------------------------------------------------------ predictions


def test_predictions_load_in_each_form_the_harness_reads(tmp_path: Path) -> None:
    from treesearch.eval import load_predictions

    p = {"instance_id": "a", "model_name_or_path": "m", "model_patch": "diff"}
    forms = {
        "lines.jsonl": json.dumps(p) + "\n" + json.dumps({**p, "instance_id": "b"}) + "\n",
        "list.json": json.dumps([p]),
        "by_id.json": json.dumps({"a": p}),
        "one.json": json.dumps(p),
        "null.jsonl": json.dumps({**p, "model_patch": None}) + "\n",
    }
    for name, text in forms.items():
        (tmp_path / name).write_text(text)
    assert sorted(load_predictions(tmp_path / "lines.jsonl")) == ["a", "b"]
    for name in ("list.json", "by_id.json", "one.json"):
        assert load_predictions(tmp_path / name)["a"].model_patch == "diff", name
    assert load_predictions(tmp_path / "null.jsonl")["a"].model_patch is None


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{"model_name_or_path": "m", "model_patch": ""}], ":1: instance_id: missing"),
        ([{"instance_id": "a", "model_patch": ""}], ":1: model_name_or_path: missing"),
        ([{"instance_id": "a", "model_name_or_path": "m"}], ":1: model_patch: missing"),
        ([{"instance_id": "a", "model_name_or_path": "m", "model_patch": 3}], "got int"),
        (
            [{"instance_id": "a", "model_name_or_path": "m", "model_patch": ""}] * 2,
            ":2: instance_id: duplicate 'a'",
        ),
    ],
)
def test_bad_predictions_file_names_the_line_and_field(
    tmp_path: Path, rows: list[dict[str, Any]], message: str
) -> None:
    from treesearch.eval import PredictionsFileError, load_predictions

    path = tmp_path / "preds.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(PredictionsFileError, match=re.escape(message)):
        load_predictions(path)


def test_grade_of_predictions_for_unknown_instances_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    inst = calc_repo(tmp_path)
    preds = tmp_path / "p.jsonl"
    preds.write_text(
        json.dumps({"instance_id": "other-1", "model_name_or_path": "m", "model_patch": ""}) + "\n"
    )
    with pytest.raises(EvalError, match="other-1"):
        run_eval(
            None,
            write_jsonl(tmp_path / "inst.jsonl", [inst]),
            repos=tmp_path / "repos",
            out=tmp_path / "g",
            mode="predictions",
            predictions=preds,
        )
    assert not (tmp_path / "g").exists()
