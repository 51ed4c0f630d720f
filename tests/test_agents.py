"""Agents: registry, the four built-ins on their success and failure paths, and run_agent's
failure policy (real processes, real files, real git through the store)."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import tree_digest

from treesearch.agents import (
    Agent,
    AgentContext,
    AgentResult,
    AgentStatus,
    build_agent,
    known_kinds,
    register_agent,
    run_agent,
)
from treesearch.agents.scripted import ScriptedAgent
from treesearch.errors import AgentError
from treesearch.session import TransactionalSession
from treesearch.store import PatchError, ShadowStore

CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"


@pytest.fixture
def store(workspace: Path, home: Path) -> Iterator[ShadowStore]:
    (workspace / "calc.py").write_text(CALC)
    (workspace / "pkg").mkdir()
    (workspace / "pkg" / "data.txt").write_text("one\ntwo\nthree\n")
    s = ShadowStore.open(workspace, home=home)
    yield s
    s.close()


@pytest.fixture
def session(store: ShadowStore, tmp_path: Path) -> TransactionalSession:
    return TransactionalSession.create(store, tmp_path / "s.jsonl", timeout=20)


def ctx_for(session: TransactionalSession, **kw: Any) -> AgentContext:
    return AgentContext(session=session, task=kw.pop("task", "fix add"), **kw)


def assert_consistent(session: TransactionalSession, workspace: Path) -> None:
    """Disk, session and store agree: the live workspace is the session's current tree."""
    assert session.store.capture().tree == session.tree
    assert session.tree == (session.steps[-1].tree_after if session.steps else session.root)


# --- registry -------------------------------------------------------------------------------------


def test_build_agent_with_unknown_kind_lists_the_known_kinds() -> None:
    with pytest.raises(AgentError) as err:
        build_agent({"kind": "telepathy"})
    for kind in ("command", "patch", "python", "scripted"):
        assert kind in str(err.value)
    assert {"command", "patch", "python", "scripted"} <= set(known_kinds())


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"kind": "scripted", "steps": [], "stepz": 1}, "unknown field 'stepz'; allowed fields"),
        ({"kind": "scripted", "steps": "run"}, "field 'steps' must be a list"),
        ({"kind": "scripted", "steps": [{"run": "x", "cwd": "/"}]}, r"steps\[0\]: unknown field"),
        ({"kind": "scripted", "steps": [{"run": 3}]}, "field 'run' must be a shell command"),
        ({"kind": "scripted", "steps": [{"write": "a"}]}, "needs 'content'"),
        ({"kind": "scripted", "steps": [{"run": "a", "write": "b"}]}, "exactly one action"),
        ({"kind": "patch"}, "give 'patches'"),
        ({"kind": "patch", "patches": ["x"], "strip": -1}, "'strip' must be an integer >= 0"),
        ({"kind": "command"}, "'command' is required"),
        ({"kind": "command", "command": ["a"], "timeout": 0}, "'timeout' must be seconds > 0"),
        ({"kind": "command", "command": ["a"], "limits": {"ram": 1}}, "'limits' allows"),
        ({"kind": "command", "command": ["a"], "env": {"A": 1}}, "'env' must map"),
        ({"kind": "python", "function": "nodots"}, "'function' must be a dotted path"),
        ({"kind": "python", "function": "m:f", "opts": {}}, "unknown field 'opts'"),
    ],
)
def test_build_agent_with_a_bad_field_names_the_field_and_what_is_allowed(
    config: dict[str, Any], expected: str
) -> None:
    with pytest.raises(AgentError, match=expected):
        build_agent(config)


def test_register_agent_by_factory_and_by_dotted_path() -> None:
    register_agent("test-scripted-factory", lambda cfg: ScriptedAgent(cfg["steps"]), replace=True)
    agent = build_agent({"kind": "test-scripted-factory", "steps": [{"finish": "ok"}]})
    assert isinstance(agent, ScriptedAgent) and isinstance(agent, Agent)
    register_agent("test-scripted-dotted", "treesearch.agents.scripted:ScriptedAgent", replace=True)
    assert isinstance(build_agent({"kind": "test-scripted-dotted", "steps": []}), ScriptedAgent)
    with pytest.raises(AgentError, match="already registered"):
        register_agent("test-scripted-dotted", lambda cfg: ScriptedAgent([]))
    register_agent("test-missing", "no_such_module_xyz:Agent", replace=True)
    with pytest.raises(AgentError, match="cannot import module 'no_such_module_xyz'"):
        build_agent({"kind": "test-missing"})


