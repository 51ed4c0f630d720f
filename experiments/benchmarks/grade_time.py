"""Grading time per SWE-bench instance: the whole suite (the old default) against the test files
the ``test_patch`` touches (SWE-bench's test directives, the new default), side by side.

For each instance of an instances file: its environment (from a set-up table), a grading copy at
base_commit + gold patch + test_patch, then the two grading commands, alternating, ``--reps``
times each, in this one process. Prints seconds (median) per instance, the ratio old/new, and
whether each grade resolves the instance (the old whole-suite run is graded with the same
official rule, on the same log parser).

    python experiments/benchmarks/grade_time.py \\
        --instances ../shared/corpora/swebench-dev/instances.jsonl \\
        --repos /tmp/swe/repos --setup experiments/swebench/setup-dev.yaml \\
        --env-dir /tmp/swe/envs [--reps 3] [--json out.json]

``--repos``: a folder of clones of the corpus' bundles (``git clone --bare X.bundle X``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from treesearch.eval.environment import env_spec_for, look_up, prepare_env
from treesearch.eval.grade import grade_plan
from treesearch.eval.instances import find_repo, load_instances
from treesearch.eval.setup_table import load_setup_table
from treesearch.eval.swebench_grading import harness_log, official_report
from treesearch.scoring import TestSpec, run_tests
from treesearch.store.source import apply_patch, materialize_commit

OLD_COMMAND = "python -m pytest -rA"
"""The old default graded the whole suite (``python -m pytest -q``); ``-rA`` is added so that
the official parser can grade its output too (it costs nothing measurable)."""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instances", required=True)
    ap.add_argument("--repos", required=True)
    ap.add_argument("--setup", required=True)
    ap.add_argument("--env-dir", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    items = load_instances(args.instances)
    known = look_up(items, load_setup_table(args.setup))
    rows = []
    print(f"{'instance':<36} {'whole suite s':>13} {'directives s':>12} {'ratio':>6}  resolved")
    for inst in items:
        assert inst.repo and inst.base_commit
        repo, why = find_repo(Path(args.repos), inst.repo)
        if repo is None:
            print(f"{inst.instance_id}: {why}", file=sys.stderr)
            return 2
        spec = env_spec_for(inst, known[inst.instance_id])
        commit = inst.environment_setup_commit or inst.base_commit

        def materialize(dest: Path, repo: Path = repo, commit: str = commit) -> None:
            materialize_commit(repo, commit, dest)

        env = prepare_env(spec, Path(args.env_dir), materialize, timeout=args.timeout)
        if env.error:
            print(f"{inst.instance_id}: {env.error}", file=sys.stderr)
            return 1
        test_env = {**dict(env.env), **dict(spec.test_env)}
        with tempfile.TemporaryDirectory() as tmp:
            tree = Path(tmp) / "tree"
            materialize_commit(repo, inst.base_commit, tree)
            apply_patch(tree, inst.patch)
            apply_patch(tree, inst.test_patch)
            new = grade_plan(
                inst,
                {"timeout": args.timeout},
                explicit=False,
                env_test_cmd=spec.test_cmd,
                env_source=spec.source,
                env_vars=test_env,
            ).spec
            old = TestSpec.from_config(
                {"command": OLD_COMMAND, "timeout": args.timeout, "env": test_env}, "<bench>"
            )
            times: dict[str, list[float]] = {"old": [], "new": []}
            resolved: dict[str, bool] = {}
            for _ in range(args.reps):
                for name, test_spec in (("old", old), ("new", new)):
                    t0 = time.monotonic()
                    run = run_tests(test_spec, tree, output_limit=64 * 1024 * 1024)
                    times[name].append(time.monotonic() - t0)
                    report = official_report(
                        inst.instance_id,
                        inst.repo,
                        inst.fail_to_pass,
                        inst.pass_to_pass,
                        harness_log(run.output),
                        version=inst.version,
                    )
                    resolved[name] = bool(report["resolved"])
        old_s, new_s = statistics.median(times["old"]), statistics.median(times["new"])
        row = {
            "instance_id": inst.instance_id,
            "whole_suite_seconds": round(old_s, 2),
            "directives_seconds": round(new_s, 2),
            "ratio": round(old_s / new_s, 2),
            "resolved_whole_suite": resolved["old"],
            "resolved_directives": resolved["new"],
            "directives_command": new.command,
        }
        rows.append(row)
        print(
            f"{inst.instance_id:<36} {old_s:>13.2f} {new_s:>12.2f} {old_s / new_s:>5.1f}x  "
            f"{'yes' if resolved['old'] else 'no'} / {'yes' if resolved['new'] else 'no'}",
            flush=True,
        )
    total_old = sum(r["whole_suite_seconds"] for r in rows)
    total_new = sum(r["directives_seconds"] for r in rows)
    print(f"{'total':<36} {total_old:>13.2f} {total_new:>12.2f} {total_old / total_new:>5.1f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
