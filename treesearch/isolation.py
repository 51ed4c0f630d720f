"""Isolation of agent commands: the workspace is the only writable path, and no network.

An agent's ``run`` tool and a ``command`` agent run shell commands the model or a script chose;
without isolation they can write anywhere the user can (``echo pwned > ../outside``) and reach
any host. Where the system allows it, ``sandbox.run`` wraps such a command in bubblewrap
(``bwrap``, unprivileged Linux namespaces; Debian/Ubuntu package ``bubblewrap``):

- the whole file system read-only (``--ro-bind / /``), the workspace (and the paths listed in
  ``sandbox.writable``) writable at the same paths, a private ``/tmp`` (where the interpreter,
  ``PATH`` or ``PYTHONPATH`` entries, e.g. a CI virtual environment, or a ``command`` agent's
  hand-off folder live under ``/tmp``, they are bound back read-only), a fresh ``/dev`` and
  ``/proc``;
- a new network namespace with only its own loopback (no network at all) unless
  ``sandbox.network: true``;
- a new PID namespace tied to the sandbox's process group: when the command is killed, so is
  everything it started (``--die-with-parent``).

Modes (config ``sandbox.isolation``): ``auto`` (default) uses the strongest mechanism that works
here and runs unisolated where none does, saying so in ``summary.json``; ``namespace`` requires
it and refuses to start otherwise; ``none`` runs commands as the user, unconfined. The test suite
and the scorer's test runs are not agent commands and are never wrapped.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from treesearch._environ import inherited
from treesearch.errors import SandboxError

__all__ = ["MODES", "Isolation", "NO_ISOLATION", "probe", "resolve"]

MODES = ("auto", "namespace", "none")


@dataclass(frozen=True)
class Isolation:
    """How agent commands are confined (``mechanism`` ``none``: not at all)."""

    mechanism: str = "none"
    """``bwrap`` or ``none``."""
    network: bool = True
    """Whether commands may use the network (always true without a mechanism)."""
    writable: tuple[str, ...] = ()
    """Paths writable besides the workspace (absolute)."""
    mode: str = "none"
    """The configured mode: ``auto``, ``namespace`` or ``none``."""
    note: str = ""
    """Why this mechanism (e.g. why ``auto`` found none)."""
    program: str | None = field(default=None, repr=False)
    """Path of the ``bwrap`` executable."""

    @property
    def active(self) -> bool:
        return self.mechanism != "none"

    def wrap(
        self, argv: Sequence[str], workspace: str, env: Mapping[str, str] | None = None
    ) -> list[str]:
        """``argv`` run inside the sandbox, with ``workspace`` writable (unchanged without a
        mechanism). ``env``: the command's environment (``None``: this process's), whose
        ``PATH`` and ``PYTHONPATH`` entries under ``/tmp`` stay visible (read-only)."""
        if not self.active:
            return list(argv)
        assert self.program is not None
        ws = os.path.realpath(workspace)
        out = [
            self.program,
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
        ]
        for path in _under_tmp(inherited() if env is None else env):
            out += ["--ro-bind", path, path]
        for path in (*self.writable, ws):
            real = os.path.realpath(path)
            if os.path.exists(real):
                out += ["--bind", real, real]
        if not self.network:
            out.append("--unshare-net")
        out += ["--unshare-pid", "--unshare-ipc", "--die-with-parent", "--chdir", ws, "--"]
        return out + list(argv)

    def describe(self) -> dict[str, Any]:
        """Plain data for ``summary.json``."""
        return {
            "mode": self.mode,
            "mechanism": self.mechanism,
            "writable": "anywhere the user can write"
            if not self.active
            else ["<workspace>", "/tmp (private)", *self.writable],
            "network": self.network,
            "note": self.note,
        }


NO_ISOLATION = Isolation()


HANDOFF_ENV = "TREESEARCH_HANDOFF"
"""The variable naming the folder of files a ``command`` agent is handed (the task, the node's
failing tests and their output): visible, read-only, inside the sandbox even under ``/tmp``."""


def _under_tmp(env: Mapping[str, str]) -> list[str]:
    """Folders under ``/tmp`` a command needs to see: the interpreter's prefixes, the entries
    of ``PATH``, ``PYTHONPATH`` and ``VIRTUAL_ENV``, and its hand-off folder (``HANDOFF_ENV``)
    (outermost ones only)."""
    wanted = [sys.prefix, sys.base_prefix, os.path.dirname(sys.executable)]
    for name in ("PATH", "PYTHONPATH"):
        wanted += [p for p in env.get(name, "").split(os.pathsep) if p]
    for name in ("VIRTUAL_ENV", HANDOFF_ENV):
        if env.get(name):
            wanted.append(env[name])
    found: list[str] = []
    for path in wanted:
        real = os.path.realpath(path)
        if real.startswith("/tmp/") and os.path.isdir(real):
            found.append(real)
    out: list[str] = []
    for path in sorted(set(found)):
        if not any(path.startswith(kept + "/") for kept in out):
            out.append(path)
    return out


def probe(program: str | None) -> str | None:
    """``None`` when ``program`` (a ``bwrap``) can build the sandbox here, else why not."""
    if program is None:
        return "bwrap (bubblewrap) is not installed: apt-get install bubblewrap, or dnf install bubblewrap"
    return _probe(program)


@functools.lru_cache(maxsize=8)
def _probe(program: str) -> str | None:
    argv = Isolation("bwrap", False, (), "namespace", "", program).wrap(["/bin/true"], "/")
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{program} cannot run: {exc}"
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return (
            f"{program} cannot create namespaces here ({why}); user namespaces may be "
            "disabled (sysctl kernel.unprivileged_userns_clone, or an AppArmor restriction)"
        )
    return None


def resolve(
    mode: str,
    *,
    network: bool = False,
    writable: Sequence[str] = (),
    search_path: str | None = None,
) -> Isolation:
    """The isolation for ``mode`` on this machine. ``search_path``: where to look for ``bwrap``
    (default: ``PATH``). Raises ``SandboxError`` when ``namespace`` is asked for and no
    mechanism works (naming what is missing and what to do)."""
    if mode not in MODES:
        raise SandboxError(f"sandbox.isolation must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "none":
        return Isolation(mode="none", note="sandbox.isolation: none (commands run unconfined)")
    for path in writable:
        if not os.path.isdir(path):
            raise SandboxError(
                f"sandbox.writable: {path} is not a folder; create it or remove it from the list"
            )
    program = shutil.which("bwrap", path=search_path)
    why = probe(program)
    if why is None:
        return Isolation("bwrap", network, tuple(writable), mode, "bubblewrap", program)
    if mode == "namespace":
        raise SandboxError(
            f"sandbox.isolation: namespace, but agent commands cannot be isolated here: {why}; "
            "install it, or set sandbox.isolation: auto (isolate where possible) or none"
        )
    return Isolation(mode="auto", note=f"no isolation available: {why}")
