"""Isolation of agent commands (issue #12 item 11): under ``sandbox.isolation`` the workspace is
the only writable path and there is no network; with ``none`` commands may write anywhere.
Real bubblewrap, real files, a real loopback listener."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_search import config, make_project, run

from treesearch import isolation
from treesearch.agents import AgentContext, AgentStatus, build_agent, run_agent
from treesearch.errors import SandboxError
from treesearch.session import TransactionalSession
from treesearch.store import ShadowStore

AVAILABLE = isolation.probe(isolation.shutil.which("bwrap"))
needs_isolation = pytest.mark.skipif(
    AVAILABLE is not None,
    reason=f"no isolation mechanism on this machine: {AVAILABLE}",
)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    (w / "a.txt").write_text("a\n")
    return w


@pytest.fixture
def session(ws: Path, tmp_path: Path) -> Iterator[TransactionalSession]:
    store = ShadowStore.open(ws, home=tmp_path / "home")
    yield TransactionalSession.create(store, tmp_path / "s.jsonl", timeout=30)
    store.close()


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that accepts connections (and closes them)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield int(srv.getsockname()[1])
    stop.set()
    t.join()
    srv.close()


def command(session: TransactionalSession, line: str, mode: str, **kw: Any) -> Any:
    session.isolation = isolation.resolve(mode, **kw)
    agent = build_agent({"kind": "command", "command": line})
    return run_agent(agent, AgentContext(session=session, task="t"))


CONNECT = f"{sys.executable} -c \"import socket,sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5)\""


@needs_isolation
def test_isolated_command_agent_cannot_write_outside_the_workspace(
    session: TransactionalSession, ws: Path, tmp_path: Path
) -> None:
    """Regression: ``echo pwned > ../outside`` wrote beside the workspace."""
    (tmp_path / "victim.txt").write_text("mine\n")
    result = command(
        session,
        "echo pwned > ../outside; echo pwned > ../victim.txt; echo fine > inside.txt",
        "namespace",
    )
    assert result.status is AgentStatus.FINISHED, result.reason
    assert not (tmp_path / "outside").exists()
    assert (tmp_path / "victim.txt").read_text() == "mine\n"
    assert (ws / "inside.txt").read_text() == "fine\n"  # the workspace itself stays writable


@needs_isolation
def test_isolated_command_sees_the_file_system_read_only_outside_the_workspace(
    session: TransactionalSession, ws: Path
) -> None:
    result = command(session, f"touch {sys.prefix}/ts-isolation-probe", "namespace")
    assert result.status is AgentStatus.FAILED
    assert "Read-only file system" in (result.reason or "")
    assert not (Path(sys.prefix) / "ts-isolation-probe").exists()


@needs_isolation
def test_isolated_scripted_run_step_cannot_write_outside(
    session: TransactionalSession, tmp_path: Path
) -> None:
    session.isolation = isolation.resolve("auto")
    agent = build_agent({"kind": "scripted", "steps": [{"run": "echo pwned > ../outside2"}]})
    run_agent(agent, AgentContext(session=session, task="t"))
    assert not (tmp_path / "outside2").exists()


@needs_isolation
def test_isolated_command_has_no_network_unless_allowed(
    session: TransactionalSession, listener: int
) -> None:
    off = command(session, f"{CONNECT} {listener}", "namespace")
    assert off.status is AgentStatus.FAILED
    assert "Connection refused" in (off.reason or "") or "unreachable" in (off.reason or "")
    on = command(session, f"{CONNECT} {listener}", "namespace", network=True)
    assert on.status is AgentStatus.FINISHED, on.reason


def test_isolation_none_lets_commands_write_outside_and_connect(
    session: TransactionalSession, tmp_path: Path, listener: int
) -> None:
    """Documented: with ``sandbox.isolation: none`` commands run as the user, unconfined."""
    result = command(session, f"echo pwned > ../outside && {CONNECT} {listener}", "none")
    assert result.status is AgentStatus.FINISHED, result.reason
    assert (tmp_path / "outside").read_text() == "pwned\n"


def test_isolation_namespace_without_a_mechanism_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(SandboxError) as err:
        isolation.resolve("namespace", search_path=str(tmp_path))  # no bwrap there
    text = str(err.value)
    assert "sandbox.isolation: namespace" in text and "bubblewrap" in text
    assert "sandbox.isolation: auto" in text
    auto = isolation.resolve("auto", search_path=str(tmp_path))
    assert not auto.active and "bubblewrap" in auto.note


def test_summary_says_which_isolation_was_in_force(tmp_path: Path) -> None:
    proj = make_project(tmp_path)
    cfg = config(tmp_path, proj, policy="bfs", budget={"expansions": 1})
    cfg["strategies"] = {
        "w": {"kind": "scripted", "steps": [{"run": "echo pwned > ../outside", "check": False}]}
    }
    out = run(cfg, tmp_path)
    iso = json.loads((out.run_dir / "summary.json").read_text())["isolation"]
    assert iso["mode"] == "auto"
    if AVAILABLE is None:
        assert iso["mechanism"] == "bwrap" and iso["network"] is False
        assert not (tmp_path / "outside").exists()
    else:
        assert iso["mechanism"] == "none" and AVAILABLE in iso["note"]


@needs_isolation
def test_isolated_command_past_its_timeout_is_killed_with_what_it_started(
    session: TransactionalSession, ws: Path
) -> None:
    session.isolation = isolation.resolve("namespace")
    agent = build_agent(
        {
            "kind": "command",
            "command": "(while true; do echo x >> loop.txt; sleep 0.01; done) & wait",
            "timeout": 0.5,
        }
    )
    result = run_agent(agent, AgentContext(session=session, task="t"))
    assert result.status is AgentStatus.FAILED and "timed out" in (result.reason or "")
    assert not (ws / "loop.txt").exists()  # the failed step was rolled back
    time.sleep(0.5)  # a loop still running would have written loop.txt again by now
    assert not (ws / "loop.txt").exists()


@needs_isolation
def test_isolated_command_still_finds_programs_that_live_under_tmp(
    session: TransactionalSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CI keeps its virtual environment under /tmp: the private /tmp must not hide it."""
    tools = tmp_path / "venv" / "bin"
    tools.mkdir(parents=True)
    (tools / "my-tool").write_text("#!/bin/sh\necho tool-ran > made-by-tool.txt\n")
    (tools / "my-tool").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    ran = command(session, "my-tool", "namespace")
    assert ran.status is AgentStatus.FINISHED, ran.reason
    assert (Path(session.workspace) / "made-by-tool.txt").read_text() == "tool-ran\n"
    write = command(session, f"echo no > {tools}/not-allowed", "namespace")
    assert write.status is AgentStatus.FAILED  # its folder is visible, but read-only
    assert not (tools / "not-allowed").exists()


@needs_isolation
def test_isolated_command_may_write_the_configured_writable_folders(
    session: TransactionalSession, tmp_path: Path
) -> None:
    cache = tmp_path / "tool-cache"
    cache.mkdir()
    result = command(session, f"echo kept > {cache}/entry", "namespace", writable=[str(cache)])
    assert result.status is AgentStatus.FINISHED, result.reason
    assert (cache / "entry").read_text() == "kept\n"
    with pytest.raises(SandboxError, match="sandbox.writable: .* is not a folder"):
        isolation.resolve("auto", writable=[str(tmp_path / "missing")])


def test_run_requiring_namespace_isolation_where_none_works_fails_before_any_run_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = make_project(tmp_path)
    cfg = config(tmp_path, proj, policy="bfs", budget={"expansions": 1})
    cfg["sandbox"] = {"isolation": "namespace"}
    monkeypatch.setenv("PATH", str(tmp_path / "no-bwrap-here"))
    with pytest.raises(SandboxError, match="sandbox.isolation: namespace"):
        run(cfg, tmp_path)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