# --- scripted -------------------------------------------------------------------------------------


def test_scripted_agent_runs_its_steps_and_finishes(
    session: TransactionalSession, workspace: Path
) -> None:
    agent = build_agent(
        {
            "kind": "scripted",
            "steps": [
                {"replace": "calc.py", "old": "a - b", "new": "a + b", "say": "fix the sign"},
                {
                    "write": "test_calc.py",
                    "content": "from calc import add\nassert add(2, 3) == 5\n",
                },
                {"run": "python test_calc.py"},
                {"run": "exit 4", "check": False},
                {"read": "calc.py"},
                {"list": "pkg"},
            ],
        }
    )
    result = run_agent(agent, ctx_for(session))
    assert result.status is AgentStatus.FINISHED and result.reason is None
    assert result.steps == 6 and result.first_step == 0 and result.tree == session.tree
    assert [e["ok"] for e in result.transcript] == [True, True, True, False, True, True]
    assert result.transcript[1]["diff"] == "A\ttest_calc.py"
    assert "a + b" in (workspace / "calc.py").read_text()
    assert session.messages[0]["content"] == "fix the sign"
    assert result.cost.seconds > 0 and result.cost.tokens_in == 0
    json.dumps(result.to_json())
    assert_consistent(session, workspace)


def test_scripted_agent_is_deterministic_across_runs(store: ShadowStore, tmp_path: Path) -> None:
    config = {
        "kind": "scripted",
        "steps": [{"write": "x.txt", "content": "1"}, {"run": "echo 2 > y.txt"}],
    }
    trees = []
    for n in range(2):
        s = TransactionalSession.create(store, tmp_path / f"d{n}.jsonl")
        result = run_agent(build_agent(config), ctx_for(s))
        assert result.status is AgentStatus.FINISHED
        trees.append([st.tree_after for st in s.steps])
        s.rewind(0)
    assert trees[0] == trees[1] and len(set(trees[0])) == 2


def test_scripted_agent_with_a_failing_command_fails_and_rolls_that_step_back(
    session: TransactionalSession, workspace: Path
) -> None:
    agent = build_agent(
        {
            "kind": "scripted",
            "steps": [
                {"write": "kept.txt", "content": "kept"},
                {"run": "echo junk > junk.txt; echo boom >&2; exit 7"},
                {"write": "never.txt", "content": "no"},
            ],
        }
    )
    result = run_agent(agent, ctx_for(session))
    assert result.status is AgentStatus.FAILED
    assert result.reason is not None and "exit code 7" in result.reason
    assert "action 1 (run" in result.reason
    assert result.steps == 2 and session.steps[1].rolled_back
    assert (workspace / "kept.txt").exists()  # completed steps are kept
    assert not (workspace / "junk.txt").exists() and not (workspace / "never.txt").exists()
    assert_consistent(session, workspace)
    session.rewind(result.first_step)  # and the whole run can be dropped
    assert not (workspace / "kept.txt").exists()


def test_scripted_agent_stops_with_limit_reached_at_max_steps(
    session: TransactionalSession,
) -> None:
    agent = ScriptedAgent([{"write": f"f{i}.txt", "content": str(i)} for i in range(5)])
    result = run_agent(agent, ctx_for(session, max_steps=2))
    assert result.status is AgentStatus.LIMIT_REACHED and result.steps == 2
    assert result.reason is not None and "3 action(s) left" in result.reason


def test_scripted_agent_gives_up_when_told(session: TransactionalSession) -> None:
    agent = ScriptedAgent(
        [
            {"write": "a.txt", "content": "1"},
            {"give_up": "no idea"},
            {"write": "b.txt", "content": "2"},
        ]
    )
    result = run_agent(agent, ctx_for(session))
    assert result.status is AgentStatus.GAVE_UP and result.reason == "no idea"
    assert result.steps == 1


