"""Agents: one protocol, a registry keyed by ``kind``, and the built-in strategies.

An agent gets an ``AgentContext`` (the session that binds conversation and workspace, the task,
the test feedback so far, ``max_steps``, a ``timeout``, a seeded RNG) and ``run(ctx)`` returns an
``AgentResult``. Agents act on the workspace through ``ctx.session`` steps, so every change is a
recorded, restorable state.

Agents are built from config dicts (``build_agent({"kind": "scripted", "steps": [...]})``); the
registry maps each ``kind`` to a config model (a pydantic ``AgentConfig`` that validates the
fields, ``treesearch.agents.configs``) and a factory that takes the model's ``agent_kwargs()``
as keyword arguments (``register_agent``). Built-ins:

- ``scripted``: a fixed list of shell commands, file writes and replacements (deterministic; the
  test double of the project and a real agent);
- ``patch``: applies unified diffs with ``git apply`` through the store (all or nothing per
  patch);
- ``command``: runs an external agent CLI in the workspace under the sandbox's timeout and limits;
- ``python``: calls ``module:function`` with the context.

Failure policy (``run_agent``, which the search controller uses to run any agent): an agent that
raises, returns something else than an ``AgentResult``, runs past its timeout, or fails a step
(e.g. a file tool given ``../x``) yields a ``failed`` result with the reason. The workspace then
**keeps the steps the agent completed** (each is a recorded state; ``ctx.session.rewind(
result.first_step)`` drops them) and everything else is put back: the failing step is rolled back
and changes made outside session steps are discarded, so disk, session and store agree. After a
non-failed run, changes made outside session steps are recorded as one extra step.
"""

from __future__ import annotations

import enum
import importlib
import random
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from treesearch import sandbox
from treesearch.errors import AgentError, SessionError
from treesearch.session import SessionDeadlineError, TransactionalSession
from treesearch.types import TreeHash

if TYPE_CHECKING:
    from treesearch.agents.configs import AgentConfig

__all__ = [
    "Agent",
    "AgentContext",
    "AgentConfig",
    "AgentCost",
    "AgentFactory",
    "AgentResult",
    "AgentStatus",
    "agent_entry",
    "agent_model",
    "attempts_independent",
    "build_agent",
    "check_fields",
    "known_kinds",
    "register_agent",
    "resolve_dotted",
    "run_agent",
]


class AgentStatus(str, enum.Enum):
    """How an agent run ended."""

    FINISHED = "finished"
    """The agent completed its work (it believes the task is done)."""
    GAVE_UP = "gave_up"
    """The agent stopped on its own without a solution."""
    LIMIT_REACHED = "limit_reached"
    """``max_steps`` (or the agent's own budget) ran out before it finished."""
    FAILED = "failed"
    """The agent could not run or broke a rule (raised, timed out, a step failed, ...)."""


@dataclass(frozen=True)
class AgentCost:
    """What a run cost."""

    seconds: float = 0.0
    """Wall-clock seconds."""
    tokens_in: int = 0
    """Model input (prompt) tokens, if the agent uses a model."""
    tokens_out: int = 0
    """Model output (completion) tokens."""

    def __add__(self, other: AgentCost) -> AgentCost:
        return AgentCost(
            self.seconds + other.seconds,
            self.tokens_in + other.tokens_in,
            self.tokens_out + other.tokens_out,
        )


@dataclass
class AgentResult:
    """Outcome of one agent run."""

    status: AgentStatus
    """How the run ended."""
    steps: int = 0
    """Session steps the run added (``run_agent`` sets it from the session)."""
    cost: AgentCost = field(default_factory=AgentCost)
    """Seconds and tokens spent."""
    transcript: list[dict[str, Any]] = field(default_factory=list)
    """The agent's own events (JSON-serialisable dicts, each with an ``event`` key)."""
    reason: str | None = None
    """Why the run failed, gave up or hit a limit (``None`` when it simply finished)."""
    first_step: int = 0
    """Number of session steps before the run (``session.rewind(first_step)`` undoes the run)."""
    tree: TreeHash | None = None
    """Workspace tree when the run ended (set by ``run_agent``)."""
    exhausted: bool = False
    """The agent made no change and says that no later run of this strategy on this node
    would make one (e.g. the mutation agent has tried every edit of the node's suspicious
    lines): the search records it on the no-op and policies stop choosing the pair. ``run_agent``
    clears it on a run that failed or added steps."""
    priors: tuple[float, ...] | None = None
    """The agent's prior of each attempt of this strategy on this node, in attempt order (how
    likely attempt ``a``'s edit is the fix, e.g. the mutation agent's ranked list: fault
    localisation x the pattern's weight, shares of the total). A function of the node alone,
    never of the run's timing. The search records it on the node the first time it is given
    (``graph.prior``); policies with priors (``best_first`` ``priors: k``, ``puct``) weigh an
    untried attempt against those of other nodes with it. ``None``: the agent has none."""

    def to_json(self) -> dict[str, Any]:
        """Plain data (status as its string value; ``exhausted`` only when set)."""
        return {
            "status": self.status.value,
            "steps": self.steps,
            "cost": {
                "seconds": self.cost.seconds,
                "tokens_in": self.cost.tokens_in,
                "tokens_out": self.cost.tokens_out,
            },
            "transcript": self.transcript,
            "reason": self.reason,
            "first_step": self.first_step,
            "tree": self.tree,
            **({"exhausted": True} if self.exhausted else {}),
            **({"priors": len(self.priors)} if self.priors else {}),
        }


