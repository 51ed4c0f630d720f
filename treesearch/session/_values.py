"""The plain values of a session: tool calls, observations, steps, rewinds, the tool interface."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from treesearch import sandbox
from treesearch.errors import SessionError
from treesearch.isolation import Isolation
from treesearch.types import CommitId, TreeHash


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a step."""

    id: str
    """Call id; tool messages refer to it (``tool_call_id``)."""
    name: str
    """Tool name (``read_file``, ``write_file``, ``replace_in_file``, ``list_dir``, ``run``...)."""
    arguments: dict[str, Any] = field(default_factory=dict)
    """Tool arguments (already decoded from the OpenAI JSON string)."""
    error: str | None = None
    """Why the call could not be decoded (e.g. arguments that are not JSON); it is then not run."""

    def to_openai(self) -> dict[str, Any]:
        """The call in OpenAI ``tool_calls`` form."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(self.arguments)},
        }


@dataclass(frozen=True)
class Observation:
    """What one tool call returned: the text sent back to the model, and whether it worked."""

    call_id: str
    """The ``ToolCall.id`` it answers."""
    name: str
    """Tool name."""
    ok: bool
    """False for a tool error, a command that failed or timed out, or a skipped call."""
    content: str
    """Text of the tool message (errors are described here, never raised)."""
    error: str | None = None
    """Short error kind: an exception class name, ``exit N``, ``timeout``, ``skipped``, ..."""
    seconds: float = 0.0
    """Wall-clock duration of the call."""
    data: dict[str, Any] = field(default_factory=dict)
    """Structured details (``exit_code``, ``timed_out``, ...)."""


@dataclass(frozen=True)
class DiffSummary:
    """How a step changed the workspace (tree before -> tree after)."""

    files: int = 0
    """Number of paths added, modified, deleted or type-changed."""
    insertions: int = 0
    """Lines added."""
    deletions: int = 0
    """Lines deleted."""
    stat: str = ""
    """A ``git diff --stat``-like text (empty when nothing changed)."""
    name_status: str = ""
    """``<status>\\t<path>`` lines (``A``/``M``/``D``/``T``)."""


@dataclass(frozen=True)
class Step:
    """One recorded step of a session."""

    index: int
    """1-based position in the session (state ``index`` is the tree after this step)."""
    tree_before: TreeHash
    """Workspace tree captured just before the step ran."""
    tree_after: TreeHash
    """Workspace tree when the step ended (equal to ``tree_before`` after a rollback)."""
    commit_after: CommitId | None
    """Store commit that recorded ``tree_after`` (after a rollback: the one of ``tree_before``)."""
    calls: tuple[ToolCall, ...]
    """The tool calls, in order (empty for a step recording external changes)."""
    observations: tuple[Observation, ...]
    """One observation per call, same order."""
    ok: bool
    """True when every call succeeded."""
    rolled_back: bool
    """True when the step failed and its changes were undone on disk."""
    rolled_back_tree: TreeHash | None
    """The state the failed step had produced (still in the store, restorable)."""
    diff: DiffSummary
    """Net change of the step (``tree_before`` -> ``tree_after``)."""
    messages_before: int
    """Number of messages when the step began."""
    messages_after: int
    """Number of messages when the step ended (its assistant and tool messages included)."""
    started_at: float
    """Start time, seconds since the epoch."""
    seconds: float
    """Wall-clock duration, captures included."""
    note: str | None = None
    """Free text, e.g. why a step without calls was recorded."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict (``Step.from_json`` reads it back)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Step:
        """Rebuild a step from ``to_json`` output; raises ``SessionError`` if fields are missing."""
        try:
            names = {f.name for f in fields(cls)}
            missing = names - set(data) - {"note"}
            if missing:
                raise SessionError(f"step record lacks field(s) {sorted(missing)}")
            kw = {k: data[k] for k in names if k in data}
            kw["calls"] = tuple(ToolCall(**c) for c in data["calls"])
            kw["observations"] = tuple(Observation(**o) for o in data["observations"])
            kw["diff"] = DiffSummary(**data["diff"])
            step = cls(**kw)
        except (TypeError, KeyError, AttributeError) as exc:
            raise SessionError(f"malformed step record: {exc}") from exc
        if not isinstance(step.index, int) or not isinstance(step.tree_after, str):
            raise SessionError("malformed step record: bad 'index' or 'tree_after'")
        return step


@dataclass(frozen=True)
class Rewind:
    """What ``rewind`` did."""

    to_step: int
    """The state now current (``0`` = the start)."""
    tree: TreeHash
    """The tree put on disk."""
    safety: TreeHash
    """The workspace tree just before the rewind (``undo_rewind`` goes back to it)."""
    removed_steps: int
    """Steps taken off the session (they stay in the store and in the session file)."""
    removed_messages: int
    """Messages taken off the conversation."""
    restore: Any = field(default=None, compare=False, repr=False)
    """The store's ``RestoreResult``."""


@dataclass(frozen=True)
class ToolEnv:
    """What a tool function gets besides its arguments."""

    workspace: Path
    """Workspace root; file tools must stay inside it."""
    timeout: float
    """Seconds a process started by the tool may run."""
    limits: sandbox.Limits | None = None
    """Resource limits for processes started by the tool."""
    output_limit: int = 64 * 1024
    """Bytes of stdout/stderr kept per process (cut in the middle)."""
    isolation: Isolation | None = None
    """How commands started by the tool are confined (``None``: not at all)."""


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool function returns (a plain ``str`` means ``ToolOutcome(text)``)."""

    content: str
    """Text for the tool message."""
    ok: bool = True
    """False when the tool ran but the outcome is a failure (a command exiting non-zero)."""
    error: str | None = None
    """Short error kind when ``ok`` is False."""
    data: dict[str, Any] = field(default_factory=dict)
    """Structured details kept in the step record."""


ToolFn = Callable[[ToolEnv, Mapping[str, Any]], "ToolOutcome | str"]
"""A tool: ``fn(env, arguments)``; raises for a tool error (reported as an observation)."""


class SessionDeadlineError(SessionError):
    """A step was refused because the session's ``deadline`` (``time_limit``) has passed."""


def check_json(obj: Any, what: str) -> None:
    """Raise ``SessionError`` unless ``obj`` can be written to the session file."""
    try:
        json.dumps(obj)
    except (TypeError, ValueError) as exc:
        raise SessionError(f"{what} is not JSON-serialisable: {exc}") from exc
