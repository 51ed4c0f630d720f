"""The ``patch`` agent: applies unified diffs to the workspace, one session step per patch.

The patches go through the session's store (``ShadowStore.apply_patch``: ``git apply`` under the
store's settings, all or nothing, paths confined by git). Only ``treesearch/store`` runs git.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from treesearch.agents import (
    AgentContext,
    AgentCost,
    AgentResult,
    AgentStatus,
)
from treesearch.agents.configs import PatchConfig, agent_kwargs
from treesearch.errors import AgentError
from treesearch.session import ToolCall, ToolEnv, ToolOutcome
from treesearch.store import PatchError, PatchResult
from treesearch.types import SnapshotStore

__all__ = ["PatchAgent", "PatchError", "PatchResult"]

# The bytes of a patch file, whatever its encoding: decoded and encoded back the same way.
_ENCODING, _ERRORS = "utf-8", "surrogateescape"


def _apply_tool(store: SnapshotStore) -> Any:
    """The ``apply_patch`` tool of a session over ``store``."""

    def apply_patch(env: ToolEnv, args: Mapping[str, Any]) -> ToolOutcome:
        result = store.apply_patch(str(args["patch"]), strip=int(args.get("strip", 1)))
        return ToolOutcome(result.summary(), data={"hunks": result.hunks})

    return apply_patch


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
        tool = _apply_tool(ctx.session.store)

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
            step = ctx.session.step([call], tools={"apply_patch": tool}, rollback_on_error=True)
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
