"""TransactionalSession: steps, rollback, rewind, fork and persistence (real files, real git)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import tree_digest

from treesearch.errors import SessionError
from treesearch.session import (
    SessionDeadlineError,
    ToolCall,
    TransactionalSession,
)
from treesearch.store import ShadowStore

SYSTEM = {"role": "system", "content": "You fix bugs."}
TASK = {"role": "user", "content": "Make add() add."}


@pytest.fixture
def store(workspace: Path, home: Path) -> Iterator[ShadowStore]:
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (workspace / "README").write_text("calc\n")
    s = ShadowStore.open(workspace, home=home)
    yield s
    s.close()


@pytest.fixture
def session(store: ShadowStore, tmp_path: Path) -> TransactionalSession:
    return TransactionalSession.create(store, tmp_path / "s.jsonl", messages=[SYSTEM, TASK])


def write(path: str, content: str) -> dict:
    return {"name": "write_file", "arguments": {"path": path, "content": content}}


def run(command: str, **extra: object) -> dict:
    return {"name": "run", "arguments": {"command": command, **extra}}


def test_step_runs_tool_calls_and_records_trees_diff_and_messages(
    session: TransactionalSession, workspace: Path
) -> None:
    step = session.step(
        [
            {
                "name": "replace_in_file",
                "arguments": {"path": "calc.py", "old": "a - b", "new": "a + b"},
            },
            write("notes/todo.txt", "done\n"),
            run("python -B -c 'import calc; print(calc.add(2, 3))'"),  # no __pycache__
            {"name": "read_file", "arguments": {"path": "notes/todo.txt"}},
            {"name": "list_dir", "arguments": {"path": "."}},
        ],
        content="Fixing the sign.",
    )
    assert step.index == 1 and step.ok and not step.rolled_back
    assert step.tree_before == session.root != step.tree_after == session.tree
    assert [o.ok for o in step.observations] == [True] * 5
    assert "5" in step.observations[2].content
    assert step.observations[3].content == "done\n"
    assert "notes/" in step.observations[4].content.splitlines()
    assert step.diff.files == 2 and step.diff.insertions == 2 and step.diff.deletions == 1
    assert "A\tnotes/todo.txt" in step.diff.name_status
    assert "M\tcalc.py" in step.diff.name_status
    # OpenAI format: one assistant message with the calls, one tool message per call.
    assistant = session.messages[2]
    assert assistant["role"] == "assistant" and assistant["content"] == "Fixing the sign."
    assert [c["function"]["name"] for c in assistant["tool_calls"]][:2] == [
        "replace_in_file",
        "write_file",
    ]
    assert json.loads(assistant["tool_calls"][1]["function"]["arguments"])["path"] == (
        "notes/todo.txt"
    )
    tool_msgs = session.messages[3:]
    assert [m["tool_call_id"] for m in tool_msgs] == [c["id"] for c in assistant["tool_calls"]]
    assert (step.messages_before, step.messages_after) == (2, 8)
    assert (workspace / "calc.py").read_text().endswith("a + b\n")


def test_step_tool_errors_become_observations_and_never_raise(
    session: TransactionalSession, workspace: Path
) -> None:
    step = session.step(
        [
            {"name": "read_file", "arguments": {"path": "missing.py"}},
            {"name": "replace_in_file", "arguments": {"path": "calc.py", "old": "zzz", "new": "y"}},
            {"name": "write_file", "arguments": {"path": "../outside.txt", "content": "x"}},
            {"name": "write_file", "arguments": {"path": "a.txt"}},
            {"name": "teleport", "arguments": {}},
            {"id": "c6", "type": "function", "function": {"name": "run", "arguments": "{not json"}},
            run("echo out; echo err >&2; exit 3"),
        ]
    )
    obs = step.observations
    assert not step.ok and [o.ok for o in obs] == [False] * 7
    assert obs[0].error == "ToolError"
    assert "0 matches" in obs[1].content
    assert obs[2].error == "PathEscapeError" and "outside.txt" in obs[2].content
    assert "'content' is required" in obs[3].content
    assert "unknown tool 'teleport'" in obs[4].content and "read_file" in obs[4].content
    assert obs[5].error == "bad arguments" and "not valid JSON" in obs[5].content
    assert obs[6].error == "exit 3" and obs[6].data["exit_code"] == 3
    assert "out" in obs[6].content and "err" in obs[6].content
    assert not (workspace.parent / "outside.txt").exists()
    # Without rollback_on_error nothing is undone and every call ran.
    assert len(session.messages) == 2 + 1 + 7


def test_step_rollback_on_error_restores_tree_before_and_says_so(
    session: TransactionalSession, workspace: Path
) -> None:
    before = tree_digest(workspace)
    step = session.step(
        [write("new.txt", "half\n"), run("echo more >> calc.py; exit 1"), write("late", "x")],
        rollback_on_error=True,
    )
    assert not step.ok and step.rolled_back
    assert step.tree_after == step.tree_before == session.tree
    assert step.rolled_back_tree not in (None, step.tree_before)
    assert tree_digest(workspace) == before
    assert "rolled back" in step.observations[1].content
    assert "A new.txt" in step.observations[1].content
    assert "M calc.py" in step.observations[1].content
    assert step.observations[2].error == "skipped" and not (workspace / "late").exists()
    assert session.messages[-2]["content"] == step.observations[1].content
    # The failed attempt stays restorable from the store.
    assert step.rolled_back_tree is not None
    session.store.restore(step.rolled_back_tree)
    assert (workspace / "new.txt").read_text() == "half\n"


def test_step_without_rollback_keeps_the_changes_of_a_failing_step(
    session: TransactionalSession, workspace: Path
) -> None:
    step = session.step([write("kept.txt", "k"), run("exit 2")])
    assert not step.ok and not step.rolled_back
    assert (workspace / "kept.txt").read_text() == "k"
    assert step.tree_after != step.tree_before


def test_step_run_past_its_timeout_is_killed_and_reported(session: TransactionalSession) -> None:
    t0 = time.monotonic()
    step = session.step([run("sleep 20", timeout=0.3)])
    assert time.monotonic() - t0 < 10
    obs = step.observations[0]
    assert not obs.ok and obs.error == "timeout" and obs.data["timed_out"]
    assert "timed out after 0.3 s" in obs.content


def test_step_accepts_tool_call_values_and_records_them(session: TransactionalSession) -> None:
    step = session.step([ToolCall("mine", "list_dir", {})])
    assert step.calls[0].id == "mine" and step.ok
    assert session.messages[-1] == {
        "role": "tool",
        "tool_call_id": "mine",
        "content": step.observations[0].content,
    }


def test_step_with_no_calls_is_refused(session: TransactionalSession) -> None:
    with pytest.raises(SessionError, match="at least one tool call"):
        session.step([])


def test_rewind_restores_messages_and_bytes_together_and_can_be_undone(
    session: TransactionalSession, workspace: Path, store: ShadowStore
) -> None:
    state0 = tree_digest(workspace)
    session.step([write("calc.py", "def add(a, b):\n    return a + b\n")])
    session.add_message({"role": "user", "content": "tests: 1 passed"})
    state1, messages1 = tree_digest(workspace), list(session.messages)
    session.step([write("extra.py", "X = 1\n"), run("chmod +x extra.py")])
    state2, messages2 = tree_digest(workspace), list(session.messages)
    assert state2 != state1

    rew = session.rewind(1)
    assert (rew.to_step, rew.removed_steps) == (1, 1)
    assert tree_digest(workspace) == state1
    # Messages added after step 1 (feedback on state 1) belong to state 1.
    assert session.messages == messages1 and session.messages[-1]["content"] == "tests: 1 passed"
    assert len(session.steps) == 1 and session.tree == session.steps[0].tree_after

    session.undo_rewind()
    assert tree_digest(workspace) == state2
    assert session.messages == messages2 and len(session.steps) == 2

    session.rewind(0)
    assert tree_digest(workspace) == state0
    assert session.messages == [SYSTEM, TASK] and session.steps == []
    # The store's own undo brings the files back too (the rewind's safety snapshot).
    store.undo()
    assert tree_digest(workspace) == state2


def test_undo_rewind_is_refused_once_the_session_moved_on(session: TransactionalSession) -> None:
    session.step([write("a.txt", "1")])
    session.rewind(0)
    session.step([write("b.txt", "2")])
    with pytest.raises(SessionError, match="changed since the rewind"):
        session.undo_rewind()
    session.rewind(0)
    session.undo_rewind()  # the second rewind has nothing after it: allowed
    assert [s.calls[0].arguments["path"] for s in session.steps] == ["b.txt"]


def test_rewind_to_a_step_that_does_not_exist_raises(session: TransactionalSession) -> None:
    session.step([write("a.txt", "1")])
    with pytest.raises(SessionError, match=r"0\.\.1"):
        session.rewind(2)
    with pytest.raises(SessionError):
        session.rewind(-1)
    with pytest.raises(SessionError, match="no rewind"):
        session.undo_rewind()


def test_fork_keeps_the_original_branch_intact_and_restorable(
    session: TransactionalSession, workspace: Path, store: ShadowStore
) -> None:
    session.step([write("calc.py", "def add(a, b):\n    return a + b\n")])
    state1 = tree_digest(workspace)
    session.step([write("branch_a.txt", "A")])
    state2_original = tree_digest(workspace)
    original_messages = list(session.messages)
    original_file = session.path
    assert original_file is not None
    original_bytes = original_file.read_bytes()

    fork = session.fork(1)
    assert tree_digest(workspace) == state1
    assert fork.session_id != session.session_id and fork.path not in (None, original_file)
    assert fork.parent == {"session_id": session.session_id, "path": str(original_file), "step": 1}
    assert len(fork.steps) == 1 and fork.messages == original_messages[: len(fork.messages)]
    fork.step([write("branch_b.txt", "B")])
    assert (workspace / "branch_b.txt").exists() and not (workspace / "branch_a.txt").exists()

    # The original: same steps, same messages, same file, and its state comes back on demand.
    assert len(session.steps) == 2 and session.messages == original_messages
    assert original_file.read_bytes() == original_bytes
    session.checkout()
    assert tree_digest(workspace) == state2_original
    reloaded = TransactionalSession.load(original_file, store)
    assert reloaded.messages == original_messages and reloaded.tree == session.tree
    # And the fork's branch is just as restorable from its own file.
    assert fork.path is not None
    fork_again = TransactionalSession.load(fork.path, store)
    assert (workspace / "branch_b.txt").read_text() == "B"
    assert fork_again.parent is not None and fork_again.parent["step"] == 1
    assert len(fork_again.steps) == 2


def test_save_then_a_new_process_resumes_the_same_state(
    session: TransactionalSession, workspace: Path, home: Path, tmp_path: Path
) -> None:
    session.step([write("calc.py", "def add(a, b):\n    return a + b\n")], content="fix")
    session.add_message({"role": "user", "content": "tests: passed"})
    session.step([write("ünï cödé.txt", "snowman ☃\n"), run("exit 1")], rollback_on_error=True)
    session.step([write("docs/x.md", "# x\n")])
    path = session.save()
    session.close()  # the other process must be let in: a live session holds the workspace
    expected = tree_digest(workspace)
    # Someone changes the workspace before the resume: load must put the session's tree back.
    (workspace / "calc.py").write_text("broken\n")
    (workspace / "stray.txt").write_text("stray\n")

    code = textwrap.dedent(
        """
        import json, sys
        from treesearch.store import ShadowStore
        from treesearch.session import TransactionalSession
        store = ShadowStore.open(sys.argv[1], home=sys.argv[2])
        s = TransactionalSession.load(sys.argv[3], store)
        print(json.dumps({"messages": s.messages, "steps": len(s.steps), "tree": s.tree,
                          "warnings": s.load_warnings, "dropped": list(s.dropped_lines),
                          "restored": s.restored_on_load is not None,
                          "ok": [st.ok for st in s.steps], "id": s.session_id}))
        store.close()
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(workspace), str(home), str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    state = json.loads(proc.stdout)
    assert state["messages"] == session.messages
    assert state["steps"] == 3 and state["ok"] == [True, False, True]
    assert state["tree"] == session.tree and state["id"] == session.session_id
    assert state["restored"] and state["dropped"] == []
    assert tree_digest(workspace) == expected


