"""The session file: one JSON record per line, appended as things happen, read back by ``load``.

Records: a ``header``, then ``message``, ``step`` (a step with its messages, so a step is never
half recorded), ``rewind``, ``undo_rewind`` and ``state`` records in the order they happened
(``History._replay`` applies them). Each record is written and flushed on its own; a new file is
written atomically (temporary file, fsync, rename). Reading tolerates a file cut short or
damaged: it stops at the first record that cannot be read or does not fit, and says which lines
it dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from treesearch import sandbox
from treesearch._atomic import write_text
from treesearch.errors import SandboxError, SessionError
from treesearch.session._history import History
from treesearch.types import TreeHash

__all__ = [
    "FORMAT",
    "VERSION",
    "LogRead",
    "SessionFile",
    "child_records",
    "commits_named",
    "header_fields",
    "limits_to_json",
    "read_log",
    "snapshot_records",
]

FORMAT = "treesearch-session"
VERSION = 1

T = TypeVar("T")


# --- header ---------------------------------------------------------------------------------------


def limits_to_json(limits: sandbox.Limits | None) -> dict[str, Any] | None:
    """``limits`` as header data."""
    return None if limits is None else asdict(limits)


def _limits_from_json(data: Any) -> sandbox.Limits | None:
    if data is None:
        return None
    try:
        return sandbox.Limits(**data)
    except (TypeError, SandboxError) as exc:
        raise SessionError(f"bad 'limits' in the session header: {exc}") from exc


def header_fields(record: dict[str, Any]) -> dict[str, Any]:
    """The session's constructor arguments from its header record (``SessionError`` if it is
    not a treesearch session header of a supported version)."""
    if record.get("type") != "header" or record.get("format") != FORMAT:
        raise SessionError("the first record is not a treesearch session header")
    if record.get("version") != VERSION:
        raise SessionError(f"session format version {record.get('version')} is not supported")
    return {
        "session_id": record["session_id"],
        "root": TreeHash(record["root"]),
        "root_commit": record.get("root_commit"),
        "created_at": float(record["created_at"]),
        "timeout": float(record.get("timeout", 60.0)),
        "limits": _limits_from_json(record.get("limits")),
        "output_limit": int(record.get("output_limit", 64 * 1024)),
        "parent": record.get("parent"),
    }


# --- writing --------------------------------------------------------------------------------------


def commits_named(file: Path) -> list[str]:
    """Every store commit a session file names (the root, each step's before and after, live
    states; rewound steps too), in file order; lines that cannot be read are skipped (a file
    cut short still names the commits of its good records)."""
    out: dict[str, None] = {}

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str) and key.endswith("commit") and len(value) == 40:
            out[value] = None

    try:
        raw = file.read_bytes()
    except OSError:
        return []
    for chunk in raw.split(b"\n"):
        try:
            walk(json.loads(chunk))
        except ValueError:
            continue
    return list(out)


def snapshot_records(header: dict[str, Any], history: History) -> list[dict[str, Any]]:
    """The records of a new file holding ``history`` as it is now (no rewound steps)."""
    messages, steps = history.messages, history.steps
    records = [header]
    first = steps[0].messages_before if steps else len(messages)
    records += [
        {"type": "message", "index": i, "message": m} for i, m in enumerate(messages[:first])
    ]
    for n, step in enumerate(steps):
        records.append(
            {
                "type": "step",
                "step": step.to_json(),
                "messages": messages[step.messages_before : step.messages_after],
            }
        )
        upto = steps[n + 1].messages_before if n + 1 < len(steps) else len(messages)
        records += [
            {"type": "message", "index": i, "message": messages[i]}
            for i in range(step.messages_after, upto)
        ]
    if (
        steps and (history.tree, history.commit) != (steps[-1].tree_after, steps[-1].commit_after)
    ) or (not steps and (history.tree, history.commit) != (history.root, history.root_commit)):
        # After undo_rewind the live state can differ from the last step's: keep it exact.
        records.append({"type": "state", "tree": history.tree, "commit": history.commit})
    return records


class SessionFile:
    """Where a session's records go (``path``; ``None``: nowhere) and how they get there."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._rewrite_needed = False
        self._valid_lines: list[str] = []

    def damaged(self, valid_lines: list[str]) -> None:
        """The file on disk holds more than ``valid_lines`` (a damaged or unterminated tail):
        the next write first rewrites it from them, so no record is glued to a damaged line."""
        self._rewrite_needed = True
        self._valid_lines = valid_lines

    def redirect(self, path: Path) -> None:
        """Write later records to ``path`` (as they come, no header)."""
        self.path = path
        self._rewrite_needed = False
        self._valid_lines = []

    def repair(self) -> None:
        """Rewrite a damaged file from its good records (nothing to do for a sound one)."""
        if self._rewrite_needed:
            assert self.path is not None
            self.rewrite(self.path, self._valid_lines)

    def write(self, file: Path, records: Sequence[dict[str, Any]]) -> None:
        """Write a new file holding ``records`` atomically; later records go to it."""
        self.rewrite(file, [json.dumps(r) for r in records])

    def rewrite(self, file: Path, lines: Sequence[str]) -> None:
        """Replace ``file`` atomically by ``lines``; later records go to it."""
        file.parent.mkdir(parents=True, exist_ok=True)
        write_text(file, "".join(line + "\n" for line in lines), fsync=True)
        self.redirect(file)

    def append(self, record: dict[str, Any]) -> None:
        """Append one record and flush it (nothing when there is no file)."""
        if self.path is None:
            return
        self.repair()
        line = json.dumps(record)
        try:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")
                fh.flush()
        except OSError as exc:
            raise SessionError(f"cannot append to session file {self.path}: {exc}") from exc