@dataclass
class AgentContext:
    """Everything an agent run gets."""

    session: TransactionalSession
    """The session to act through (steps are recorded and restorable)."""
    task: str
    """The task text (issue statement, instructions)."""
    feedback: tuple[str, ...] = ()
    """Test feedback so far, oldest first (e.g. failing test summaries of earlier states)."""
    max_steps: int = 30
    """Most session steps the run may take."""
    timeout: float = 600.0
    """Wall-clock seconds for the whole run."""
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    """Seeded random source; agents draw from it only, so runs are reproducible."""
    limits: sandbox.Limits | None = None
    """Resource limits for processes the agent starts (``None``: the session's)."""
    node: TreeHash | None = None
    """Tree hash of the search node being expanded (the workspace's state at the start)."""
    attempt: int = 0
    """How many times this strategy was already applied to this node (sampled strategies)."""
    history: tuple[dict[str, Any], ...] = ()
    """The path from the root to this node, one dict per edge: ``strategy``, ``score`` (of the
    state reached), ``summary`` (test summary), ``diffstat``."""
    siblings: tuple[dict[str, Any], ...] = ()
    """What earlier expansions of this same node tried: ``strategy``, ``outcome`` (new,
    transposition, noop, error), ``score``, ``summary`` (so a new attempt can differ)."""
    test_spec: Any = None
    """The search's ``treesearch.scoring.TestSpec`` (for agents that run tests themselves)."""
    run_tests: Callable[[], str] | None = None
    """Runs the search tests on the workspace as it is now and returns feedback text (failing
    tests and the error tail); ``None`` when the controller offers no such tool."""
    cache_dir: Path | None = None
    """A folder outside the workspace where the agent may keep caches between runs (e.g. fault
    localisation per tree hash); ``None``: no persistent cache."""
    warm: Any = None
    """The search's warm test runner (``scoring.warm.WarmRunner``) for test runs an agent makes
    itself (the mutation agent's coverage run); ``None``: such runs are cold."""
    failing: tuple[str, ...] = ()
    """Ids of the search tests that fail at this node (its test summary's, at most 50); its
    test feedback (their messages and output) is ``feedback[-1]``."""

    @property
    def workspace(self) -> Path:
        """The workspace root (the session's)."""
        return self.session.workspace


@runtime_checkable
class Agent(Protocol):
    """A fix strategy: runs up to ``ctx.max_steps`` session steps and reports how it went."""

    def run(self, ctx: AgentContext) -> AgentResult:
        """Work on ``ctx.task`` in ``ctx.session``; should not raise (``run_agent`` guards)."""
        ...


AgentFactory = Callable[..., Agent]
"""Builds an agent: from a config model's ``agent_kwargs()`` as keyword arguments, or (a kind
registered without a model) from its config mapping without ``kind``."""

_BUILTINS: dict[str, str] = {
    "command": "treesearch.agents.command:CommandAgent",
    "llm": "treesearch.agents.llm:LLMAgent",
    "mutation": "treesearch.agents.mutation:MutationAgent",
    "patch": "treesearch.agents.patch:PatchAgent",
    "python": "treesearch.agents.python:PythonAgent",
    "scripted": "treesearch.agents.scripted:ScriptedAgent",
}


@dataclass(frozen=True)
class _Entry:
    factory: str | AgentFactory
    """A callable or a dotted path to one."""
    model: type[AgentConfig] | None = None
    """The config model whose ``agent_kwargs()`` the factory takes; ``None``: the factory takes
    the mapping (or, for a class, its ``from_config`` classmethod does)."""