def test_load_without_changes_restores_nothing(
    session: TransactionalSession, store: ShadowStore
) -> None:
    session.step([write("a.txt", "1")])
    loaded = TransactionalSession.load(session.path or "", store)
    assert loaded.restored_on_load is None and loaded.load_warnings == []
    assert loaded.to_json()["steps"] == session.to_json()["steps"]


def test_load_truncated_session_file_keeps_complete_records_and_reports_dropped(
    session: TransactionalSession, store: ShadowStore, workspace: Path
) -> None:
    session.step([write("a.txt", "1")])
    state1_messages = list(session.messages)
    state1 = tree_digest(workspace)
    session.step([write("b.txt", "2")])
    path = session.path
    assert path is not None
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])  # the last record (step 2) is cut short

    loaded = TransactionalSession.load(path, store)
    assert len(loaded.steps) == 1 and loaded.messages == state1_messages
    assert loaded.dropped_lines == (5,)
    assert len(loaded.load_warnings) >= 1 and "line 5" in loaded.load_warnings[0]
    assert "cut short" in loaded.load_warnings[0]
    assert tree_digest(workspace) == state1  # the last complete state is put back on disk

    # Appending after a damaged tail first rewrites the good records: the file loads cleanly.
    loaded.step([write("c.txt", "3")])
    again = TransactionalSession.load(path, store)
    assert again.dropped_lines == () and len(again.steps) == 2
    assert all(json.loads(line) for line in path.read_text().splitlines())


