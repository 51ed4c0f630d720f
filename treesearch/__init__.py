"""treesearch: branch search over a real codebase, each workspace state a git tree hash.

The public API is what ``__all__`` names, importable from ``treesearch`` itself::

    from treesearch import ShadowStore, TransactionalSession, Scorer, run_from_config

Names are imported on first use (``import treesearch`` alone loads none of git, networkx or
pydantic). Test doubles for code built on treesearch are in ``treesearch.testing``; the
protocols that tie the layers together in ``treesearch.types``. Every other module is private:
its names may change between versions (the command line is ``treesearch.cli``).
"""

import importlib as _importlib
import typing as _typing

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {  # public name -> the module that defines it
    # running a search
    "run_from_config": "treesearch.app",
    "resume": "treesearch.app",
    "checkout": "treesearch.app",
    "SearchOutcome": "treesearch.app",
    "Controller": "treesearch.search.controller",
    "Strategy": "treesearch.search.controller",
    "SearchResult": "treesearch.search.controller",
    "Budget": "treesearch.search.budget",
    "make_policy": "treesearch.search.params",
    # many searches: one per instance of an instance set
    "run_eval": "treesearch.eval",
    "EvalOutcome": "treesearch.eval",
    # the snapshot store and the session
    "ShadowStore": "treesearch.store",
    "TransactionalSession": "treesearch.session",
    # scoring
    "Scorer": "treesearch.scoring",
    "ScoreResult": "treesearch.scoring",
    "TestRun": "treesearch.scoring",
    "TestSpec": "treesearch.scoring",
    "score_workspace": "treesearch.scoring",
    # agents: the protocol and the registry
    "Agent": "treesearch.agents",
    "AgentContext": "treesearch.agents",
    "AgentCost": "treesearch.agents",
    "AgentResult": "treesearch.agents",
    "AgentStatus": "treesearch.agents",
    "build_agent": "treesearch.agents",
    "known_kinds": "treesearch.agents",
    "register_agent": "treesearch.agents",
    "run_agent": "treesearch.agents",
    # protocols and plain values
    "SnapshotStore": "treesearch.types",
    "StateScorer": "treesearch.types",
    "RunSink": "treesearch.types",
    "TreeHash": "treesearch.types",
    "CommitId": "treesearch.types",
    "Snapshot": "treesearch.types",
    "RestoreResult": "treesearch.types",
    "Diff": "treesearch.types",
    "FileChange": "treesearch.types",
    "CaptureStats": "treesearch.types",
    "Skipped": "treesearch.types",
    "ProcessResult": "treesearch.types",
    # errors
    "TreesearchError": "treesearch.errors",
    "ConfigError": "treesearch.errors",
    "StoreError": "treesearch.errors",
    "StoreLocationError": "treesearch.errors",
    "StoreLockedError": "treesearch.errors",
    "WorkspaceBusy": "treesearch.errors",
    "RefError": "treesearch.errors",
    "CaptureError": "treesearch.errors",
    "RestoreError": "treesearch.errors",
    "DiffError": "treesearch.errors",
    "MaterializeError": "treesearch.errors",
    "GcError": "treesearch.errors",
    "RecoveryError": "treesearch.errors",
    "SandboxError": "treesearch.errors",
    "PathEscapeError": "treesearch.errors",
    "ToolError": "treesearch.errors",
    "SessionError": "treesearch.errors",
    "AgentError": "treesearch.errors",
    "ScoringError": "treesearch.errors",
    "SearchError": "treesearch.errors",
    "RunError": "treesearch.errors",
}

__all__ = [
    "__version__",
    "EvalOutcome",
    "Agent",
    "AgentContext",
    "AgentCost",
    "AgentError",
    "AgentResult",
    "AgentStatus",
    "Budget",
    "CaptureError",
    "CaptureStats",
    "CommitId",
    "ConfigError",
    "Controller",
    "Diff",
    "DiffError",
    "FileChange",
    "GcError",
    "MaterializeError",
    "PathEscapeError",
    "ProcessResult",
    "RecoveryError",
    "RefError",
    "RestoreError",
    "RestoreResult",
    "RunError",
    "RunSink",
    "SandboxError",
    "ScoreResult",
    "Scorer",
    "ScoringError",
    "SearchError",
    "SearchOutcome",
    "SearchResult",
    "SessionError",
    "ShadowStore",
    "Skipped",
    "Snapshot",
    "SnapshotStore",
    "StateScorer",
    "StoreError",
    "StoreLocationError",
    "StoreLockedError",
    "Strategy",
    "TestRun",
    "TestSpec",
    "ToolError",
    "TransactionalSession",
    "TreeHash",
    "TreesearchError",
    "WorkspaceBusy",
    "build_agent",
    "checkout",
    "known_kinds",
    "make_policy",
    "register_agent",
    "resume",
    "run_eval",
    "run_agent",
    "run_from_config",
    "score_workspace",
]

assert set(__all__) == {"__version__", *_EXPORTS}  # one list of names, kept in step


def __getattr__(name: str) -> _typing.Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'treesearch' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value  # the next lookup does not come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if (
    _typing.TYPE_CHECKING
):  # what type checkers and IDEs see; at run time __getattr__ imports on demand
    from treesearch.agents import (
        Agent,
        AgentContext,
        AgentCost,
        AgentResult,
        AgentStatus,
        build_agent,
        known_kinds,
        register_agent,
        run_agent,
    )
    from treesearch.app import SearchOutcome, checkout, resume, run_from_config
    from treesearch.errors import (
        AgentError,
        CaptureError,
        ConfigError,
        DiffError,
        GcError,
        MaterializeError,
        PathEscapeError,
        RecoveryError,
        RefError,
        RestoreError,
        RunError,
        SandboxError,
        ScoringError,
        SearchError,
        SessionError,
        StoreError,
        StoreLocationError,
        StoreLockedError,
        ToolError,
        TreesearchError,
        WorkspaceBusy,
    )
    from treesearch.scoring import Scorer, ScoreResult, TestRun, TestSpec, score_workspace
    from treesearch.search.budget import Budget
    from treesearch.search.controller import Controller, SearchResult, Strategy
    from treesearch.search.params import make_policy
    from treesearch.session import TransactionalSession
    from treesearch.store import ShadowStore
    from treesearch.types import (
        CaptureStats,
        CommitId,
        Diff,
        FileChange,
        ProcessResult,
        RestoreResult,
        RunSink,
        Skipped,
        Snapshot,
        SnapshotStore,
        StateScorer,
        TreeHash,
    )