def test_agent_writing_outside_the_workspace_fails_and_leaves_it_consistent(
    session: TransactionalSession, workspace: Path, tmp_path: Path
) -> None:
    agent = build_agent(
        {
            "kind": "scripted",
            "steps": [
                {"write": "inside.txt", "content": "ok"},
                {"write": "../escaped.txt", "content": "pwned"},
            ],
        }
    )
    result = run_agent(agent, ctx_for(session))
    assert result.status is AgentStatus.FAILED
    assert result.reason is not None and "PathEscapeError" in result.reason
    assert "../escaped.txt" in result.reason
    assert not (tmp_path / "escaped.txt").exists()
    assert (workspace / "inside.txt").read_text() == "ok"
    assert_consistent(session, workspace)


def test_scripted_command_past_the_run_timeout_fails_as_timed_out(
    session: TransactionalSession,
) -> None:
    agent = ScriptedAgent([{"run": "sleep 20"}, {"write": "after.txt", "content": "x"}])
    t0 = time.monotonic()
    result = run_agent(agent, ctx_for(session, timeout=0.5))
    assert time.monotonic() - t0 < 10
    assert result.status is AgentStatus.FAILED
    assert result.reason is not None and "timed out" in result.reason


# --- patch ----------------------------------------------------------------------------------------


def git_patch_between(store: ShadowStore, workspace: Path, change: Any) -> tuple[str, str, str]:
    """Make ``change`` in the workspace, return (root tree, changed tree, git's patch) and put the
    root state back on disk."""
    root = store.capture().tree
    change(workspace)
    changed = store.capture().tree
    patch = store.diff(root, changed).patch
    store.restore(root)
    return root, changed, patch


def test_patch_agent_applies_a_git_patch_to_the_exact_same_tree(
    session: TransactionalSession, store: ShadowStore, workspace: Path
) -> None:
    (workspace / "crlf.txt").write_bytes(b"a\r\nb\r\nc\r\n")
    (workspace / "no_eol.txt").write_bytes(b"x\ny")
    (workspace / "gone.txt").write_text("bye\n")
    session = TransactionalSession.create(store)

    def change(ws: Path) -> None:
        (ws / "calc.py").write_text(
            CALC.replace("a - b", "a + b") + "\n\ndef neg(a):\n    return -a\n"
        )
        (ws / "crlf.txt").write_bytes(b"a\r\nB\r\nc\r\n")
        (ws / "no_eol.txt").write_bytes(b"x\nz")
        (ws / "gone.txt").unlink()
        (ws / "pkg" / "data.txt").write_text("one\ntwo\nthree\nfour\n")
        (ws / "new dir").mkdir()
        (ws / "new dir" / "tool.sh").write_text("#!/bin/sh\necho hi\n")
        (ws / "new dir" / "tool.sh").chmod(0o755)
        (ws / "empty.txt").write_bytes(b"")

    _root, changed, patch = git_patch_between(store, workspace, change)
    result = run_agent(build_agent({"kind": "patch", "patches": [patch]}), ctx_for(session))
    assert result.status is AgentStatus.FINISHED, result.reason
    assert session.tree == changed  # byte-exact, exec bit included
    assert (workspace / "new dir" / "tool.sh").stat().st_mode & 0o111
    assert not (workspace / "gone.txt").exists()
    assert "A empty.txt" in result.transcript[0]["observation"]


def test_patch_agent_reads_patch_files_relative_to_base_dir(
    session: TransactionalSession, store: ShadowStore, workspace: Path, tmp_path: Path
) -> None:
    _root, changed, patch = git_patch_between(
        store, workspace, lambda ws: (ws / "calc.py").write_text(CALC.replace("a - b", "a + b"))
    )
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "fix.diff").write_text(patch)
    agent = build_agent(
        {"kind": "patch", "patches": ["fix.diff"], "base_dir": str(tmp_path / "patches")}
    )
    result = run_agent(agent, ctx_for(session))
    assert result.status is AgentStatus.FINISHED and session.tree == changed
    missing = build_agent({"kind": "patch", "patch": "nope.diff", "base_dir": str(tmp_path)})
    failed = run_agent(missing, ctx_for(session))
    assert failed.status is AgentStatus.FAILED and "cannot read patch file" in (failed.reason or "")


