"""The ``patch`` agent and a pure-Python unified-diff applier.

(Over 700 lines: the parser, planner and applier share private types; splitting them is left
for the next step of #13.)

The applier reads git-style and plain ``diff -u`` patches (new files, deleted files, ``/dev/null``,
renames, exec-bit changes, ``\\ No newline at end of file``, CRLF content) and applies them with
exact context matching: a hunk may move up or down (the nearest offset wins, hunks stay in order)
but never matches fuzzily. Every hunk of every file is checked before anything is written, so a
patch that does not apply leaves the workspace exactly as it was; the error lists the rejected
hunks with their text.

No git is run here (only ``treesearch/store`` runs git): the applier reads and writes files itself,
confined to the workspace (no ``..``, no absolute paths, no ``.git``, no writing through symlinks).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from treesearch import _confined
from treesearch.agents import (
    AgentContext,
    AgentCost,
    AgentResult,
    AgentStatus,
)
from treesearch.agents.configs import PatchConfig, agent_kwargs
from treesearch.errors import AgentError, PathEscapeError, ToolError
from treesearch.session import ToolCall, ToolEnv, ToolOutcome

__all__ = [
    "FilePatch",
    "Hunk",
    "PatchAgent",
    "PatchError",
    "PatchResult",
    "RejectedHunk",
    "apply_patch",
    "parse_patch",
]

_ENCODING = "utf-8"
_ERRORS = "surrogateescape"  # non-UTF-8 bytes survive a read/modify/write round trip
_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


# --- values ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hunk:
    """One ``@@`` hunk of a file patch."""

    header: str
    """The ``@@ -a,b +c,d @@`` line (without its line ending)."""
    old_start: int
    """First line of the old range (1-based; for an empty range, the line after which to insert)."""
    old_count: int
    """Number of lines in the old range."""
    new_start: int
    """First line of the new range (1-based)."""
    new_count: int
    """Number of lines in the new range."""
    lines: tuple[str, ...]
    """Body lines: first character `` ``, ``-`` or ``+``, then the content with its line ending
    (a line followed by ``\\ No newline at end of file`` has none)."""

    @property
    def old_lines(self) -> list[str]:
        """Context and removed lines: what the file must contain."""
        return [line[1:] for line in self.lines if line[0] in " -"]

    @property
    def new_lines(self) -> list[str]:
        """Context and added lines: what replaces ``old_lines``."""
        return [line[1:] for line in self.lines if line[0] in " +"]

    def text(self) -> str:
        """The hunk as it appeared in the patch (header and body)."""
        body = []
        for line in self.lines:
            body.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
        return self.header + "\n" + "".join(body)


@dataclass(frozen=True)
class FilePatch:
    """The changes a patch makes to one file."""

    old_path: str | None
    """Workspace-relative path before (prefix stripped); ``None`` for a new file (``/dev/null``)."""
    new_path: str | None
    """Workspace-relative path after; ``None`` for a deleted file."""
    hunks: tuple[Hunk, ...] = ()
    """The hunks, in file order."""
    old_mode: int | None = None
    """Git mode before, when the patch says (``old mode``, ``deleted file mode``, ``index``)."""
    new_mode: int | None = None
    """Git mode after, when the patch says (``new mode``/``new file mode``)."""
    binary: bool = False
    """True for ``Binary files ... differ`` / ``GIT binary patch`` sections (never applied)."""

    @property
    def path(self) -> str:
        """The path the patch is about (the new one unless the file is deleted)."""
        return self.new_path or self.old_path or ""


@dataclass(frozen=True)
class RejectedHunk:
    """A hunk (or a whole file patch) that does not apply, and why."""

    path: str
    """File the hunk is for."""
    reason: str
    """Why it was rejected (context not found, file missing, path refused, ...)."""
    hunk: str = ""
    """The hunk's text (empty when the whole file patch was rejected before its hunks)."""

    def text(self) -> str:
        """A human-readable description, hunk text included."""
        head = f"{self.path}: {self.reason}"
        return head + ("\n" + self.hunk.rstrip("\n") if self.hunk else "")


