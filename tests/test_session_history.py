"""The session's history and its file, without a store: the records written for a history
replay to the same history, and a file cut short loads up to its last whole record (real files)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from treesearch.errors import SessionError
from treesearch.session import DiffSummary, Step, ToolCall
from treesearch.session._history import History
from treesearch.session._log import SessionFile, child_records, read_log, snapshot_records
from treesearch.types import TreeHash

ROOT = TreeHash("0" * 40)


def tree(n: int) -> TreeHash:
    return TreeHash(f"{n:040x}")


def add_step(history: History, n: int) -> None:
    before = len(history.messages)
    messages: list[dict[str, Any]] = [
        {"role": "assistant", "content": f"step {n}", "tool_calls": []},
        {"role": "tool", "tool_call_id": f"c{n}", "content": "ok"},
    ]
    step = Step(
        index=len(history.steps) + 1,
        tree_before=history.tree,
        tree_after=tree(n),
        commit_after=None,
        calls=(ToolCall(f"c{n}", "write_file", {"path": "f", "content": str(n)}),),
        observations=(),
        ok=True,
        rolled_back=False,
        rolled_back_tree=None,
        diff=DiffSummary(files=1),
        messages_before=before,
        messages_after=before + len(messages),
        started_at=0.0,
        seconds=0.0,
    )
    history._add_step(step, messages)


def loaded(file: Path) -> History:
    read = read_log(file, lambda header: History(TreeHash(header["root"])), History._replay)
    assert not read.warnings
    return read.session


def same(a: History, b: History) -> bool:
    return (a.messages, a.steps, a.tree, a._rewinds) == (b.messages, b.steps, b.tree, b._rewinds)


def test_history_written_as_records_replays_to_the_same_history(tmp_path: Path) -> None:
    history = History(ROOT)
    history._add_message_unlogged({"role": "user", "content": "fix it"})
    add_step(history, 1)
    history._add_message_unlogged({"role": "user", "content": "tests fail"})
    add_step(history, 2)
    file = tmp_path / "s.jsonl"
    SessionFile(None).write(file, snapshot_records({"type": "header", "root": ROOT}, history))
    assert same(loaded(file), history)


def test_rewind_and_undo_appended_as_records_replay_like_the_live_history(tmp_path: Path) -> None:
    history = History(ROOT)
    add_step(history, 1)
    add_step(history, 2)
    log = SessionFile(None)
    file = tmp_path / "s.jsonl"
    log.write(file, snapshot_records({"type": "header", "root": ROOT}, history))
    frame = history._push_rewind(1, history._state_messages(1), history.state_tree(1), tree(9))
    log.append({"type": "rewind", "to": 1, "keep_messages": frame.kept_messages,
                "tree": history.tree, "safety": tree(9)})  # fmt: skip
    assert len(history.steps) == 1 and history.tree == tree(1)
    assert same(loaded(file), history)
    history._pop_rewind()
    log.append({"type": "undo_rewind", "tree": tree(9)})
    assert len(history.steps) == 2 and history.tree == tree(9)
    assert same(loaded(file), history)


def test_read_log_of_a_file_cut_short_keeps_the_whole_records_and_says_what_it_dropped(
    tmp_path: Path,
) -> None:
    history = History(ROOT)
    add_step(history, 1)
    file = tmp_path / "s.jsonl"
    SessionFile(None).write(file, snapshot_records({"type": "header", "root": ROOT}, history))
    whole = file.read_bytes()
    file.write_bytes(whole + b'{"type": "message", "ind')
    read = read_log(file, lambda header: History(TreeHash(header["root"])), History._replay)
    assert same(read.session, history)
    assert read.dropped == [3] and not read.ends_clean
    assert "line 3: record cut short" in read.warnings[0]
    assert read.valid == whole.decode().splitlines()


def test_a_damaged_file_is_rewritten_from_its_good_records_before_the_next_append(
    tmp_path: Path,
) -> None:
    file = tmp_path / "s.jsonl"
    file.write_text('{"type": "header"}\n{"type": "mess')
    log = SessionFile(file)
    log.damaged(['{"type": "header"}'])
    log.append({"type": "state", "tree": ROOT})
    assert [json.loads(line) for line in file.read_text().splitlines()] == [
        {"type": "header"},
        {"type": "state", "tree": ROOT},
    ]


def test_child_records_skip_a_last_line_cut_short_and_refuse_a_damaged_one(
    tmp_path: Path,
) -> None:
    assert list(child_records(tmp_path / "missing.jsonl")) == []
    file = tmp_path / "child.jsonl"
    file.write_text('{"type": "state", "tree": "a"}\n{"type": "sta')
    assert list(child_records(file)) == [{"type": "state", "tree": "a"}]
    file.write_text('{"type": "state", "tree": "a"}\nnot json\n')
    records = child_records(file)
    assert next(records) == {"type": "state", "tree": "a"}
    with pytest.raises(SessionError, match="damaged record from the child"):
        next(records)