def test_patch_agent_with_a_hunk_that_does_not_apply_fails_and_changes_nothing(
    session: TransactionalSession, workspace: Path
) -> None:
    before = tree_digest(workspace)
    patch = textwrap.dedent(
        """\
        --- a/pkg/data.txt
        +++ b/pkg/data.txt
        @@ -1,3 +1,3 @@
         one
        -two
        +TWO
         three
        --- a/calc.py
        +++ b/calc.py
        @@ -1,2 +1,2 @@
         def add(a, b):
        -    return a / b
        +    return a + b
        """
    )
    result = run_agent(build_agent({"kind": "patch", "patches": [patch]}), ctx_for(session))
    assert result.status is AgentStatus.FAILED
    reason = result.reason or ""
    assert "patch failed: calc.py:1" in reason  # git's own words, with the text it looked for
    assert "    return a / b" in reason
    assert "no file was changed" in reason
    assert tree_digest(workspace) == before  # the first file, which would apply, is untouched
    assert_consistent(session, workspace)


def test_patch_agent_applies_a_hunk_moved_by_an_offset(
    session: TransactionalSession, workspace: Path
) -> None:
    (workspace / "calc.py").write_text("# header\n# more\n" + CALC)
    session.capture_external()
    patch = (
        "--- a/calc.py\n+++ b/calc.py\n@@ -4,3 +4,3 @@\n \n def mul(a, b):\n-    return a * b\n"
        "+    return b * a\n"
    )
    result = run_agent(build_agent({"kind": "patch", "patch": patch}), ctx_for(session))
    assert result.status is AgentStatus.FINISHED, result.reason
    assert (workspace / "calc.py").read_text().endswith("return b * a\n")
    assert "offsets [2]" in result.transcript[0]["observation"]


def test_patch_paths_outside_the_workspace_or_into_git_or_through_a_symlink_are_refused(
    store: ShadowStore, workspace: Path, tmp_path: Path
) -> None:
    (tmp_path / "victim.txt").write_text("a\n")
    (tmp_path / "outside").mkdir()
    (workspace / "link").symlink_to(tmp_path / "outside", target_is_directory=True)
    before = tree_digest(workspace)
    refused = {
        "--- a/../victim.txt\n+++ b/../victim.txt\n@@ -1 +1 @@\n-a\n+b\n": "invalid path",
        "--- /dev/null\n+++ b/.git/hooks/x\n@@ -0,0 +1 @@\n+evil\n": "invalid path",
        "--- /dev/null\n+++ b/link/x\n@@ -0,0 +1 @@\n+evil\n": "beyond a symbolic link",
    }
    for patch, said in refused.items():
        with pytest.raises(PatchError, match=said):
            store.apply_patch(patch)
    assert (tmp_path / "victim.txt").read_text() == "a\n"
    assert list((tmp_path / "outside").iterdir()) == []
    assert not (workspace / ".git").exists() and tree_digest(workspace) == before


def test_a_malformed_patch_is_refused_with_git_s_reason_and_writes_nothing(
    store: ShadowStore, workspace: Path
) -> None:
    before = tree_digest(workspace)
    good = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n-def add(a, b):\n+def add(b, a):\n     return a - b\n"
    cut = "--- a/pkg/data.txt\n+++ b/pkg/data.txt\n@@ -1,3 +1,3 @@\n one\n-two\n"
    with pytest.raises(PatchError, match="corrupt patch at line 12"):
        store.apply_patch(good + cut)
    with pytest.raises(PatchError, match="No valid patches"):
        store.apply_patch("just some text\n")
    assert tree_digest(workspace) == before
    applied = store.apply_patch(good)
    assert applied.modified == ("calc.py",) and applied.hunks == 1


# --- command --------------------------------------------------------------------------------------


