"""What a run directory names, kept in the store for as long as the run directory exists.

A run names store states in two places: its events (the root's and each node's snapshot commit)
and its session files (``transcripts/*.session.jsonl``: each step's commit; with
``search.workers > 1`` commits of a worker's store, which no ref of the search's store names).
``checkout``, ``report`` (diffs) and ``resume`` need every one of them, so a run holds them all
in the store (``ShadowStore.keep``, under ``run-<id>``, held by the run directory): ``snap gc``
keeps them until the run directory is removed or ``snap gc --release`` names the run.

``KeepingSink`` stands between the search controller and the run directory: before an event that
names a new state is written, the state is held (a kill between the two leaves a held state the
log does not name, never a named state that is not held). Session files are read again only when
they grew.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from treesearch.session import commits_named

if TYPE_CHECKING:
    from treesearch.runs import RunDir
    from treesearch.scoring.results import ScoreResult

__all__ = ["KeepingSink", "event_commits", "keep_name"]


def keep_name(run: RunDir) -> str:
    """The name a run's states are held under in the store."""
    return f"run-{run.path.name}"


def event_commits(events: Iterable[Mapping[str, Any]]) -> list[str]:
    """The store states ``events`` name: the root's commit and each new node's (or its tree
    hash, for an event written without a commit)."""
    out: list[str] = []
    for ev in events:
        kind = ev.get("event")
        if kind == "root":
            out.append(str(ev.get("commit") or ev.get("tree")))
        elif kind == "expansion":
            node = ev.get("node")
            if isinstance(node, Mapping) and node.get("commit"):
                out.append(str(node["commit"]))
            elif ev.get("child"):
                out.append(str(ev["child"]))
    return out


class KeepingSink:
    """A ``RunSink`` that holds each state the run names in the store before recording it.

    ``keep(commits)`` adds to what the run holds (``ShadowStore.keep`` bound to the run's name
    and folder). Every other call goes to ``run`` unchanged."""

    def __init__(self, run: RunDir, keep: Callable[[list[str]], object]) -> None:
        self.run = run
        self._keep = keep
        self._commits: dict[str, None] = {}
        self._read: dict[Path, int] = {}
        """Session files read, and their size when read."""
        self._sent: set[str] = set()
        """What ``keep`` was given already (each call adds to what the run holds)."""
        self._named = False
        """Whether ``keep`` was called yet (the first call names the run's folder as holder,
        with nothing new to add on a resume)."""

    def hold(self, events: Iterable[Mapping[str, Any]] = ()) -> None:
        """Hold the states ``events`` name and every session file of the run (a resume: what
        the earlier process recorded, aborted sessions too)."""
        self._commits.update(dict.fromkeys(event_commits(events)))
        transcripts = self.run.path / "transcripts"
        if transcripts.is_dir():
            for p in sorted(transcripts.glob("*.jsonl")):
                self._read.setdefault(p, -1)
        self._update()

    def _update(self) -> None:
        for path, size in list(self._read.items()):
            try:
                now = path.stat().st_size
            except OSError:
                continue
            if now != size:
                self._read[path] = now
                self._commits.update(dict.fromkeys(commits_named(path)))
        new = [c for c in self._commits if c not in self._sent]
        if new or not self._named:
            self._keep(new)
            self._sent.update(new)
            self._named = True

    # ---- the RunSink protocol

    def append(self, event: Mapping[str, Any]) -> None:
        new = event_commits([event])
        if new:
            self._commits.update(dict.fromkeys(new))
            self._update()
        self.run.append(event)

    def append_timing(self, record: Mapping[str, Any]) -> None:
        self.run.append_timing(record)

    def session_file(self, name: str) -> Path | None:
        path = self.run.session_file(name)
        self._read.setdefault(path, -1)
        return path

    def write_transcript(self, name: str, data: Mapping[str, Any]) -> str | None:
        return self.run.write_transcript(name, data)

    def write_test_log(self, tree: str, result: ScoreResult) -> None:
        self.run.write_test_log(tree, result)
