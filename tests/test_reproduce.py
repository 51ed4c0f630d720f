"""Reproduction tests (``search.reproduce``): a strategy writes tests from the task text before
the search; the ones that fail at the root steer it as their own score part, the bad ones are
dropped with their reason. Real searches, a real chat-completions server on 127.0.0.1 standing
in for the model, real pytest runs; then the same search replayed with the server off."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")

from fake_llm_server import FakeLLMServer, Reply, call, tool_reply  # noqa: E402

from treesearch.app import run_from_config  # noqa: E402
from treesearch.errors import ConfigError  # noqa: E402
from treesearch.search import graph as G  # noqa: E402

KEY_ENV = "TS_TEST_REPRO_KEY"
ISSUE = "greet() should punctuate: greet('Ada') must return 'Hello, Ada!' (it gives 'Hello Ada')."
GREET = "def greet(name):\n    return 'Hello ' + name\n"
VISIBLE = "from greet import greet\n\n\ndef test_greet_is_text():\n    assert isinstance(greet('x'), str)\n"

# What the model writes at each reproduction attempt, in order: a test that passes at the root,
# one with a syntax error, one that imports a name that does not exist, and a real one.
ATTEMPTS = [
    "from greet import greet\n\n\ndef test_starts():\n    assert greet('Ada').startswith('Hello')\n",
    "from greet import greet\n\n\ndef test_broken(:\n    assert greet('Ada')\n",
    "from greet import missing_name\n\n\ndef test_missing():\n    assert missing_name('Ada')\n",
    "from greet import greet\n\n\ndef test_punctuates():\n    assert greet('Ada') == 'Hello, Ada!'\n",
]


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-repro")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


class Model:
    """A scripted model: in a reproduction conversation it writes the next of ``attempts`` as
    ``test_reproduce_issue.py``; in a search conversation it fixes ``greet.py``."""

    def __init__(self, attempts: list[str]) -> None:
        self.attempts = attempts
        self.started = 0

    def __call__(self, body: dict[str, Any], n: int) -> Reply:
        first = body["messages"][1]["content"]
        tools = [m for m in body["messages"] if m["role"] == "tool"]
        if tools:
            return tool_reply(call("finish", _id=f"c{n}", summary="done"), usage=(300, 5))
        if "reproduces the issue" in first:
            text = self.attempts[min(self.started, len(self.attempts) - 1)]
            self.started += 1
            return tool_reply(
                call("write_file", _id=f"c{n}", path="test_reproduce_issue.py", content=text),
                usage=(500, 60),
            )
        return tool_reply(
            call(
                "replace_in_file",
                _id=f"c{n}",
                path="greet.py",
                old="'Hello ' + name",
                new="'Hello, ' + name + '!'",
            ),
            usage=(700, 30),
        )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    (proj / "tests").mkdir(parents=True)
    (proj / "greet.py").write_text(GREET)
    (proj / "tests" / "test_greet.py").write_text(VISIBLE)
    (proj / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    return proj


def llm(base_url: str, tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "llm",
        "model": "fake-model",
        "base_url": base_url,
        "api_key_env": KEY_ENV,
        "cache": str(tmp_path / "llm-cache"),
        "retry_backoff": 0.01,
        "max_steps": 4,
        **extra,
    }


def config(
    tmp_path: Path, proj: Path, base_url: str, *, samples: int = 4, **agent: Any
) -> dict[str, Any]:
    return {
        "workspace": {"path": str(proj), "copy": True},
        "store": {"home": str(tmp_path / "home")},
        "task": ISSUE,
        "strategies": {
            "writer": llm(base_url, tmp_path, **agent),
            "fixer": llm(base_url, tmp_path, **agent),
        },
        "scoring": {
            "search_tests": {
                "command": f"{sys.executable} -m pytest -q tests",
                "timeout": 60,
                "env": {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
            }
        },
        "search": {
            "policy": "best_first",
            "budget": {"expansions": 3},
            "reproduce": {"strategy": "writer", "samples": samples},
        },
        "output": {"runs_dir": str(tmp_path / "runs")},
    }


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(Model(ATTEMPTS)) as s:
        yield s


def test_reproduction_steers_a_search_whose_tests_all_pass_and_replays_offline(
    server: FakeLLMServer, project: Path, tmp_path: Path
) -> None:
    out = run_from_config(
        config(tmp_path, project, server.base_url), base_dir=tmp_path, runs_dir=tmp_path / "r1"
    )
    rep = out.summary["reproduce"]
    assert rep["attempts"] == 4 and rep["no_signal"] is False
    reasons = [d["reason"] for d in rep["dropped"]]
    assert reasons[0].startswith("passes at the root")
    assert reasons[1].startswith("cannot be collected") and "SyntaxError" in reasons[1]
    assert reasons[2].startswith("cannot be collected") and "missing_name" in reasons[2]
    [kept] = rep["kept"]
    assert kept["from"] == "test_reproduce_issue.py" and kept["attempt"] == 3
    assert [i.split("::")[-1] for i in kept["failing"]] == ["test_punctuates"]
    assert rep["tokens"] == 4 * (560 + 305)

    # The kept file lives in the run directory, never in the workspace or a snapshot.
    folder = out.run_dir / "reproduce"
    assert (folder / kept["file"]).read_text() == ATTEMPTS[3]
    assert sorted(p.suffix for p in folder.iterdir()) == [".dropped"] * 3 + [".json", ".py"]
    assert not (out.workspace / "test_reproduce_issue.py").exists()

    # The root passes every repository test, yet the reproduction fails: there is a signal.
    g = out.graph
    root = G.root_of(g)
    assert g.nodes[root]["score"] == pytest.approx(0.5)
    assert g.nodes[root]["tests"]["reproduction"] == {"passed": 0, "counted": 1}
    assert out.best_score == 1.0 and g.nodes[out.best]["tests"]["reproduction"]["passed"] == 1
    assert "+++ b/greet.py" in out.patch and "test_reproduce" not in out.patch
    # The writer wrote tests only: the search used the fixer.
    assert {d["strategy"] for _, _, d in g.edges(data=True)} == {"fixer"}

    server.stop()
    again = run_from_config(
        config(tmp_path, project, server.base_url, replay=True),
        base_dir=tmp_path,
        runs_dir=tmp_path / "r2",
    )
    assert again.summary["reproduce"]["kept"] == rep["kept"]
    assert G.to_json(again.graph, stable=True) == G.to_json(g, stable=True)
    assert again.patch == out.patch

    # The run's report page says which reproduction steered it and why the others were dropped.
    from treesearch.report.run_page import run_page_data

    notes = run_page_data(out.run_dir, None)["notes"]
    [note] = [n for n in notes if n.startswith("reproduction tests")]
    assert "steered this search: test_reproduce_issue.py" in note
    assert "passes at the root" in note and "SyntaxError" in note


def test_no_reproduction_kept_says_no_signal(project: Path, tmp_path: Path) -> None:
    with FakeLLMServer(Model(ATTEMPTS[:1])) as s:
        notes: list[str] = []
        out = run_from_config(
            config(tmp_path, project, s.base_url, samples=2),
            base_dir=tmp_path,
            runs_dir=tmp_path / "r",
            on_note=notes.append,
        )
    rep = out.summary["reproduce"]
    assert rep["kept"] == [] and rep["no_signal"] is True
    assert [d["reason"].split(" (")[0] for d in rep["dropped"]] == ["passes at the root"] * 2
    assert any("kept no reproduction test" in n for n in notes)
    record = json.loads((out.run_dir / "reproduce" / "reproduce.json").read_text())
    assert record["kept"] == [] and len(record["dropped"]) == 2


def test_a_command_strategy_writes_reproduction_tests(project: Path, tmp_path: Path) -> None:
    """Any strategy can write them: a shell command that writes a failing test (and edits a
    source file, which is ignored)."""
    text = ATTEMPTS[3].replace("'", '"').replace("\n", "\\n")
    cfg = config(tmp_path, project, "http://127.0.0.1:9/v1")
    cfg["strategies"]["writer"] = {
        "kind": "command",
        "command": f"printf '{text}' > test_issue.py && echo '# note' >> greet.py",
    }
    cfg["strategies"]["fixer"] = {
        "kind": "scripted",
        "steps": [
            {"replace": "greet.py", "old": "'Hello ' + name", "new": "'Hello, ' + name + '!'"}
        ],
    }
    cfg["search"]["reproduce"]["samples"] = 1
    out = run_from_config(cfg, base_dir=tmp_path, runs_dir=tmp_path / "r")
    rep = out.summary["reproduce"]
    assert [k["from"] for k in rep["kept"]] == ["test_issue.py"]
    assert rep["ignored"] == ["greet.py"]
    assert out.best_score == 1.0


def test_reproduce_config_errors_name_the_field(project: Path, tmp_path: Path) -> None:
    cfg = config(tmp_path, project, "http://127.0.0.1:9/v1")
    cfg["search"]["reproduce"]["strategy"] = "nobody"
    with pytest.raises(ConfigError, match="search.reproduce.strategy.*'nobody'"):
        run_from_config(cfg, base_dir=tmp_path, runs_dir=tmp_path / "r")
    cfg = config(tmp_path, project, "http://127.0.0.1:9/v1")
    del cfg["strategies"]["fixer"]
    with pytest.raises(ConfigError, match="add a strategy that fixes"):
        run_from_config(cfg, base_dir=tmp_path, runs_dir=tmp_path / "r")
    cfg = config(tmp_path, project, "http://127.0.0.1:9/v1")
    cfg["scoring"]["search_tests"] = {"command": "make test", "runner": "generic"}
    with pytest.raises(ConfigError, match="must run pytest"):
        run_from_config(cfg, base_dir=tmp_path, runs_dir=tmp_path / "r")


# ------------------------------------------------------------------------------ eval rows

WRITE_REPRO = (
    "printf 'from greet import greet\\n\\n\\ndef test_issue():\\n"
    '    assert greet("Ada") == "Hello, Ada!"\\n\' > test_issue.py'
)
WRITE_PASSING = (
    "printf 'from greet import greet\\n\\n\\ndef test_issue():\\n"
    '    assert greet("Ada")\\n\' > test_issue.py'
)


def _eval(tmp: Path, writer: str, mode: str = "search") -> Any:
    from eval_fixtures import PYTEST, TEST_ENV, write_jsonl
    from test_eval_swebench_rows import _project, _table

    from treesearch.eval import run_eval

    inst = _project(tmp, broken=False)
    cfg = {
        "strategies": {
            "writer": {"kind": "command", "command": writer},
            "fix": {
                "kind": "scripted",
                "steps": [
                    {
                        "replace": "greet.py",
                        "old": "'Hello ' + name",
                        "new": "'Hello, ' + name + '!'",
                    }
                ],
            },
        },
        "scoring": {
            "search_tests": {
                "command": f"{PYTEST} tests/test_visible.py",
                "timeout": 60,
                "env": TEST_ENV,
            }
        },
        "search": {
            "policy": "bfs",
            "budget": {"expansions": 3},
            "reproduce": {"strategy": "writer", "samples": 1},
        },
        "sandbox": {"writable": [str(tmp)]},
    }
    (tmp / "search.yaml").write_text(json.dumps(cfg))
    return run_eval(
        tmp / "search.yaml",
        write_jsonl(tmp / "inst.jsonl", [inst]),
        repos=tmp / "repos",
        out=tmp / "ev",
        workers=1,
        setup=_table(tmp),
        mode=mode,
    )


def test_eval_row_says_which_reproduction_steered_the_search(tmp_path: Path) -> None:
    """A row whose repository tests all pass at the base commit: the reproduction written from
    the problem statement gives the search its signal; the row is resolved by the held-out
    tests, names the reproduction, and says that it passes with the gold patch."""
    out = _eval(tmp_path, WRITE_REPRO)
    row = out.rows[0]
    assert row["status"] == "resolved" and row["no_signal"] is False, row
    assert row["oracle"] is False
    rep = row["reproduction"]
    assert [k["from"] for k in rep["kept"]] == ["test_issue.py"] and rep["dropped"] == []
    assert rep["passes_with_gold"] == {rep["kept"][0]["file"]: True}
    assert out.summary["reproduction"] == {
        "rows": 1,
        "kept": 1,
        "checked_with_gold": 1,
        "passes_with_gold": 1,
    }
    prediction = json.loads((tmp_path / "ev" / "predictions.jsonl").read_text().splitlines()[0])
    assert "greet.py" in prediction["model_patch"] and "test_issue" not in prediction["model_patch"]
    from treesearch.report.batch_page import eval_page_data

    (table,) = [t for t in eval_page_data(tmp_path / "ev")["tables"] if t["id"] == "instances"]
    assert table["rows"][0][table["columns"].index("signal")] == "reproduced: test_issue.py"


def test_eval_row_without_a_kept_reproduction_says_no_signal(tmp_path: Path) -> None:
    out = _eval(tmp_path, WRITE_PASSING)
    row = out.rows[0]
    assert row["no_signal"] is True and "kept no reproduction test" in row["reason"], row
    assert row["reproduction"]["kept"] == []
    assert row["reproduction"]["dropped"][0]["reason"].startswith("passes at the root")


def test_eval_gold_reports_how_often_the_reproduction_passes_with_the_gold_patch(
    tmp_path: Path,
) -> None:
    """``eval --gold`` with a config that sets search.reproduce: no search, the reproduction
    step alone on the base commit, its kept test run with the gold patch."""
    out = _eval(tmp_path, WRITE_REPRO, mode="gold")
    row = out.rows[0]
    assert row["mode"] == "gold" and row["status"] == "resolved", row
    rep = row["reproduction"]
    assert [k["from"] for k in rep["kept"]] == ["test_issue.py"]
    assert rep["passes_with_gold"] == {rep["kept"][0]["file"]: True}
    assert out.summary["reproduction"]["passes_with_gold"] == 1
    kept = tmp_path / "ev" / "instances" / row["instance_id"] / "reproduce" / rep["kept"][0]["file"]
    assert "Hello, Ada!" in kept.read_text()
    # A reproduction the gold patch does not make pass is counted as such.
    wrong = WRITE_REPRO.replace("Hello, Ada!", "Goodbye, Ada!")
    out = _eval(tmp_path / "wrong", wrong, mode="gold")
    rep = out.rows[0]["reproduction"]
    assert rep["kept"] and list(rep["passes_with_gold"].values()) == [False]
    assert out.summary["reproduction"]["passes_with_gold"] == 0
