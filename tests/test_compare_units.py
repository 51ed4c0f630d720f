"""`treesearch compare`: SPEC checks, the statistics against hand-computed values, curves and
tables from real event logs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from eval_fixtures import ROOT

from treesearch.compare import SpecError, load_spec
from treesearch.compare.curves import curve, first_plausible
from treesearch.compare.outputs import contender_summary, pair_rows
from treesearch.compare.stats import bootstrap_ci, paired_counts, sign_test_p

CONFIG = str(ROOT / "configs" / "eval-mutation.yaml")


def _spec(tmp: Path, **changes: Any) -> Path:
    (tmp / "instances.jsonl").write_text("")
    spec: dict[str, Any] = {
        "instances": "instances.jsonl",
        "contenders": [
            {"name": "best_first", "config": CONFIG},
            {"name": "random", "config": CONFIG, "overrides": ["search.policy=random"]},
        ],
        "seeds": [0],
        "budget": {"test_runs": 5},
    }
    for key, value in changes.items():
        if value is None:
            spec.pop(key, None)
        else:
            spec[key] = value
    path = tmp / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


# ------------------------------------------------------------------------------ SPEC


def test_load_spec_resolves_paths_overrides_budget_and_seed(tmp_path: Path) -> None:
    spec = load_spec(
        _spec(
            tmp_path,
            contenders=[
                {"name": "m", "config": CONFIG, "overrides": {"search.policy": "mcts"}},
            ],
            seeds=[3, 1],
        )
    )
    assert spec.instances == str((tmp_path / "instances.jsonl").resolve())
    (c,) = spec.contenders
    assert c.overrides == ('search.policy="mcts"',)
    assert spec.seeds == (3, 1)
    assert spec.budget == {"test_runs": 5}
    assert spec.overrides_for(c, 3) == [
        'search.policy="mcts"',
        "search.budget=null",
        'search.budget={"test_runs": 5}',
        "search.seed=3",
    ]
    # The SPEC's budget replaces the config's (test_runs 15, expansions 150), it is not merged.
    from treesearch.config import apply_overrides

    raw = yaml.safe_load(Path(CONFIG).read_text())
    merged = apply_overrides(raw, spec.overrides_for(c, 3))
    assert merged["search"]["budget"] == {"test_runs": 5}
    assert merged["search"]["seed"] == 3
    assert merged["search"]["policy"] == "mcts"


@pytest.mark.parametrize(
    ("changes", "field", "says"),
    [
        ({"contenders": None}, "contenders", "missing"),
        ({"contenders": []}, "contenders", "at least 1"),
        (
            {"contenders": [{"name": "a/b", "config": CONFIG}]},
            "contenders[0].name",
            "letters, digits",
        ),
        (
            {"contenders": [{"name": "x", "config": CONFIG}, {"name": "x", "config": CONFIG}]},
            "contenders",
            "two contenders are named 'x'",
        ),
        (
            {"contenders": [{"name": "x", "config": CONFIG, "agent": "y"}]},
            "contenders[0].agent",
            "unknown key",
        ),
        ({"seeds": []}, "seeds", "list of distinct integers"),
        ({"seeds": [1, 1]}, "seeds", "a seed is given twice"),
        ({"seeds": ["one"]}, "seeds[0]", "integer"),
        (
            {"contenders": [{"name": "x", "config": str(ROOT / "configs" / "demo.yaml")}]},
            "contenders[0] (x).config",
            "workspace: an eval config has no workspace",
        ),
        ({"budget": None}, "budget", "missing"),
        ({"budget": {"test_run": 5}}, "budget.test_run", "unknown key"),
        ({"budget": {"test_runs": -1}}, "budget.test_runs", "search.budget"),
        ({"instances": "nowhere.jsonl"}, "instances", "is not a file"),
        ({"repos": "no-such-folder"}, "repos", "is not a folder"),
        ({"extra": 1}, "extra", "unknown key"),
        (
            {"contenders": [{"name": "x", "config": "missing.yaml"}]},
            "contenders[0] (x).config",
            "is not a file",
        ),
        (
            {"contenders": [{"name": "x", "config": CONFIG, "overrides": ["search.seed=4"]}]},
            "contenders[0] (x).overrides",
            "set by the SPEC's seeds",
        ),
        (
            {
                "contenders": [
                    {"name": "x", "config": CONFIG, "overrides": ["search.budget.test_runs=4"]}
                ]
            },
            "contenders[0] (x).overrides",
            "set by the SPEC's budget",
        ),
        (
            {"contenders": [{"name": "x", "config": CONFIG, "overrides": ["policy"]}]},
            "contenders[0] (x).overrides",
            "is not key.path=value",
        ),
        (
            {"contenders": [{"name": "x", "config": CONFIG, "overrides": ["search.policy=up"]}]},
            "contenders[0] (x).overrides",
            "search.policy: must be",
        ),
    ],
)
def test_load_spec_bad_field_is_one_line_naming_file_and_field(
    tmp_path: Path, changes: dict[str, Any], field: str, says: str
) -> None:
    path = _spec(tmp_path, **changes)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path.resolve()}: {field}"), msg
    assert says in msg


def test_load_spec_not_yaml_or_not_a_mapping_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("contenders: [\n")
    with pytest.raises(SpecError, match=r"spec\.yaml:\d+: not valid YAML"):
        load_spec(path)
    path.write_text("- 1\n")
    with pytest.raises(SpecError, match="the top level must be a mapping"):
        load_spec(path)


def test_compare_cli_bad_spec_exits_2_with_one_line(tmp_path: Path) -> None:
    path = _spec(tmp_path, seeds=[])
    proc = subprocess.run(
        [sys.executable, "-m", "treesearch", "compare", str(path), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert f"{path.resolve()}: seeds:" in lines[0]
    assert not (tmp_path / "o").exists()  # nothing started


@pytest.mark.parametrize(
    "args", [[], ["spec.yaml", "--resume", "dir"], ["spec.yaml", "--workers", "0"]]
)
def test_compare_cli_usage_errors_exit_2(args: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "treesearch", "compare", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 2
    assert "treesearch compare: error:" in proc.stderr


def test_compare_resume_of_folder_that_is_no_compare_dir_exits_1(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "treesearch", "compare", "--resume", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 1
    assert "not a compare directory (no compare.yaml)" in proc.stderr


# ------------------------------------------------------------------------------ statistics


@pytest.mark.parametrize(
    ("wins", "losses", "p"),
    [
        (0, 0, 1.0),
        (0, 5, 2 / 32),  # 2 * C(5,0) / 2^5
        (5, 0, 2 / 32),
        (1, 9, 22 / 1024),  # 2 * (1 + 10) / 2^10
        (2, 10, 158 / 4096),  # 2 * (1 + 12 + 66) / 2^12
        (5, 5, 1.0),  # 2 * 638 / 1024 > 1
        (3, 4, 1.0),
        (0, 1, 1.0),
        (0, 20, 2 / 2**20),
    ],
)
def test_sign_test_p_matches_exact_mcnemar_hand_values(wins: int, losses: int, p: float) -> None:
    assert sign_test_p(wins, losses) == pytest.approx(p, rel=1e-12, abs=0)


def test_sign_test_p_negative_count_is_refused() -> None:
    with pytest.raises(ValueError):
        sign_test_p(-1, 2)


def test_bootstrap_ci_is_reproducible_and_matches_binomial_quantiles() -> None:
    values = [0.0] * 5 + [1.0] * 5
    # The resampled mean is Binomial(10, 1/2) / 10: P(X <= 1) = 11/1024 < 2.5% < P(X <= 2) =
    # 56/1024, so the 2.5% quantile is 0.2 and by symmetry the 97.5% one is 0.8.
    assert bootstrap_ci(values) == (0.2, 0.8)
    assert bootstrap_ci(values, seed=7) == bootstrap_ci(values, seed=7)
    assert bootstrap_ci([1.0] * 4) == (1.0, 1.0)
    assert bootstrap_ci([0.5]) == (0.5, 0.5)
    assert bootstrap_ci([]) is None
    # Three instances, one solved: all three draws unsolved has P = 8/27 > 2.5%, all solved
    # 1/27 > 2.5%: the interval is the whole range.
    assert bootstrap_ci([1.0, 0.0, 0.0]) == (0.0, 1.0)


def test_bootstrap_ci_same_values_in_a_fresh_process() -> None:
    code = (
        "from treesearch.compare.stats import bootstrap_ci;"
        "print(bootstrap_ci([0, 1, 1, 0.5, 0, 1, 0, 0, 1, 1, 0.25]))"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    }
    assert len(outs) == 1
    assert str(bootstrap_ci([0, 1, 1, 0.5, 0, 1, 0, 0, 1, 1, 0.25])) == outs.pop().strip()


def test_paired_counts_only_instances_in_both() -> None:
    a = {"i1": 1.0, "i2": 0.0, "i3": 0.5, "i4": 1.0}
    b = {"i1": 0.0, "i2": 1.0, "i3": 0.5, "i5": 1.0}
    assert paired_counts(a, b, ["i1", "i2", "i3", "i4", "i5"]) == (1, 1, 1)


# ------------------------------------------------------------------------------ curves


def _events(run: Path, events: list[dict[str, Any]]) -> Path:
    run.mkdir(parents=True)
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return run


def _exp(k: int, score: float | None, runs: int, tokens: int = 0, usd: float = 0.0) -> dict:
    return {
        "event": "expansion",
        "k": k,
        "node": None if score is None else {"score": score},
        "test_runs": runs,
        "tokens": tokens,
        "edge": {"cost": {"usd": usd}},
    }


def test_first_plausible_counts_runs_tokens_usd_up_to_first_perfect_node(tmp_path: Path) -> None:
    run = _events(
        tmp_path / "r",
        [
            {"event": "root", "score": 0.5, "test_runs": 1},
            _exp(0, 0.5, 1, 100, 0.01),
            _exp(1, None, 0, 50, 0.005),  # a failed agent run: no node, tokens spent
            _exp(2, 0.75, 2, 10, 0.001),  # an agent that ran the tests itself too
            _exp(3, 1.0, 1, 20, 0.002),
            _exp(4, 1.0, 1, 999, 1.0),
            {"event": "finished"},
        ],
    )
    first = first_plausible(run)
    assert first is not None
    assert (first.test_runs, first.tokens, first.usd) == (5, 180, 0.018)


def test_first_plausible_root_already_perfect_and_never(tmp_path: Path) -> None:
    at_root = first_plausible(
        _events(tmp_path / "a", [{"event": "root", "score": 1.0, "test_runs": 1}])
    )
    assert at_root is not None and at_root.test_runs == 1
    never = _events(
        tmp_path / "b", [{"event": "root", "score": 0.0, "test_runs": 1}, _exp(0, 0.9, 1)]
    )
    assert first_plausible(never) is None


def test_curve_steps_weigh_instances_and_seeds() -> None:
    points: dict[str, list[float | None]] = {"i1": [3, None], "i2": [5, 5], "i3": [None, None]}
    # i1: half of its seeds at 3 (1/6 of the set); i2: both seeds at 5 (1/3).
    assert curve(points, ["i1", "i2", "i3"], 10) == [[0, 0.0], [3, 0.166667], [5, 0.5], [10, 0.5]]
    assert curve({}, ["i1"], 4) == [[0, 0.0], [4, 0.0]]
    assert curve({}, [], 4) == []


# ------------------------------------------------------------------------------ summaries


def _row(c: str, iid: str, seed: int, status: str, **kw: Any) -> dict[str, Any]:
    row = {
        "contender": c,
        "instance_id": iid,
        "seed": seed,
        "status": status,
        "resolved": status == "resolved",
        "plausible": None if status == "error" else status == "resolved",
        "test_runs": 10,
        "test_runs_to_first_plausible": 4 if status == "resolved" else None,
        "tokens": 0,
        "tokens_to_first_plausible": None,
        "usd": 0.0,
        "usd_to_first_plausible": None,
        "wall_seconds": 2.0,
        "oracle": False,
    }
    row.update(kw)
    return row


def test_contender_summary_errors_are_counted_never_scored() -> None:
    rows = [
        _row("a", "i1", 0, "resolved"),
        _row("a", "i1", 1, "unresolved", plausible=True, test_runs_to_first_plausible=8),
        _row("a", "i2", 0, "error", wall_seconds=0.0),
        _row("a", "i2", 1, "resolved", test_runs_to_first_plausible=6),
    ]
    s = contender_summary("a", rows)
    assert (s["n"], s["cells"], s["resolved"], s["plausible"], s["errors"]) == (2, 4, 2, 3, 1)
    assert s["resolved_rate"] == 0.5  # i1: 1/2 seeds, i2: 1/2 (the error is not resolved)
    assert s["plausible_rate"] == 0.75  # i1: 2/2, i2: 1/2
    assert s["mean_test_runs_to_first_plausible"] == 6.0  # (4 + 8 + 6) / 3
    assert s["mean_tokens_to_first_plausible"] is None  # no LLM ran
    assert s["mean_wall_seconds"] == 1.5


def test_pair_rows_leave_out_instances_with_an_error_and_use_exact_p() -> None:
    a = [_row("a", f"i{i}", 0, "resolved") for i in range(6)]
    b = [_row("b", f"i{i}", 0, "unresolved") for i in range(5)] + [_row("b", "i5", 0, "error")]
    (pair,) = pair_rows(["a", "b"], {"a": a, "b": b}, seeds=1)
    assert (pair["wins"], pair["losses"], pair["ties"], pair["excluded"]) == (5, 0, 0, 1)
    assert pair["p_value"] == 0.0625
    assert "McNemar" in pair["test"]
    (multi,) = pair_rows(["a", "b"], {"a": a, "b": b}, seeds=3)
    assert "sign test" in multi["test"] and "3 seeds" in multi["test"]


@pytest.mark.parametrize(
    "path", ["configs/compare-policies.yaml", "experiments/benchmarks/repair-compare.yaml"]
)
def test_shipped_specs_are_valid_spec_mappings(path: str) -> None:
    from treesearch.compare.spec import _SpecModel

    raw = yaml.safe_load((ROOT / path).read_text())
    model = _SpecModel.model_validate(raw)
    for c in model.contenders:
        assert (ROOT / path).parent.joinpath(c.config).is_file()
