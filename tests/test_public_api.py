"""The public API: ``treesearch.__all__`` is exactly the public names, each imports, and
``import treesearch`` stays light."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import pytest

import treesearch

# The contract. Adding or removing a public name is a deliberate change of this list.
PUBLIC = {
    "__version__",
    # running a search
    "run_from_config",
    "resume",
    "checkout",
    "SearchOutcome",
    "Controller",
    "Strategy",
    "SearchResult",
    "Budget",
    "make_policy",
    # many searches: an instance set
    "run_eval",
    "EvalOutcome",
    # store, session, scoring
    "ShadowStore",
    "TransactionalSession",
    "Scorer",
    "ScoreResult",
    "TestRun",
    "TestSpec",
    "score_workspace",
    # agents
    "Agent",
    "AgentContext",
    "AgentCost",
    "AgentResult",
    "AgentStatus",
    "build_agent",
    "known_kinds",
    "register_agent",
    "run_agent",
    # protocols and values
    "SnapshotStore",
    "StateScorer",
    "RunSink",
    "TreeHash",
    "CommitId",
    "Snapshot",
    "RestoreResult",
    "Diff",
    "FileChange",
    "CaptureStats",
    "Skipped",
    "ProcessResult",
    # errors
    "TreesearchError",
    "ConfigError",
    "StoreError",
    "StoreLocationError",
    "StoreLockedError",
    "WorkspaceBusy",
    "RefError",
    "CaptureError",
    "RestoreError",
    "DiffError",
    "MaterializeError",
    "GcError",
    "RecoveryError",
    "SandboxError",
    "PathEscapeError",
    "ToolError",
    "SessionError",
    "AgentError",
    "ScoringError",
    "SearchError",
    "RunError",
}


def test_all_is_exactly_the_public_names_without_duplicates() -> None:
    assert len(treesearch.__all__) == len(set(treesearch.__all__))
    assert set(treesearch.__all__) == PUBLIC


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_each_public_name_imports_from_the_package(name: str) -> None:
    value = getattr(treesearch, name)
    exec(f"from treesearch import {name}", {})  # noqa: S102 - the import statement users write
    if name != "__version__" and not isinstance(value, str):
        owner = sys.modules[getattr(value, "__module__", "treesearch")]
        assert getattr(owner, name) is value


def test_no_public_name_of_the_package_is_left_out_of_all() -> None:
    for name in PUBLIC:
        getattr(treesearch, name)
    public = {
        n
        for n, v in vars(treesearch).items()
        if not n.startswith("_") and not isinstance(v, types.ModuleType)
    }
    assert public - PUBLIC == set()
    assert set(dir(treesearch)) >= PUBLIC


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        treesearch.Nope  # noqa: B018


def test_import_treesearch_loads_neither_its_layers_nor_their_libraries() -> None:
    code = "import sys, json, treesearch; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    heavy = {"git", "networkx", "pydantic", "yaml", "treesearch.store", "treesearch.app"}
    assert loaded & heavy == set()
    assert {m for m in loaded if m.startswith("treesearch")} == {"treesearch"}
