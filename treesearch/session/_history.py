"""The state of a session's current branch, and the changes a session file replays.

``History`` holds the conversation, the steps, the tree of the current state and the rewinds
that can still be undone. It does no I/O: the live session (which adds the store and the file)
and the replay of a session file change it through the same methods, so a loaded session is the
session that wrote the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from treesearch.errors import SessionError
from treesearch.session._values import Step, check_json
from treesearch.types import CommitId, TreeHash

__all__ = ["History", "RewindFrame"]


@dataclass
class RewindFrame:
    """What a rewind took off the session, so that ``undo_rewind`` can put it back."""

    to_step: int
    kept_messages: int
    safety: TreeHash
    steps: list[Step]
    messages: list[dict[str, Any]]
    safety_commit: CommitId | None = None
    """The safety snapshot itself: its tree alone does not tell its empty folders."""


class History:
    """Messages, steps and the current tree of one branch, with its undoable rewinds."""

    def __init__(self, root: TreeHash, root_commit: CommitId | None = None) -> None:
        self.root = root
        """Tree of state 0 (the workspace when the session was created)."""
        self.root_commit = root_commit
        """Store commit of state 0 (``None`` in files written before it was recorded)."""
        self.messages: list[dict[str, Any]] = []
        """The conversation, OpenAI chat format. Treat as read-only; use ``add_message``."""
        self.steps: list[Step] = []
        """The steps of the current branch. Treat as read-only."""
        self.tree: TreeHash = root
        """The tree this session last put on or found on disk (its current state)."""
        self.commit: CommitId | None = root_commit
        """The store commit of that state, when known. A tree hash does not say which folders
        are empty (they ride as metadata on the commit), so restores name the commit."""
        self._rewinds: list[RewindFrame] = []

    # --- states -----------------------------------------------------------------------------------

    def state_tree(self, k: int) -> TreeHash:
        """The tree of state ``k`` (0 = the start, ``k`` = after step ``k``)."""
        self._check_index(k, "state_tree")
        return self.root if k == 0 else self.steps[k - 1].tree_after

    def state_commit(self, k: int) -> CommitId | None:
        """The store commit of state ``k`` (``None``: not recorded; the tree then stands in)."""
        self._check_index(k, "state_commit")
        return self.root_commit if k == 0 else self.steps[k - 1].commit_after

    def _state_messages(self, k: int) -> int:
        return self.steps[k].messages_before if k < len(self.steps) else len(self.messages)

    def _check_index(self, k: int, op: str) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= len(self.steps):
            raise SessionError(f"{op}: step must be an integer in 0..{len(self.steps)}, got {k!r}")

    # --- changes (live and replayed) --------------------------------------------------------------

    def _add_message_unlogged(self, message: dict[str, Any]) -> None:
        if not isinstance(message.get("role"), str):
            raise SessionError(f"a message needs a string 'role', got {message!r:.200}")
        check_json(message, "message")
        self.messages.append(message)

    def _add_step(self, step: Step, new_messages: list[dict[str, Any]]) -> None:
        self.messages.extend(new_messages)
        self.steps.append(step)
        self.tree, self.commit = step.tree_after, step.commit_after

    def _push_rewind(
        self,
        to: int,
        keep: int,
        tree: TreeHash,
        safety: TreeHash,
        safety_commit: CommitId | None = None,
    ) -> RewindFrame:
        frame = RewindFrame(to, keep, safety, self.steps[to:], self.messages[keep:], safety_commit)
        self._rewinds.append(frame)
        del self.steps[to:], self.messages[keep:]
        self.tree, self.commit = tree, self.state_commit(to)
        return frame

    def _pop_rewind(self) -> RewindFrame:
        frame = self._rewinds.pop()
        self.steps.extend(frame.steps)
        self.messages.extend(frame.messages)
        self.tree, self.commit = frame.safety, frame.safety_commit
        return frame

    # --- replay of a session file's records -------------------------------------------------------

    def _replay(self, record: Mapping[str, Any]) -> None:
        """Apply one record of a session file; ``SessionError`` when it does not fit."""
        kind = record["type"]
        if kind == "message":
            if record.get("index") != len(self.messages):
                raise SessionError(f"message index {record.get('index')} out of sequence")
            message = record["message"]
            if not isinstance(message, dict) or "role" not in message:
                raise SessionError("message record without a role")
            self.messages.append(message)
        elif kind == "step":
            self._replay_step(record)
        elif kind == "rewind":
            to, keep = int(record["to"]), int(record["keep_messages"])
            if not 0 <= to <= len(self.steps) or not 0 <= keep <= len(self.messages):
                raise SessionError(f"rewind to step {to} out of range")
            self._push_rewind(
                to,
                keep,
                TreeHash(record["tree"]),
                TreeHash(record["safety"]),
                _commit(record.get("safety_commit")),
            )
        elif kind == "undo_rewind":
            if not self._rewinds:
                raise SessionError("undo_rewind without a rewind")
            self._pop_rewind()
        elif kind == "state":
            self.tree = TreeHash(str(record["tree"]))
            self.commit = _commit(record.get("commit"))
        elif kind == "header":
            raise SessionError("a second header")
        else:
            raise SessionError(f"unknown record type {kind!r}")

    def _replay_step(self, record: Mapping[str, Any]) -> None:
        step = Step.from_json(record["step"])
        msgs = record["messages"]
        if step.index != len(self.steps) + 1 or step.messages_before != len(self.messages):
            raise SessionError(f"step {step.index} out of sequence")
        if not isinstance(msgs, list) or len(msgs) != step.messages_after - step.messages_before:
            raise SessionError(f"step {step.index}: message count does not match")
        self._add_step(step, msgs)


def _commit(value: Any) -> CommitId | None:
    """A commit id read from a session file (absent in files written before it was kept)."""
    return CommitId(value) if isinstance(value, str) and value else None
