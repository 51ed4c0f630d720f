"""End to end on a real SWE-bench row: ``search.reproduce`` gives the search its signal.

marshmallow-code__marshmallow-1359 (../shared/corpora/swebench-dev), as published: its repository
tests pass at the base commit (a search on them alone says ``no_signal``). A scripted model on a
chat-completions server on 127.0.0.1 first writes a reproduction test from the problem statement
(it fails at the base commit), then, as the search's strategy, the fix. The row must come out
resolved by the held-out tests with ``no_signal`` false; then the same eval is run again with the
server down and ``replay: true`` and must build the same search graph; last, ``eval --gold``
with the same config (replayed) runs the reproduction step alone and must find that the kept
reproduction passes with the gold patch.

    python experiments/swebench/reproduce_e2e.py --work /tmp/repro-e2e [--corpus ../shared/corpora/swebench-dev]

Needs the package index once (the row's environment: pytest 7.4.4, pytz, simplejson; built
under ``--work``/envs and reused); everything else is offline.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from fake_llm_server import FakeLLMServer, Reply, call, tool_reply  # noqa: E402

from treesearch.eval import run_eval  # noqa: E402
from treesearch.search import graph as G  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpora" / "swebench-dev"
ROW = "marshmallow-code__marshmallow-1359"
REPRO = """from marshmallow import Schema, fields


def test_datetime_field_inside_a_list_can_be_bound():
    class MySchema(Schema):
        times = fields.List(fields.DateTime())

    MySchema()  # AttributeError: 'List' object has no attribute 'opts'
"""
OLD = "or getattr(schema.opts, self.SCHEMA_OPTS_VAR_NAME)"
NEW = "or getattr(self.root.opts, self.SCHEMA_OPTS_VAR_NAME)"


def model(body: dict[str, Any], n: int) -> Reply:
    """Reproduction conversation: write the test; search conversation: the one-line fix."""
    first = body["messages"][1]["content"]
    if any(m["role"] == "tool" for m in body["messages"]):
        return tool_reply(call("finish", _id=f"c{n}", summary="done"), usage=(900, 8))
    if "reproduces the issue" in first:
        return tool_reply(
            call("write_file", _id=f"c{n}", path="tests/test_reproduce_issue.py", content=REPRO),
            usage=(1500, 90),
        )
    return tool_reply(
        call("replace_in_file", _id=f"c{n}", path="src/marshmallow/fields.py", old=OLD, new=NEW),
        usage=(2500, 40),
    )


def config(work: Path, base_url: str, replay: bool) -> Path:
    agent = {
        "kind": "llm",
        "model": "scripted",
        "base_url": base_url,
        "api_key_env": None,
        "cache": str(work / "llm-cache"),
        "replay": replay,
        "retry_backoff": 0.01,
        "retries": 0,
        "max_steps": 4,
    }
    cfg = {
        "task": "Resolve the issue described in the problem statement.",
        "strategies": {"writer": agent, "fixer": agent},
        "scoring": {
            "search_tests": {
                "command": "python -m pytest -q -p no:cacheprovider tests/test_fields.py",
                "timeout": 300,
            }
        },
        "search": {
            "policy": "best_first",
            "budget": {"expansions": 3},
            "reproduce": {"strategy": "writer", "samples": 1},
        },
        "eval": {"env_dir": str(work / "envs"), "setup_timeout": 1200},
    }
    path = work / ("replay.json" if replay else "search.json")
    path.write_text(json.dumps(cfg))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="default: %(default)s")
    args = parser.parse_args()
    corpus = args.corpus.resolve()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    repos = work / "repos"
    bundles = sorted((corpus / "repos").glob("*.bundle"))
    if not bundles:
        print(f"no repository bundles under {corpus / 'repos'}", file=sys.stderr)
        return 2
    if not repos.is_dir():
        repos.mkdir()
        for bundle in bundles:
            subprocess.run(
                ["git", "clone", "-q", "--bare", str(bundle), str(repos / bundle.stem)], check=True
            )
    rows = [json.loads(line) for line in (corpus / "instances.jsonl").read_text().splitlines()]
    instances = work / "instances.jsonl"
    instances.write_text(json.dumps(next(r for r in rows if r["instance_id"] == ROW)) + "\n")
    setup = ROOT / "experiments" / "swebench" / "setup-dev.yaml"
    os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")

    def evaluate(base_url: str, replay: bool, out: str, mode: str = "search") -> Any:
        return run_eval(
            config(work, base_url, replay),
            instances,
            repos=repos,
            out=work / out,
            workers=1,
            setup=setup,
            mode=mode,
        )

    results: dict[str, Any] = {}
    with FakeLLMServer(model) as server:
        out = evaluate(server.base_url, False, "ev")
        url = server.base_url
    row = out.rows[0]
    results["recorded"] = {
        k: row.get(k)
        for k in ("status", "no_signal", "oracle", "reproduction", "test_runs", "tokens", "reason")
    }
    if row["status"] == "error":
        print(json.dumps(results, indent=2))
        print("FAILED: the recorded eval is an error row")
        return 1
    replayed = evaluate(url, True, "ev-replay")  # the server is down now
    again = replayed.rows[0]
    graphs = [
        G.to_json(G.from_json((d / "instances" / ROW / "graph.json").read_text()), stable=True)
        for d in (work / "ev", work / "ev-replay")
    ]
    results["replayed"] = {k: again.get(k) for k in ("status", "no_signal", "test_runs", "tokens")}
    results["same_graph"] = graphs[0] == graphs[1]
    # eval --gold with the same config: the reproduction step alone, replayed
    gold = evaluate(url, True, "ev-gold", mode="gold")
    graded = gold.rows[0]
    results["gold"] = {
        "status": graded.get("status"),
        "reproduction": graded.get("reproduction"),
        "summary": gold.summary.get("reproduction"),
    }
    print(json.dumps(results, indent=2))
    ok = (
        row["status"] == "resolved"
        and row["no_signal"] is False
        and row["reproduction"]["kept"]
        and results["same_graph"]
        and again["status"] == "resolved"
        and graded["status"] == "resolved"
        and (gold.summary.get("reproduction") or {}).get("passes_with_gold") == 1
    )
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
