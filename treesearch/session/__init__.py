"""A conversation and its workspace checkpoints, bound together.

A ``TransactionalSession`` holds an OpenAI-format conversation (``messages``) and the list of
``steps`` taken in one workspace. Every step runs tool calls (``read_file``, ``write_file``,
``replace_in_file``, ``list_dir``, ``run``, or tools the caller passes in), and records the tree
before and after it, the calls, their observations and a diff summary. Because every state is a
tree hash in the snapshot store, the session can:

- roll a failing step back on disk (``step(..., rollback_on_error=True)``);
- ``rewind(k)``: put messages *and* files back to state ``k`` (undoable with ``undo_rewind``);
- ``fork(k)``: start a new session from state ``k`` while the original branch stays intact;
- persist itself as an append-only JSONL file and be resumed by another process (``load``).

State ``k`` (for ``rewind``/``fork``): the files are the tree after step ``k`` (``0`` = the tree
when the session was created); the messages are those present just before step ``k + 1`` began,
so messages added between two steps (test feedback on state ``k``, say) belong to state ``k``.
For the last step that is every message.

One workspace has one live state: only one session (or fork) drives it at a time; ``checkout()``
puts a session's own state back on disk after another branch was used.

The session file holds one JSON record per line, each written and flushed on its own: a
``header``, then ``message``, ``step`` (a step with its messages, so a step is never half
recorded), ``rewind`` and ``undo_rewind`` records in the order they happened. A file cut short or
damaged loads up to its last good record; what was dropped is reported in ``load_warnings`` and
``dropped_lines``.

The package's rooms: ``_values`` (calls, observations, steps, rewinds, the tool interface),
``_tools`` (the built-in tools, decoding and running one call), ``_store`` (what the session
needs from the snapshot store), ``_history`` (messages, steps, current tree and undoable rewinds,
changed alike live and by replay), ``_log`` (the session file: header, records, atomic rewrite,
tolerant reading) and ``_session`` (``TransactionalSession``).
"""

from __future__ import annotations

from treesearch.session._log import FORMAT as FORMAT
from treesearch.session._log import VERSION as VERSION
from treesearch.session._log import commits_named
from treesearch.session._session import TransactionalSession
from treesearch.session._store import SessionStore
from treesearch.session._tools import BUILTIN_TOOLS
from treesearch.session._values import (
    DiffSummary,
    Observation,
    Rewind,
    SessionDeadlineError,
    Step,
    ToolCall,
    ToolEnv,
    ToolFn,
    ToolOutcome,
)

__all__ = [
    "DiffSummary",
    "Observation",
    "Rewind",
    "SessionDeadlineError",
    "SessionStore",
    "Step",
    "commits_named",
    "ToolCall",
    "ToolEnv",
    "ToolFn",
    "ToolOutcome",
    "TransactionalSession",
    "BUILTIN_TOOLS",
]