@dataclass(frozen=True)
class PatchResult:
    """What applying a patch did."""

    added: tuple[str, ...] = ()
    """Files created."""
    modified: tuple[str, ...] = ()
    """Files whose content or exec bit changed."""
    deleted: tuple[str, ...] = ()
    """Files removed (renamed-away files included)."""
    hunks: int = 0
    """Number of hunks applied."""
    offsets: dict[str, list[int]] = field(default_factory=dict)
    """Per file, the line offset of every hunk that did not apply at its stated line."""

    def summary(self) -> str:
        """One line per file, ``A``/``M``/``D`` first, then the offsets used if any."""
        lines = [f"A {p}" for p in self.added]
        lines += [f"M {p}" for p in self.modified]
        lines += [f"D {p}" for p in self.deleted]
        for path, offs in self.offsets.items():
            lines.append(f"  {path}: hunks applied at offsets {offs}")
        lines.append(f"{self.hunks} hunk(s) applied")
        return "\n".join(lines)


class PatchError(ToolError):
    """A patch is malformed or does not apply; nothing was written.

    ``rejected`` lists every hunk that failed, with its text.
    """

    def __init__(self, message: str, rejected: Sequence[RejectedHunk] = ()) -> None:
        self.rejected = tuple(rejected)
        if self.rejected:
            message += "\n" + "\n".join(r.text() for r in self.rejected)
        super().__init__(message)


# --- parsing --------------------------------------------------------------------------------------


def _split_lines(text: str) -> list[str]:
    """Split on ``\\n`` only, keeping line endings (``\\r`` stays part of the content)."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


_C_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92, '"': 34}


def _unquote(path: str) -> str:
    """Undo git's C-style quoting of a path (``"a/\\303\\251.txt"``); other paths pass through."""
    if not (len(path) >= 2 and path.startswith('"') and path.endswith('"')):
        return path
    out = bytearray()
    body = path[1:-1]
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if re.fullmatch(r"[0-7]{3}", body[i + 1 : i + 4]):
                out.append(int(body[i + 1 : i + 4], 8))
                i += 4
                continue
            if nxt in _C_ESCAPES:
                out.append(_C_ESCAPES[nxt])
                i += 2
                continue
        out += ch.encode(_ENCODING, _ERRORS)
        i += 1
    return out.decode(_ENCODING, _ERRORS)


def _header_path(raw: str) -> str:
    """The path of a ``---``/``+++`` line (timestamp after a tab cut off, quoting undone)."""
    raw = raw.rstrip("\r\n")
    if raw.startswith('"'):
        end = raw.rfind('"')
        return _unquote(raw[: end + 1])
    return raw.split("\t", 1)[0].rstrip(" ") if "\t" in raw else raw


def _strip(path: str, strip: int) -> str | None:
    if path == "/dev/null":
        return None
    parts = path.split("/")
    if strip and len(parts) > strip:
        parts = parts[strip:]
    return "/".join(parts)


def _git_line_paths(rest: str) -> tuple[str, str] | None:
    """Paths of ``diff --git a/X b/Y`` (exact when quoted or when X == Y, else a best guess)."""
    rest = rest.rstrip("\r\n")
    if rest.startswith('"'):
        end = rest.find('" ', 1)
        if end == -1:
            return None
        first, second = rest[: end + 1], rest[end + 2 :]
        return _unquote(first), _unquote(second)
    if rest.endswith('"'):
        start = rest.rfind(' "')
        if start == -1:
            return None
        return rest[:start], _unquote(rest[start + 1 :])
    # Unquoted: "a/P b/P" with the same P on both sides (the common case, spaces allowed).
    if len(rest) % 2 == 1:
        half = (len(rest) - 1) // 2
        first, second = rest[:half], rest[half + 1 :]
        if rest[half] == " " and first.split("/", 1)[-1] == second.split("/", 1)[-1]:
            return first, second
    pieces = rest.split(" ")
    if len(pieces) == 2:
        return pieces[0], pieces[1]
    return None