# --- reading --------------------------------------------------------------------------------------


@dataclass
class LogRead(Generic[T]):
    """What ``read_log`` made of a file."""

    session: T
    """What ``start`` built from the header, with every good record applied."""
    valid: list[str] = field(default_factory=list)
    """The good lines (header included), as text."""
    warnings: list[str] = field(default_factory=list)
    """What was dropped, and why."""
    dropped: list[int] = field(default_factory=list)
    """1-based numbers of the lines dropped."""
    ends_clean: bool = True
    """False when the last line has no newline (a write cut short)."""


_UNREADABLE = (UnicodeDecodeError, ValueError, SessionError, TypeError, KeyError)


def read_log(
    file: Path,
    start: Callable[[dict[str, Any]], T],
    apply: Callable[[T, dict[str, Any]], None],
) -> LogRead[T]:
    """Read a session file: ``start(header)`` builds the session, ``apply(session, record)``
    replays each later record. Records from the first one that cannot be read or applied on
    are dropped (and reported); a missing or unreadable header raises ``SessionError``."""
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise SessionError(f"cannot read session file {file}: {exc}") from exc
    chunks = raw.split(b"\n")
    ends_clean = chunks[-1] == b""
    if ends_clean:
        chunks.pop()
    session: T | None = None
    valid: list[str] = []
    warnings: list[str] = []
    dropped: list[int] = []
    for lineno, chunk in enumerate(chunks, 1):
        try:
            text = chunk.decode("utf-8")
            record = json.loads(text)
            if not isinstance(record, dict) or "type" not in record:
                raise SessionError("not a record object")
            if session is None:
                session = start(record)
            else:
                apply(session, record)
        except _UNREADABLE as exc:
            if session is None:
                raise SessionError(
                    f"session file {file}: line {lineno}: unreadable header ({exc})"
                ) from exc
            dropped = list(range(lineno, len(chunks) + 1))
            cut = "cut short" if lineno == len(chunks) and not ends_clean else "unreadable"
            warnings.append(
                f"line {lineno}: record {cut} ({exc}); dropped line(s) "
                f"{lineno}-{len(chunks)} ({len(dropped)} record(s)); the session was loaded "
                f"up to line {lineno - 1}"
            )
            break
        valid.append(text)
    if session is None:
        raise SessionError(f"session file {file} is empty")
    return LogRead(session, valid, warnings, dropped, ends_clean)


def child_records(path: Path) -> Iterator[dict[str, Any]]:
    """The records a forked child process wrote to ``path`` (``SessionFile.redirect``), read at
    once and decoded one by one as they are taken: none when the file is missing, and a last
    line cut short (the child was killed while writing it) is ignored. A damaged record raises
    ``SessionError`` when it is reached."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return iter(())
    except OSError as exc:
        raise SessionError(f"cannot read the child's session records {path}: {exc}") from exc
    return _decode_child_lines(text)


def _decode_child_lines(text: str) -> Iterator[dict[str, Any]]:
    for line in text.splitlines(keepends=True):
        if not line.endswith("\n"):
            break
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise SessionError(f"a damaged record from the child process: {exc}") from exc
        yield record