def test_command_agent_succeeds_with_the_task_as_argument_and_on_stdin(
    session: TransactionalSession, workspace: Path
) -> None:
    script = (
        "import sys, pathlib; pathlib.Path('from_arg.txt').write_text(sys.argv[1]); "
        "pathlib.Path('from_stdin.txt').write_text(sys.stdin.read()); print('agent done')"
    )
    agent = build_agent(
        {"kind": "command", "command": [sys.executable, "-c", script, "{task}"], "stdin": True}
    )
    result = run_agent(agent, ctx_for(session, task="fix {the} bug"))
    assert result.status is AgentStatus.FINISHED, result.reason
    assert (workspace / "from_arg.txt").read_text() == "fix {the} bug"
    assert (workspace / "from_stdin.txt").read_text() == "fix {the} bug"
    exit_event = result.transcript[-1]
    assert exit_event["exit_code"] == 0 and "agent done" in exit_event["stdout_tail"]
    assert result.steps == 1 and session.steps[0].diff.files == 2
    assert_consistent(session, workspace)


def test_command_agent_exiting_non_zero_fails_with_the_reason_and_rolls_back(
    session: TransactionalSession, workspace: Path
) -> None:
    before = tree_digest(workspace)
    agent = build_agent(
        {
            "kind": "command",
            "command": "echo partial > half.txt; echo 'model quota exceeded' >&2; exit 5",
            "env": {"AGENT_MODE": "test"},
        }
    )
    result = run_agent(agent, ctx_for(session))
    assert result.status is AgentStatus.FAILED
    assert result.reason == "the command exited with code 5: model quota exceeded"
    assert "model quota exceeded" in result.transcript[-1]["stderr_tail"]
    assert tree_digest(workspace) == before
    assert_consistent(session, workspace)


def test_command_agent_passes_extra_environment_variables(
    session: TransactionalSession, workspace: Path
) -> None:
    agent = build_agent(
        {
            "kind": "command",
            "command": 'printf %s "$AGENT_MODE" > mode.txt',
            "env": {"AGENT_MODE": "careful"},
        }
    )
    assert run_agent(agent, ctx_for(session)).status is AgentStatus.FINISHED
    assert (workspace / "mode.txt").read_text() == "careful"


def test_command_agent_hanging_past_its_timeout_is_killed_and_fails(
    session: TransactionalSession, workspace: Path
) -> None:
    before = tree_digest(workspace)
    agent = build_agent(
        {"kind": "command", "command": "echo started > started.txt; sleep 30", "timeout": 0.5}
    )
    t0 = time.monotonic()
    result = run_agent(agent, ctx_for(session))
    assert time.monotonic() - t0 < 10
    assert result.status is AgentStatus.FAILED
    assert result.reason is not None and result.reason.startswith("timed out after 0.5 s")
    assert tree_digest(workspace) == before
    assert_consistent(session, workspace)


def test_command_agent_that_cannot_start_fails(session: TransactionalSession) -> None:
    agent = build_agent({"kind": "command", "command": ["/nonexistent/agent-cli", "{task}"]})
    result = run_agent(agent, ctx_for(session))
    assert result.status is AgentStatus.FAILED
    assert result.reason is not None and "could not start" in result.reason


# --- python ---------------------------------------------------------------------------------------


AGENT_MODULE = """
import time
from treesearch.agents import AgentCost, AgentResult, AgentStatus


def fix(ctx, new="a + b"):
    ctx.session.step([{"name": "replace_in_file",
                       "arguments": {"path": "calc.py", "old": "a - b", "new": new}}])
    return AgentResult(AgentStatus.FINISHED, cost=AgentCost(tokens_in=10, tokens_out=3),
                       transcript=[{"event": "note", "rng": ctx.rng.random()}])


def quiet(ctx):
    ctx.session.step([{"name": "write_file", "arguments": {"path": "q.txt", "content": "q"}}])
    (ctx.workspace / "direct.txt").write_text("written without a step")


def boom(ctx):
    ctx.session.step([{"name": "write_file", "arguments": {"path": "one.txt", "content": "1"}}])
    (ctx.workspace / "half.txt").write_text("half-done")
    raise RuntimeError("model returned garbage")


def keep_writing(ctx):
    ctx.session.step([{"name": "write_file", "arguments": {"path": "pre.txt", "content": "p"}}])
    n = 0
    while True:
        n += 1
        (ctx.workspace / "tick.txt").write_text(str(n))
        time.sleep(0.01)


def keep_running(ctx):
    ctx.session.step([{"name": "run", "arguments": {
        "command": "while true; do echo x >> loop.txt; sleep 0.01; done", "timeout": 60}}])


def vanish(ctx):
    import os
    os._exit(7)


def hang(ctx):
    ctx.session.step([{"name": "write_file", "arguments": {"path": "pre.txt", "content": "p"}}])
    (ctx.workspace / "uncaptured.txt").write_text("u")
    time.sleep(1.2)
    ctx.session.step([{"name": "write_file", "arguments": {"path": "late.txt", "content": "l"}}])
"""