_registry: dict[str, _Entry] = {}
"""Kind -> entry. The built-in kinds are added at the first use (``_kinds``), which loads their
config models (pydantic): importing this package does not."""
_registry_lock = threading.Lock()
_builtins_added = False


def _kinds() -> dict[str, _Entry]:
    """The registry, the built-in kinds in it (call with ``_registry_lock`` held)."""
    global _builtins_added
    if not _builtins_added:
        from treesearch.agents.configs import AGENT_MODELS

        for kind, factory in _BUILTINS.items():
            _registry.setdefault(kind, _Entry(factory, AGENT_MODELS[kind]))
        _builtins_added = True
    return _registry


def resolve_dotted(path: str) -> Any:
    """Import ``package.module:attr`` (or ``package.module.attr``); raises ``AgentError``."""
    if ":" in path:
        module_name, _, attr = path.partition(":")
    else:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise AgentError(f"{path!r} is not a dotted path like 'package.module:name'")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise AgentError(f"cannot import module {module_name!r} (from {path!r}): {exc}") from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise AgentError(f"module {module_name!r} has no attribute {attr!r}") from exc
    return obj


def register_agent(
    kind: str,
    factory: str | AgentFactory,
    *,
    model: type[AgentConfig] | None = None,
    replace: bool = False,
) -> None:
    """Make ``kind`` buildable. With a ``model`` (an ``AgentConfig`` subclass), a config is
    validated by it and ``factory`` (a callable or a dotted path to one) gets its
    ``agent_kwargs()`` as keyword arguments; without one, ``factory`` gets the config mapping
    (without ``kind``), or is a class whose ``from_config(config)`` classmethod does.

    Registering an existing kind again raises ``AgentError`` unless ``replace``.
    """
    if not isinstance(kind, str) or not kind:
        raise AgentError("register_agent: kind must be a non-empty string")
    if not (isinstance(factory, str) or callable(factory)):
        raise AgentError("register_agent: factory must be a callable or a dotted path string")
    from treesearch.agents.configs import AgentConfig

    if model is not None and not (isinstance(model, type) and issubclass(model, AgentConfig)):
        raise AgentError("register_agent: model must be a subclass of AgentConfig")
    entry = _Entry(factory, model)
    with _registry_lock:
        kinds = _kinds()
        if kind in kinds and not replace and kinds[kind] != entry:
            raise AgentError(f"agent kind {kind!r} is already registered (pass replace=True)")
        kinds[kind] = entry


def known_kinds() -> list[str]:
    """The registered agent kinds, sorted."""
    with _registry_lock:
        return sorted(_kinds())


def agent_entry(kind: str) -> tuple[str | AgentFactory, type[AgentConfig] | None] | None:
    """How ``kind`` is built: its factory and config model as ``register_agent`` took them
    (``None``: unknown). A parallel search registers them again in its worker processes."""
    with _registry_lock:
        entry = _kinds().get(kind)
    return (entry.factory, entry.model) if entry is not None else None


def agent_model(kind: str) -> type[AgentConfig] | None:
    """The config model registered for ``kind`` (``None``: unknown, or registered without)."""
    with _registry_lock:
        entry = _kinds().get(kind)
    return entry.model if entry is not None else None


def _entry(kind: Any) -> _Entry:
    with _registry_lock:
        entry = _kinds().get(kind) if isinstance(kind, str) else None
        known = sorted(_registry)
    if entry is None:
        raise AgentError(f"unknown agent kind {kind!r}; known kinds: {', '.join(known)}")
    return entry


def build_agent(config: Mapping[str, Any] | AgentConfig) -> Agent:
    """Build an agent from ``{"kind": ..., <fields>}`` or from a validated config model.

    Raises ``AgentError`` for an unknown kind (listing the known ones) and for bad fields (naming
    the field and what it allows).
    """
    from pydantic import ValidationError

    from treesearch.agents.configs import AgentConfig, agent_error

    if isinstance(config, AgentConfig):
        return _make(config.kind, _entry(config.kind), config.agent_kwargs())
    if not isinstance(config, Mapping):
        raise AgentError(f"an agent config must be a mapping, got {type(config).__name__}")
    kind = config.get("kind")
    entry = _entry(kind)
    fields_ = {k: v for k, v in config.items() if k != "kind"}
    if entry.model is None:
        return _make(str(kind), entry, None, fields_)
    try:
        validated = entry.model.model_validate({**fields_, "kind": kind})
    except ValidationError as exc:
        raise agent_error(str(kind), exc, entry.model) from None
    return _make(str(kind), entry, validated.agent_kwargs())


