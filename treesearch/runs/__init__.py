"""Run directories: everything needed to inspect, resume or compare a search.

``runs/<run-id>/`` holds ``config.yaml`` (resolved: every default, the workspace searched and the
store home used; see ``runs.resolved``), ``events.jsonl`` (append-only, flushed per event: the
source of truth for resume), ``graph.json`` (networkx node-link data, rewritten from the events;
no timings, so the same seed gives the same bytes), ``timings.jsonl`` (where each expansion's
time went), ``transcripts/`` (one JSONL file per expansion), ``tests/`` (test output of each scored
state), ``best.patch``, ``predictions.jsonl`` (SWE-bench: ``instance_id``, ``model_name_or_path``,
``model_patch``) and ``summary.json``.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import secrets
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from treesearch._atomic import write_text
from treesearch.errors import RunError

if TYPE_CHECKING:
    from treesearch.scoring.results import ScoreResult

__all__ = ["RunDir", "EventLog", "new_run_id", "read_events"]


def new_run_id(prefix: str = "run") -> str:
    """``<prefix>-YYYYmmdd-HHMMSS-xxxx`` (UTC), sortable by start time."""
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", prefix).strip("-") or "run"
    return f"{safe}-{now}-{secrets.token_hex(2)}"


@dataclass
class EventLog:
    """Events read back from ``events.jsonl``; a torn last line (a crash mid-write) is dropped."""

    events: list[dict[str, Any]]
    dropped: list[int]
    """1-based line numbers that could not be read (only a torn last line is expected)."""


def read_events(path: Path) -> EventLog:
    events: list[dict[str, Any]] = []
    dropped: list[int] = []
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise RunError(
            f"{path} is missing: not a run directory (or the run never started)"
        ) from exc
    lines = raw.split(b"\n")
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            ev = json.loads(line)
        except ValueError:
            dropped.append(i)
            continue
        if isinstance(ev, dict) and "event" in ev:
            events.append(ev)
        else:
            dropped.append(i)
    if dropped and dropped != [len(lines) - (1 if raw.endswith(b"\n") else 0)]:
        bad = ", ".join(map(str, dropped[:5]))
        raise RunError(
            f"{path} is damaged at line(s) {bad} (not only a torn last line); "
            "the run cannot be resumed safely"
        )
    return EventLog(events, dropped)


class RunDir:
    """One run's folder. Writes are atomic (temp + rename) except the append-only logs.

    The only writer of a run directory: the search controller records through it (it is the
    controller's ``RunSink``, see ``treesearch.types``), and so do ``app`` and the CLI."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._events: Any = None

    @classmethod
    def create(cls, runs_dir: Path, run_id: str, config: Mapping[str, Any]) -> RunDir:
        path = runs_dir / run_id
        try:
            path.mkdir(parents=True, exist_ok=False)
        except FileExistsError as exc:
            raise RunError(
                f"run directory {path} already exists: choose another run id, or "
                f"`treesearch resume {path}`"
            ) from exc
        (path / "transcripts").mkdir()
        (path / "tests").mkdir()
        run = cls(path)
        run.write_text("config.yaml", yaml.safe_dump(dict(config), sort_keys=False))
        return run

    @classmethod
    def open(cls, path: Path) -> RunDir:
        if not (path / "events.jsonl").is_file() or not (path / "config.yaml").is_file():
            raise RunError(
                f"{path} is not a run directory (no events.jsonl/config.yaml): give "
                "a folder made by `treesearch run`"
            )
        return cls(path)

    def config(self) -> dict[str, Any]:
        try:
            data = yaml.safe_load((self.path / "config.yaml").read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise RunError(f"cannot read {self.path / 'config.yaml'}: {exc}") from exc
        if not isinstance(data, dict):
            raise RunError(f"{self.path / 'config.yaml'} does not hold a mapping")
        return data

    # ---- events

    def append(self, event: Mapping[str, Any]) -> None:
        """Append one event and flush it to the OS (survives a SIGKILL of this process)."""
        if self._events is None:
            self._repair_torn_tail()
            # Held open for the run's lifetime (closed by close()): one open per run, not per event.
            self._events = open(self.path / "events.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self._events.write(json.dumps(event, sort_keys=True, ensure_ascii=True) + "\n")
        self._events.flush()

    def _repair_torn_tail(self) -> None:
        # A crash mid-append leaves a partial last line: cut it before appending more.
        p = self.path / "events.jsonl"
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            return
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            with open(p, "r+b") as fh:
                fh.truncate(cut)

    def events(self) -> EventLog:
        return read_events(self.path / "events.jsonl")

    def close(self) -> None:
        if self._events is not None:
            self._events.close()
            self._events = None

    # ---- files

    def write_text(self, rel: str, text: str, *, errors: str = "surrogateescape") -> Path:
        p = self.path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        return write_text(p, text, errors=errors)

    def write_json(self, rel: str, data: Any) -> Path:
        return self.write_text(rel, json.dumps(data, indent=2, sort_keys=True) + "\n")

    def append_record(self, rel: str, record: Mapping[str, Any]) -> None:
        """Append one JSON line to ``rel`` (e.g. ``timings.jsonl``)."""
        with open(self.path / rel, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, sort_keys=True) + "\n")

    def write_jsonl(self, rel: str, records: Iterator[Mapping[str, Any]] | list[Any]) -> Path:
        return self.write_text(rel, "".join(json.dumps(r, sort_keys=True) + "\n" for r in records))

    # ---- what the search controller records (the ``RunSink`` protocol)

    def append_timing(self, record: Mapping[str, Any]) -> None:
        """Append where one expansion's time went to ``timings.jsonl``."""
        self.append_record("timings.jsonl", record)

    def session_file(self, name: str) -> Path:
        """``transcripts/<name>.session.jsonl``: where expansion ``name``'s session persists
        itself. A file already there was left by an expansion that was cut short (the run is
        being resumed): it is kept aside as ``<name>.aborted-<ns>.jsonl``."""
        path = self.path / "transcripts" / f"{name}.session.jsonl"
        if path.exists():
            path.replace(path.with_name(f"{name}.aborted-{time.time_ns()}.jsonl"))
        return path

    def write_transcript(self, name: str, data: Mapping[str, Any]) -> str:
        """Write expansion ``name``'s agent result to ``transcripts/<name>.json``; returns that
        path relative to the run (recorded on the graph's edge)."""
        rel = f"transcripts/{name}.json"
        self.write_text(rel, json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")
        return rel

    def write_test_log(self, tree: str, result: ScoreResult) -> None:
        """Write the test output of scored state ``tree`` to ``tests/<tree[:12]>.log``."""
        run = result.run
        text = (
            f"tree {tree}\ncommand {run.command}\n{run.summary()}"
            f"{' (cached)' if result.cached else ''}\n\n{run.output}\n"
        )
        self.write_text(f"tests/{tree[:12]}.log", text, errors="replace")