def test_load_corrupt_line_in_the_middle_drops_it_and_everything_after(
    session: TransactionalSession, store: ShadowStore
) -> None:
    session.step([write("a.txt", "1")])
    session.add_message({"role": "user", "content": "feedback"})
    session.step([write("b.txt", "2")])
    path = session.path
    assert path is not None
    lines = path.read_bytes().split(b"\n")
    # header, system, task, step 1, feedback, step 2: damage line 5 (the feedback message)
    lines[4] = b'{"type": "message", "index": 99, "mess'
    path.write_bytes(b"\n".join(lines))

    loaded = TransactionalSession.load(path, store)
    assert loaded.dropped_lines == (5, 6)
    assert len(loaded.steps) == 1 and loaded.messages[-1]["role"] == "tool"
    assert "line 5" in loaded.load_warnings[0] and "5-6" in loaded.load_warnings[0]


def test_load_of_a_file_without_a_valid_header_raises(store: ShadowStore, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "message"}\n')
    with pytest.raises(SessionError, match="line 1"):
        TransactionalSession.load(bad, store)
    bad.write_bytes(b"")
    with pytest.raises(SessionError, match="empty"):
        TransactionalSession.load(bad, store)
    with pytest.raises(SessionError, match="cannot read"):
        TransactionalSession.load(tmp_path / "nope.jsonl", store)


