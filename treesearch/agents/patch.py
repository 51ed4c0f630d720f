"""The ``patch`` agent and a pure-Python unified-diff applier.

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
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from treesearch import _confined
from treesearch.agents import (
    AgentContext,
    AgentCost,
    AgentResult,
    AgentStatus,
)
from treesearch.agents._patch_parse import (
    ENCODING,
    ERRORS,
    FilePatch,
    Hunk,
    PatchError,
    PatchResult,
    RejectedHunk,
    parse_patch,
    split_lines,
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
    return path.read_bytes().decode(ENCODING, ERRORS)


def _apply_hunks(
    path: str, original: str, hunks: Sequence[Hunk], rejected: list[RejectedHunk]
) -> tuple[str, list[int]]:
    lines = split_lines(original)
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
            data = plan.content.encode(ENCODING, ERRORS)
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
            return path.read_bytes().decode(ENCODING, ERRORS), str(path)
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