@dataclass
class _Building:
    old_path: str | None = None
    new_path: str | None = None
    git_old: str | None = None
    git_new: str | None = None
    hunks: list[Hunk] = field(default_factory=list)
    old_mode: int | None = None
    new_mode: int | None = None
    binary: bool = False
    new_file: bool = False
    deleted_file: bool = False
    saw_headers: bool = False

    def finish(self) -> FilePatch:
        old, new = self.old_path, self.new_path
        if not self.saw_headers:
            old, new = self.git_old, self.git_new
        if self.new_file:
            old = None
        if self.deleted_file:
            new = None
        return FilePatch(
            old_path=old,
            new_path=new,
            hunks=tuple(self.hunks),
            old_mode=self.old_mode,
            new_mode=self.new_mode,
            binary=self.binary,
        )


def parse_patch(text: str, *, strip: int = 1) -> list[FilePatch]:
    """Parse a unified diff into file patches; ``strip`` leading path components are removed.

    Raises ``PatchError`` for a malformed patch (a hunk cut short, counts that do not add up) and
    for text that holds no file patch at all.
    """
    lines = _split_lines(text)
    files: list[FilePatch] = []
    current: _Building | None = None
    i = 0

    def close() -> None:
        nonlocal current
        if current is not None:
            files.append(current.finish())
            current = None

    while i < len(lines):
        line = lines[i]
        bare = line.rstrip("\r\n")
        if bare.startswith("diff --git "):
            close()
            current = _Building()
            paths = _git_line_paths(bare[len("diff --git ") :])
            if paths is not None:
                current.git_old = _strip(paths[0], strip)
                current.git_new = _strip(paths[1], strip)
            i += 1
            continue
        if bare.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            if current is None or current.saw_headers:
                close()
                current = _Building()
            current.saw_headers = True
            current.old_path = _strip(_header_path(bare[4:]), strip)
            current.new_path = _strip(_header_path(lines[i + 1][4:]), strip)
            i += 2
            continue
        if bare.startswith("@@ "):
            if current is None or not (current.saw_headers or current.git_new):
                raise PatchError(f"patch line {i + 1}: hunk without a file header: {bare!r}")
            hunk, i = _parse_hunk(lines, i)
            current.hunks.append(hunk)
            continue
        if current is not None and not current.hunks:
            _extended_header(current, bare, strip)
        i += 1
    close()
    if not files:
        raise PatchError("the text holds no unified diff (no '---'/'+++' or 'diff --git' header)")
    return files


def _extended_header(cur: _Building, bare: str, strip: int) -> None:
    def mode(value: str) -> int | None:
        try:
            return int(value.strip(), 8)
        except ValueError:
            return None

    if bare.startswith("new file mode "):
        cur.new_file = True
        cur.new_mode = mode(bare[len("new file mode ") :])
    elif bare.startswith("deleted file mode "):
        cur.deleted_file = True
        cur.old_mode = mode(bare[len("deleted file mode ") :])
    elif bare.startswith("old mode "):
        cur.old_mode = mode(bare[len("old mode ") :])
    elif bare.startswith("new mode "):
        cur.new_mode = mode(bare[len("new mode ") :])
    elif bare.startswith("index ") and " " in bare[len("index ") :]:
        m = mode(bare.rsplit(" ", 1)[1])
        if m is not None:
            cur.old_mode = cur.old_mode or m
            cur.new_mode = cur.new_mode or m
    elif bare.startswith("rename from "):
        cur.git_old = _unquote(bare[len("rename from ") :])
    elif bare.startswith("rename to "):
        cur.git_new = _unquote(bare[len("rename to ") :])
    elif bare.startswith("Binary files ") or bare == "GIT binary patch":
        cur.binary = True