def test_load_replays_rewinds_and_their_undo(
    session: TransactionalSession, store: ShadowStore, workspace: Path
) -> None:
    session.step([write("a.txt", "1")])
    session.step([write("b.txt", "2")])
    session.rewind(1)
    session.step([write("c.txt", "3")])
    session.rewind(1)
    session.undo_rewind()
    expected_messages = list(session.messages)
    loaded = TransactionalSession.load(session.path or "", store)
    assert loaded.messages == expected_messages
    assert [s.calls[0].arguments["path"] for s in loaded.steps] == ["a.txt", "c.txt"]
    assert loaded.tree == session.tree and loaded.restored_on_load is None
    assert sorted(p.name for p in workspace.iterdir()) == ["README", "a.txt", "c.txt", "calc.py"]


def test_create_refuses_an_existing_session_file(
    session: TransactionalSession, store: ShadowStore
) -> None:
    with pytest.raises(SessionError, match="already exists"):
        TransactionalSession.create(store, session.path)


def test_save_of_an_unsaved_session_writes_the_whole_state(
    store: ShadowStore, tmp_path: Path
) -> None:
    s = TransactionalSession.create(store, messages=[SYSTEM])
    s.step([write("a.txt", "1")])
    s.add_message({"role": "user", "content": "more"})
    with pytest.raises(SessionError, match="give a path"):
        s.save()
    path = s.save(tmp_path / "later" / "s.jsonl")
    s.step([write("b.txt", "2")])  # continues in that file
    loaded = TransactionalSession.load(path, store)
    assert loaded.messages == s.messages and len(loaded.steps) == 2


def test_capture_external_records_outside_changes_as_a_step(
    session: TransactionalSession, workspace: Path
) -> None:
    assert session.capture_external() is None
    (workspace / "generated.txt").write_text("by a tool\n")
    step = session.capture_external("formatter output")
    assert step is not None and step.calls == () and step.note == "formatter output"
    assert step.diff.name_status == "A\tgenerated.txt" and session.tree == step.tree_after


def test_time_limit_refuses_steps_after_the_deadline_and_cuts_commands(
    session: TransactionalSession,
) -> None:
    with session.time_limit(0.5):
        t0 = time.monotonic()
        step = session.step([run("sleep 20")])
        assert time.monotonic() - t0 < 10 and step.observations[0].error == "timeout"
        with pytest.raises(SessionDeadlineError):
            session.step([run("true")])
    assert session.deadline is None
    assert session.step([run("true")]).ok


def test_save_to_a_new_path_after_undo_rewind_keeps_the_exact_live_state(
    session: TransactionalSession, store: ShadowStore, workspace: Path, tmp_path: Path
) -> None:
    session.step([write("a.txt", "1")])
    (workspace / "drift.txt").write_text("made between steps\n")
    session.rewind(0)
    session.undo_rewind()  # back to the drifted disk state, not just the last step's tree
    assert session.tree != session.steps[-1].tree_after
    path = session.save(tmp_path / "copy.jsonl")
    loaded = TransactionalSession.load(path, store)
    assert loaded.tree == session.tree and loaded.restored_on_load is None
    assert loaded.messages == session.messages and len(loaded.steps) == 1
    assert (workspace / "drift.txt").exists()
