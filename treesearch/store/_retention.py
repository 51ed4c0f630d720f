"""Which snapshots ``gc`` drops: a pure function of the snapshots, the policy and the clock.

Three kinds of snapshot, three rules:

- unlabelled captures: ``keep_last`` (the newest N of them; safety snapshots do not count) and
  ``max_age``;
- labelled captures: kept, unless named in ``drop`` or ``labelled`` puts them under the capture
  rules (ranked with the unlabelled ones);
- safety snapshots (taken before each restore): their own rule, ``safety_max_age``; the newest
  ``keep_safety`` are never dropped, so the last restores can always be undone.

Never dropped by any rule: the snapshots in ``keep`` (pinned, the last one, the one ``undo``
returns to, those the caller protects) and the newest snapshot of all.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from treesearch.errors import GcError
from treesearch.store.values import Snapshot

__all__ = ["GcPolicy", "named_for_drop", "plan_gc", "pressure_order"]


@dataclass(frozen=True)
class GcPolicy:
    """What ``gc`` may drop."""

    keep_last: int | None = None
    """Keep the newest N unlabelled captures (safety snapshots are not counted)."""
    max_age: float | None = None
    """Drop unlabelled captures older than this many seconds."""
    keep_safety: int = 3
    """The newest N safety snapshots are never dropped (not even to meet a size limit)."""
    safety_max_age: float | None = None
    """Drop safety snapshots older than this many seconds (beyond the newest ``keep_safety``)."""
    labelled: bool = False
    """Put labelled captures under ``keep_last``/``max_age``/size limits too."""


def _ranked(snaps: Sequence[Snapshot], policy: GcPolicy) -> list[Snapshot]:
    """Captures the capture rules apply to, newest first."""
    return [s for s in snaps if s.kind != "safety" and (policy.labelled or s.label is None)]


def _safety_floor(snaps: Sequence[Snapshot], policy: GcPolicy) -> set[str]:
    safety = [s for s in snaps if s.kind == "safety"]
    return {s.commit for s in safety[: max(policy.keep_safety, 0)]}


def _protected(snaps: Sequence[Snapshot], policy: GcPolicy, keep: Collection[str]) -> set[str]:
    out = set(keep) | _safety_floor(snaps, policy)
    if snaps:
        out.add(snaps[0].commit)
    return out


def plan_gc(
    snaps: Sequence[Snapshot],
    policy: GcPolicy,
    *,
    keep: Collection[str],
    drop: Collection[str] = (),
    now: float,
) -> list[Snapshot]:
    """The snapshots to drop, newest first. ``snaps`` must be sorted newest first; ``drop`` holds
    commits the user named (checked against ``keep`` by the caller)."""
    protected = _protected(snaps, policy, keep)
    chosen: set[str] = {c for c in drop if c not in protected}
    for i, s in enumerate(_ranked(snaps, policy)):
        if s.commit in protected:
            continue
        too_many = policy.keep_last is not None and i >= policy.keep_last
        too_old = (
            policy.max_age is not None and s.clock_dated and now - s.created_at > policy.max_age
        )
        if too_many or too_old:
            chosen.add(s.commit)
    if policy.safety_max_age is not None:
        for s in snaps:
            if (
                s.kind == "safety"
                and s.clock_dated
                and s.commit not in protected
                and now - s.created_at > policy.safety_max_age
            ):
                chosen.add(s.commit)
    return [s for s in snaps if s.commit in chosen]


def pressure_order(
    snaps: Sequence[Snapshot], policy: GcPolicy, *, keep: Collection[str], dropped: Collection[str]
) -> list[Snapshot]:
    """What a size limit may drop, oldest first: unlabelled captures (labelled too with
    ``labelled``) and safety snapshots beyond the newest ``keep_safety``."""
    protected = _protected(snaps, policy, keep) | set(dropped)
    ranked = {s.commit for s in _ranked(snaps, policy)}
    return [
        s
        for s in reversed(snaps)
        if s.commit not in protected and (s.commit in ranked or s.kind == "safety")
    ]


def named_for_drop(
    snaps: Sequence[Snapshot],
    refs: Iterable[str],
    keep: Collection[str],
    pins: Collection[str],
    resolve: Callable[[str], str],
) -> set[str]:
    """Commits the user asked to drop by name: a label names every snapshot that has it, any
    other reference the one snapshot ``resolve`` finds. Refuses (``GcError``) to drop one that
    must be kept."""
    named: set[str] = set()
    for ref in refs:
        hits: list[str] = [s.commit for s in snaps if s.label == ref.strip()] or [resolve(ref)]
        for commit in hits:
            if commit in keep:
                why = (
                    "pinned by a run"
                    if commit in pins
                    else "the last snapshot or the one `undo` returns to, or protected"
                )
                raise GcError(
                    f"refusing to drop {commit[:12]} ({ref!r}): it is {why}; nothing was dropped"
                )
            named.add(commit)
    return named