def _parse_hunk(lines: list[str], i: int) -> tuple[Hunk, int]:
    header = lines[i].rstrip("\r\n")
    m = _HUNK_RE.match(header)
    if m is None:
        raise PatchError(f"patch line {i + 1}: malformed hunk header {header!r}")
    old_start, new_start = int(m.group(1)), int(m.group(3))
    old_count = int(m.group(2)) if m.group(2) is not None else 1
    new_count = int(m.group(4)) if m.group(4) is not None else 1
    body: list[str] = []
    old_left, new_left = old_count, new_count
    i += 1
    while i < len(lines) and (old_left > 0 or new_left > 0):
        line = lines[i]
        tag = line[0]
        if line in ("\n", "\r\n"):  # an editor stripped the context line's leading space
            line, tag = " " + line, " "
        if tag == "\\":
            _drop_newline(body, i)
            i += 1
            continue
        if tag == " " and old_left > 0 and new_left > 0:
            old_left -= 1
            new_left -= 1
        elif tag == "-" and old_left > 0:
            old_left -= 1
        elif tag == "+" and new_left > 0:
            new_left -= 1
        else:
            raise PatchError(
                f"patch line {i + 1}: hunk {header!r} does not match its line counts "
                f"(unexpected {line.rstrip()!r})"
            )
        body.append(line)
        i += 1
    if old_left or new_left:
        raise PatchError(
            f"hunk {header!r} is cut short ({old_left} old and {new_left} new missing)"
        )
    if i < len(lines) and lines[i].startswith("\\"):
        _drop_newline(body, i)
        i += 1
    hunk = Hunk(header, old_start, old_count, new_start, new_count, tuple(body))
    return hunk, i


def _drop_newline(body: list[str], i: int) -> None:
    """Apply a ``\\ No newline at end of file`` marker to the line before it."""
    if not body:
        raise PatchError(f"patch line {i + 1}: 'No newline' marker without a line before it")
    prev = body[-1]
    if prev.endswith("\r\n"):
        body[-1] = prev[:-2]
    elif prev.endswith("\n"):
        body[-1] = prev[:-1]


# --- applying -------------------------------------------------------------------------------------


def _guard(workspace: Path, rel: str) -> Path:
    """The absolute path of ``rel`` inside ``workspace``; refuses escapes and ``.git``."""
    if not rel or rel.startswith("/") or "\x00" in rel:
        raise PathEscapeError(f"{rel!r}: not a relative path inside the workspace")
    parts = PurePosixPath(rel).parts
    if any(p in ("..", ".") for p in rel.split("/")) or any(p.casefold() == ".git" for p in parts):
        raise PathEscapeError(f"{rel!r}: leads outside the workspace or into .git")
    node = workspace
    for part in parts[:-1]:
        node = node / part
        if node.is_symlink():
            raise PathEscapeError(f"{rel!r}: folder {part!r} is a symlink")
    return workspace.joinpath(*parts)


@dataclass
class _Planned:
    patch: FilePatch
    source: Path | None
    target: Path | None
    content: str | None
    mode: int | None
    offsets: list[int]


def _read(path: Path) -> str:
    return path.read_bytes().decode(_ENCODING, _ERRORS)


def _apply_hunks(
    path: str, original: str, hunks: Sequence[Hunk], rejected: list[RejectedHunk]
) -> tuple[str, list[int]]:
    lines = _split_lines(original)
    result: list[str] = []
    cursor = 0
    offsets: list[int] = []
    drift = 0  # a hunk found off its stated line moves the expectation for the next ones
    for hunk in hunks:
        old = hunk.old_lines
        stated = hunk.old_start - 1 if hunk.old_count else hunk.old_start
        expected = min(max(stated + drift, 0), len(lines))
        pos = _find(lines, old, expected, cursor)
        if pos is None:
            where = f"line {hunk.old_start}"
            rejected.append(RejectedHunk(path, f"context does not match at {where}", hunk.text()))
            continue
        if pos != stated:
            offsets.append(pos - stated)
        drift = pos - stated
        result.extend(lines[cursor:pos])
        result.extend(hunk.new_lines)
        cursor = pos + len(old)
    result.extend(lines[cursor:])
    return "".join(result), offsets


def _find(lines: list[str], old: list[str], expected: int, floor: int) -> int | None:
    """Nearest position >= ``floor`` where ``old`` matches exactly, searching from ``expected``."""
    n, m = len(lines), len(old)
    if m == 0:
        return min(max(expected, floor), n)
    limit = max(expected - floor, n - expected) + 1
    for delta in range(limit):
        for pos in (expected - delta, expected + delta) if delta else (expected,):
            if floor <= pos <= n - m and lines[pos : pos + m] == old:
                return pos
    return None


