"""Unified diffs as values: parsing git-style and plain ``diff -u`` patches into ``FilePatch`` /
``Hunk`` values, and the result and error types of applying them (``treesearch.agents.patch``
applies them and re-exports these names)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from treesearch.errors import ToolError

ENCODING = "utf-8"
ERRORS = "surrogateescape"  # non-UTF-8 bytes survive a read/modify/write round trip
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


def split_lines(text: str) -> list[str]:
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
        out += ch.encode(ENCODING, ERRORS)
        i += 1
    return out.decode(ENCODING, ERRORS)


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
    lines = split_lines(text)
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