def _make(
    kind: str,
    entry: _Entry,
    kwargs: dict[str, Any] | None,
    mapping: Mapping[str, Any] | None = None,
) -> Agent:
    """Call the factory: with ``kwargs`` (a model's) or, without a model, with ``mapping``."""
    factory: Any = (
        resolve_dotted(entry.factory) if isinstance(entry.factory, str) else entry.factory
    )
    try:
        if kwargs is not None:
            agent = factory(**kwargs)
        else:
            agent = getattr(factory, "from_config", factory)(mapping)
    except AgentError:
        raise
    except (TypeError, ValueError) as exc:
        raise AgentError(f"agent kind {kind!r}: bad config: {exc}") from exc
    if not isinstance(agent, Agent):
        raise AgentError(f"agent kind {kind!r}: the factory returned {agent!r}, not an agent")
    return agent


def attempts_independent(config: Mapping[str, Any]) -> bool:
    """Whether the agent of ``config`` (a strategy's mapping) chooses what it does on a node
    from the node and the attempt number alone, so that attempts of one node may run at once
    without changing any of them: its class says so with an ``attempts_independent(config)``
    static method (e.g. the mutation agent in ranked order). Otherwise, or for a kind that
    cannot be resolved, ``False`` (attempts run one after another)."""
    entry = agent_entry(str(config.get("kind")))
    if entry is None:
        return False
    try:
        factory = resolve_dotted(entry[0]) if isinstance(entry[0], str) else entry[0]
    except AgentError:
        return False
    hook = getattr(factory, "attempts_independent", None)
    return bool(hook(config)) if callable(hook) else False


def check_fields(kind: str, config: Mapping[str, Any], allowed: Mapping[str, str]) -> None:
    """Refuse fields of ``config`` not in ``allowed`` (name -> description of allowed values)."""
    for name in config:
        if name not in allowed:
            listing = "; ".join(f"{k}: {v}" for k, v in allowed.items())
            raise AgentError(f"{kind} agent: unknown field {name!r}; allowed fields: {listing}")


def _failed(reason: str, transcript: list[dict[str, Any]] | None = None) -> AgentResult:
    return AgentResult(AgentStatus.FAILED, transcript=transcript or [], reason=reason)


def run_agent(agent: Agent, ctx: AgentContext) -> AgentResult:
    """Run ``agent`` with the guarantees of the module docstring (never raises for agent faults).

    The session's time limit is set to ``ctx.timeout`` for the run; ``steps``, ``first_step``,
    ``tree`` and (if the agent left it at 0) ``cost.seconds`` are filled in from the session.
    """
    session = ctx.session
    first = len(session.steps)
    t0 = time.monotonic()
    try:
        with session.time_limit(ctx.timeout):
            result: Any = agent.run(ctx)
        if not isinstance(result, AgentResult):
            result = _failed(f"the agent returned {type(result).__name__}, not an AgentResult")
    except SessionDeadlineError:
        result = _failed(f"timed out after {ctx.timeout:g} s")
    except Exception as exc:  # the boundary: any agent fault becomes a failed result
        tb = traceback.format_exc(limit=20)
        result = _failed(
            f"the agent raised {type(exc).__name__}: {exc}",
            [{"event": "error", "error": f"{type(exc).__name__}: {exc}", "traceback": tb}],
        )
    try:
        if result.status is AgentStatus.FAILED:
            restored = session.checkout()
            if restored is not None:
                result.transcript.append(
                    {
                        "event": "restored",
                        "tree": session.tree,
                        "note": "changes outside recorded steps were discarded",
                    }
                )
        else:
            step = session.capture_external("changes the agent made outside session steps")
            if step is not None:
                result.transcript.append(
                    {"event": "captured", "step": step.index, "stat": step.diff.stat}
                )
    except SessionError as exc:
        result.status = AgentStatus.FAILED
        result.reason = f"{result.reason + '; ' if result.reason else ''}{exc}"
    elapsed = time.monotonic() - t0
    if result.cost.seconds <= 0:
        result.cost = AgentCost(elapsed, result.cost.tokens_in, result.cost.tokens_out)
    result.first_step = first
    result.steps = len(session.steps) - first
    result.tree = session.tree
    # Only a run that changed nothing and did not fail may say nothing is left to try.
    result.exhausted = (
        result.exhausted and not result.steps and result.status is not AgentStatus.FAILED
    )
    return result


def __getattr__(name: str) -> Any:
    if name == "AgentConfig":  # loads pydantic: only when asked for
        from treesearch.agents.configs import AgentConfig

        return AgentConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