class _Rejected(Exception):
    """One file patch refused; the message says why."""


def _plan(workspace: Path, patches: Sequence[FilePatch]) -> list[_Planned]:
    rejected: list[RejectedHunk] = []
    plans: list[_Planned] = []
    # Later file patches of the same path see the content planned by earlier ones.
    pending: dict[Path, str | None] = {}
    for fp in patches:
        try:
            planned = _plan_file(workspace, fp, pending, rejected)
        except _Rejected as exc:
            rejected.append(RejectedHunk(fp.path, str(exc)))
            continue
        if planned is not None:
            plans.append(planned)
    if rejected:
        raise PatchError(
            f"the patch does not apply ({len(rejected)} rejected); no file was changed", rejected
        )
    return plans


def _old_text(
    workspace: Path, source: Path | None, target: Path | None, pending: dict[Path, str | None]
) -> str:
    """The text a file patch applies to ("" for a new file); ``_Rejected`` when the files on
    disk (or as planned by earlier file patches) do not fit the patch."""

    def current(p: Path) -> str | None:
        if p in pending:
            return pending[p]
        if p.is_symlink() or (p.exists() and not p.is_file()):
            raise ToolError(f"{p.relative_to(workspace)} is not a regular file")
        return _read(p) if p.exists() else None

    try:
        old_text = current(source) if source is not None else None
        existing_target = current(target) if target is not None and target != source else None
    except (ToolError, OSError) as exc:
        raise _Rejected(str(exc)) from None
    if source is None:
        if existing_target is not None:
            raise _Rejected("the patch creates it but it already exists")
        return ""
    if old_text is None:
        raise _Rejected("the file does not exist")
    if target is not None and target != source and existing_target is not None:
        raise _Rejected("the rename target already exists")
    return old_text


def _plan_file(
    workspace: Path,
    fp: FilePatch,
    pending: dict[Path, str | None],
    rejected: list[RejectedHunk],
) -> _Planned | None:
    """Plan one file patch: ``_Rejected`` for the file, ``None`` when hunks were rejected (they
    are added to ``rejected``)."""
    if fp.binary:
        raise _Rejected("binary patches are not supported")
    if 0o120000 in (fp.old_mode, fp.new_mode):
        raise _Rejected("symlink patches are not supported")
    try:
        source = _guard(workspace, fp.old_path) if fp.old_path is not None else None
        target = _guard(workspace, fp.new_path) if fp.new_path is not None else None
    except PathEscapeError as exc:
        raise _Rejected(f"path refused: {exc}") from None

    old_text = _old_text(workspace, source, target, pending)
    before = len(rejected)
    content, offsets = _apply_hunks(fp.path, old_text, fp.hunks, rejected)
    if len(rejected) > before:
        return None
    if target is None and content:
        raise _Rejected("the patch deletes it but the file has other content")
    mode = None
    if fp.new_mode is not None and fp.new_mode != fp.old_mode:
        mode = 0o755 if fp.new_mode & 0o100 else 0o644
    if source is not None:
        pending[source] = None
    if target is not None:
        pending[target] = content
    return _Planned(fp, source, target, content, mode, offsets)


def _rel(path: Path, workspace: Path) -> str:
    return path.relative_to(workspace).as_posix()


def _delete(path: Path, workspace: Path) -> None:
    """Delete ``path`` and the folders it leaves empty, never through a symlinked folder."""
    _confined.remove_file(workspace, _rel(path, workspace))
    _confined.prune_empty(workspace, _rel(path.parent, workspace))