@pytest.fixture
def agent_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"ts_agents_{tmp_path.name.replace('-', '_')}"
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / f"{name}.py").write_text(AGENT_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    return name


def test_python_agent_function_returning_a_result(
    session: TransactionalSession, workspace: Path, agent_module: str
) -> None:
    agent = build_agent(
        {"kind": "python", "function": f"{agent_module}:fix", "options": {"new": "b + a"}}
    )
    result = run_agent(agent, ctx_for(session))
    assert result.status is AgentStatus.FINISHED and result.steps == 1
    assert (result.cost.tokens_in, result.cost.tokens_out) == (10, 3)
    assert "b + a" in (workspace / "calc.py").read_text()
    assert result.transcript[0]["event"] == "call" and result.transcript[1]["event"] == "note"


def test_python_agent_returning_none_finishes_and_direct_writes_are_captured(
    session: TransactionalSession, workspace: Path, agent_module: str
) -> None:
    result = run_agent(
        build_agent({"kind": "python", "function": f"{agent_module}:quiet"}), ctx_for(session)
    )
    assert result.status is AgentStatus.FINISHED and result.steps == 2
    assert session.steps[-1].note is not None and session.steps[-1].calls == ()
    assert "A\tdirect.txt" in session.steps[-1].diff.name_status
    assert_consistent(session, workspace)


def test_python_agent_function_raising_fails_and_discards_uncaptured_writes(
    session: TransactionalSession, workspace: Path, agent_module: str
) -> None:
    result = run_agent(
        build_agent({"kind": "python", "function": f"{agent_module}:boom"}), ctx_for(session)
    )
    assert result.status is AgentStatus.FAILED
    assert result.reason == "the function raised RuntimeError: model returned garbage"
    assert any("Traceback" in e.get("traceback", "") for e in result.transcript)
    assert (workspace / "one.txt").exists() and not (workspace / "half.txt").exists()
    assert result.steps == 1
    assert_consistent(session, workspace)


def test_python_agent_hanging_past_its_timeout_fails_and_is_cut_off(
    session: TransactionalSession, workspace: Path, agent_module: str
) -> None:
    t0 = time.monotonic()
    result = run_agent(
        build_agent({"kind": "python", "function": f"{agent_module}:hang"}),
        ctx_for(session, timeout=0.5),
    )
    assert time.monotonic() - t0 < 1.2
    assert result.status is AgentStatus.FAILED
    assert result.reason is not None and result.reason.startswith("timed out after 0.5 s")
    assert (workspace / "pre.txt").exists() and not (workspace / "uncaptured.txt").exists()
    steps = len(session.steps)
    time.sleep(1.5)  # the abandoned function wakes up and tries another step: refused
    assert len(session.steps) == steps and not (workspace / "late.txt").exists()
    assert_consistent(session, workspace)


def test_python_agent_looping_past_its_timeout_is_killed_and_writes_nothing_later(
    session: TransactionalSession, workspace: Path, agent_module: str
) -> None:
    """Regression (issue #12 item 10): the function ran in a thread that outlived its timeout
    and went on writing into the workspace during later expansions."""
    result = run_agent(
        build_agent({"kind": "python", "function": f"{agent_module}:keep_writing"}),
        ctx_for(session, timeout=0.5),
    )
    assert result.status is AgentStatus.FAILED
    assert result.reason is not None and "the function was killed" in result.reason
    # The step it completed is kept; its direct writes were discarded with the failed run.
    assert (workspace / "pre.txt").exists() and not (workspace / "tick.txt").exists()
    assert_consistent(session, workspace)
    time.sleep(0.5)  # a function still running would have written tick.txt again by now
    assert not (workspace / "tick.txt").exists()
    assert_consistent(session, workspace)
    # The session file holds the child's step: loading it gives the same session.
    assert session.path is not None
    again = TransactionalSession.load(session.path, session.store, restore=False)
    assert [s.tree_after for s in again.steps] == [s.tree_after for s in session.steps]


def test_python_agent_killed_at_its_timeout_also_ends_the_commands_it_started(
    session: TransactionalSession, workspace: Path, agent_module: str
) -> None:
    """A command the function started (in its own session, through the ``run`` tool) dies with
    the function: it cannot go on writing either."""
    result = run_agent(
        build_agent({"kind": "python", "function": f"{agent_module}:keep_running"}),
        ctx_for(session, timeout=0.5),
    )
    assert result.status is AgentStatus.FAILED
    assert not (workspace / "loop.txt").exists()
    time.sleep(0.5)  # a command still running would have written loop.txt again by now
    assert not (workspace / "loop.txt").exists()
    assert_consistent(session, workspace)


def test_python_agent_whose_process_ends_without_a_result_fails_saying_how(
    session: TransactionalSession, agent_module: str
) -> None:
    result = run_agent(
        build_agent({"kind": "python", "function": f"{agent_module}:vanish"}), ctx_for(session)
    )
    assert result.status is AgentStatus.FAILED
    assert "ended without a result (exit status 7" in (result.reason or "")


def test_python_agent_with_a_missing_function_fails(session: TransactionalSession) -> None:
    result = run_agent(
        build_agent({"kind": "python", "function": "json:no_such_fn"}), ctx_for(session)
    )
    assert result.status is AgentStatus.FAILED and "no attribute" in (result.reason or "")


# --- run_agent with any agent ---------------------------------------------------------------------


class RaisingAgent:
    def run(self, ctx: AgentContext) -> AgentResult:
        ctx.session.step([{"name": "write_file", "arguments": {"path": "a.txt", "content": "a"}}])
        (ctx.workspace / "stray.txt").write_text("stray")
        raise KeyError("oops")


class LazyAgent:
    def run(self, ctx: AgentContext) -> AgentResult:
        return "done"  # type: ignore[return-value]


def test_run_agent_turns_a_raising_agent_into_a_failed_result(
    session: TransactionalSession, workspace: Path
) -> None:
    result = run_agent(RaisingAgent(), ctx_for(session))
    assert result.status is AgentStatus.FAILED
    assert result.reason == "the agent raised KeyError: 'oops'"
    assert result.steps == 1 and (workspace / "a.txt").exists()
    assert not (workspace / "stray.txt").exists()
    assert result.transcript[-1]["event"] == "restored"
    assert_consistent(session, workspace)


def test_run_agent_refuses_a_result_that_is_not_an_agent_result(
    session: TransactionalSession,
) -> None:
    result = run_agent(LazyAgent(), ctx_for(session))
    assert result.status is AgentStatus.FAILED and "returned str" in (result.reason or "")


def test_apply_patch_names_the_files_of_a_rename_and_unusual_names_as_they_are(
    store: ShadowStore, workspace: Path
) -> None:
    (workspace / 'é q"t.txt').write_text("one\n")
    (workspace / "a b.txt").write_text("two\n")
    patch = (
        'diff --git "a/\\303\\251 q\\"t.txt" "b/\\303\\251 q\\"t.txt"\n'
        '--- "a/\\303\\251 q\\"t.txt"\n+++ "b/\\303\\251 q\\"t.txt"\n@@ -1 +1 @@\n-one\n+ONE\n'
        "diff --git a/a b.txt b/ü/c.txt\nsimilarity index 100%\n"
        "rename from a b.txt\nrename to ü/c.txt\n"
    )
    result = store.apply_patch(patch)
    assert result.modified == ('é q"t.txt',)
    assert result.deleted == ("a b.txt",) and result.added == ("ü/c.txt",)
    assert (workspace / 'é q"t.txt').read_text() == "ONE\n"
    assert (workspace / "ü" / "c.txt").read_text() == "two\n"
