"""What the search controller and its worker processes exchange (``search.parallel``): one
expansion sent (``Task``), what a worker did with it (``Outcome``), and what the controller needs
of a pool of workers (``Pool``). Plain data, so that the controller names no concrete store,
scorer or process pool."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from treesearch.agents import AgentResult
from treesearch.errors import SearchError
from treesearch.scoring.results import ScoreResult
from treesearch.search.policies import Choice
from treesearch.types import Snapshot


@dataclass(frozen=True)
class Task:
    """One expansion for a worker: everything the controller knew when it chose it."""

    k: int
    choice: Choice
    strategy: Any
    """The ``controller.Strategy`` (its ``agent`` config is plain data)."""
    start: Snapshot
    """The node's snapshot in the search store (tree, permission bits, empty folders)."""
    session_file: str | None
    session_id: str
    task: str
    feedback: tuple[str, ...]
    history: tuple[dict[str, Any], ...]
    siblings: tuple[dict[str, Any], ...]
    failing: tuple[str, ...]
    """The node's failing search tests (``AgentContext.failing``)."""
    seed: int
    timeout: float
    """The agent's time limit (already clipped to the wall-clock budget left)."""
    time_left: float | None
    """Wall seconds left of the search's budget when the task was sent (``None``: no limit)."""
    test_runs: int | None
    """Test runs this expansion may spend, its scoring included (``None``: no limit)."""
    known: frozenset[str]
    """The graph's nodes when the expansion was chosen: a state among them is not scored."""
    parent_score: ScoreResult | None = None
    repair: bool | None = None
    """Whether ``order: auto`` screens (``Scorer.repair``: a repair search under a policy that
    screens by default)."""
    warm_checked: bool = False
    """The search's warm test runner checked its first run against a cold one and they agreed
    (``WarmRunner.checked``): the worker's runner takes that check instead of making its own,
    one cold run fewer per worker."""
    warm_copy: tuple[tuple[Any, ...], int] | None = None
    """The server key and pid of a copy of the search's warm server (``WarmRunner.clone``)
    for this worker: its socket follows the task on the connection."""


@dataclass
class Outcome:
    """What a worker sends back for one task."""

    k: int
    cut: bool = False
    """The wall-clock budget ran out during the expansion: nothing to record."""
    error: str | None = None
    """The worker itself failed (not the agent: an agent's failure is a result)."""
    result: AgentResult | None = None
    child: str = ""
    modes: dict[str, int] = field(default_factory=dict)
    empty_dirs: tuple[str, ...] = ()
    scored: ScoreResult | None = None
    test_runs: int = 0
    cache_hits: int = 0
    timing: dict[str, float] = field(default_factory=dict)
    """Seconds of ``restore``, ``agent``, ``capture`` and ``score`` in the worker."""
    seconds: float = 0.0
    warm_runs: int = 0
    cold_runs: int = 0
    """Test runs the worker's warm runner made warm and cold for this task (``WorkerPool``
    adds them up: the search's ``summary.json`` counts every worker's runs)."""
    warm_servers: int = 0
    """Warm servers the worker started for this task (none when it took a copy of the
    search's)."""
    notes: tuple[str, ...] = ()
    """What the worker's warm test runner said (a fallback to cold runs), to be said again by
    the search: a worker's note is never silent."""

    def new_score(self) -> ScoreResult:
        """The score of a state that was not a node when the expansion was chosen."""
        if self.scored is None:  # the worker scores every such state
            raise SearchError(f"expansion {self.k}: a search worker sent a new state unscored")
        return self.scored


class Pool(Protocol):
    """Worker processes expanding a batch at once (``parallel.WorkerPool``)."""

    n: int
    """How many workers."""

    def run_window(self, ctl: Any) -> str:
        """Expand with the workers, recording through ``ctl`` (the controller), until the
        search must stop; returns why."""
        ...

    def record(self, out: Outcome) -> Snapshot:
        """Take a worker's new state into the search's store; its snapshot."""
        ...