def apply_patch(workspace: str | os.PathLike[str], text: str, *, strip: int = 1) -> PatchResult:
    """Apply the unified diff ``text`` to ``workspace``: all hunks are checked first, then written.

    Raises ``PatchError`` (nothing written) when the patch is malformed or any hunk does not apply;
    ``PathEscapeError`` subclasses are reported as rejected hunks too.
    """
    root = Path(workspace).resolve()
    plans = _plan(root, parse_patch(text, strip=strip))
    added: list[str] = []
    modified: list[str] = []
    deleted: list[str] = []
    offsets: dict[str, list[int]] = {}
    hunks = 0
    for plan in plans:
        fp = plan.patch
        hunks += len(fp.hunks)
        if plan.offsets:
            offsets[fp.path] = plan.offsets
        if plan.target is not None:
            assert plan.content is not None
            # Written from folder descriptors opened without following symlinks: a folder
            # swapped for a symlink after the plan's checks cannot send the file elsewhere.
            data = plan.content.encode(_ENCODING, _ERRORS)
            _confined.write_file(root, _rel(plan.target, root), data, mode=plan.mode)
            (added if plan.source is None else modified).append(fp.path)
            if plan.source is not None and plan.source != plan.target:
                _delete(plan.source, root)
                deleted.append(fp.old_path or "")
                modified.remove(fp.path)
                added.append(fp.path)
        elif plan.source is not None:
            _delete(plan.source, root)
            deleted.append(fp.old_path or "")
    return PatchResult(tuple(added), tuple(modified), tuple(deleted), hunks, offsets)


# --- the agent ------------------------------------------------------------------------------------


def _apply_tool(env: ToolEnv, args: Mapping[str, Any]) -> ToolOutcome:
    result = apply_patch(env.workspace, str(args["patch"]), strip=int(args.get("strip", 1)))
    return ToolOutcome(result.summary(), data={"hunks": result.hunks})


class PatchAgent:
    """Applies unified diffs, one session step per patch, in order.

    A patch that does not apply ends the run as ``failed``; its reason lists the rejected hunks.
    Nothing of that patch is written; patches applied before it stay as completed steps.
    """

    kind = "patch"

    def __init__(
        self,
        patches: Sequence[str],
        *,
        strip: int = 1,
        base_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        """``patches``: each an inline diff (text with a newline) or a path to a diff file
        (relative paths resolved against ``base_dir``, default the current directory)."""
        self.patches = list(patches)
        self.strip = strip
        self.base_dir = Path(base_dir) if base_dir is not None else None

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> PatchAgent:
        """Build from a config mapping, checked by ``PatchConfig`` (``AgentError`` names a bad
        field)."""
        return cls(**agent_kwargs(PatchConfig, config))

    def _text(self, spec: str) -> tuple[str, str]:
        if "\n" in spec:
            return spec, "<inline>"
        path = Path(spec)
        if not path.is_absolute() and self.base_dir is not None:
            path = self.base_dir / path
        try:
            return path.read_bytes().decode(_ENCODING, _ERRORS), str(path)
        except OSError as exc:
            raise AgentError(f"patch agent: cannot read patch file {str(path)!r}: {exc}") from exc

    def run(self, ctx: AgentContext) -> AgentResult:
        """Apply the patches as session steps (see the class docstring)."""
        t0 = time.monotonic()
        transcript: list[dict[str, Any]] = []
        steps = 0

        def result(status: AgentStatus, reason: str | None = None) -> AgentResult:
            cost = AgentCost(seconds=time.monotonic() - t0)
            return AgentResult(status, steps, cost, transcript, reason)

        for n, spec in enumerate(self.patches, 1):
            if steps >= ctx.max_steps:
                return result(AgentStatus.LIMIT_REACHED, f"max_steps={ctx.max_steps} reached")
            try:
                text, source = self._text(spec)
            except AgentError as exc:
                transcript.append({"event": "error", "patch": n, "error": str(exc)})
                return result(AgentStatus.FAILED, str(exc))
            call = ToolCall(f"patch-{n}", "apply_patch", {"patch": text, "strip": self.strip})
            step = ctx.session.step(
                [call], tools={"apply_patch": _apply_tool}, rollback_on_error=True
            )
            steps += 1
            obs = step.observations[0]
            transcript.append(
                {
                    "event": "patch",
                    "patch": n,
                    "source": source,
                    "ok": obs.ok,
                    "step": step.index,
                    "observation": obs.content,
                }
            )
            if not obs.ok:
                return result(AgentStatus.FAILED, f"patch {n} ({source}) failed: {obs.content}")
        return result(AgentStatus.FINISHED)
