"""Per-instance environments: set-up commands run once per environment key into a cached venv.

The key is SWE-bench's (repo, version, environment_setup_commit) plus the commands themselves and
the interpreter. Set-up runs in a virtual environment created with ``--system-site-packages`` (so
the running interpreter's test tools stay visible), in a copy of the repository at the
environment commit kept next to it, with its own timeout and log. A failed set-up is recorded
(``failed`` + the log) and every instance of that key becomes an ``error`` row. Instances without
set-up commands use the running interpreter as is.

Where the ``swebench`` package is installed, its per-repo/version specs (install steps, test
command) and its log parsers are used for instances of the repositories it knows (see
``swebench_specs``, ``swebench_parser``). The driver looks the specs up once for the whole batch
(``look_up``) and hands each worker its instance's answer, so that a worker imports swebench only
for an instance that uses it (the package pulls in pandas, datasets and docker: about a second
of start-up and 150 MB in every worker, which also makes each fork of a worker slower).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import site
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from treesearch import sandbox
from treesearch.eval.instances import Instance

__all__ = [
    "EnvResult",
    "EnvSpec",
    "Known",
    "env_spec_for",
    "look_up",
    "prepare_env",
    "swebench_parser",
]


@dataclass(frozen=True)
class EnvSpec:
    """What an instance's environment needs."""

    repo: str
    version: str
    setup_commit: str | None
    pre_install: tuple[str, ...]
    install: tuple[str, ...]
    source: str
    """``instance`` (its own fields), ``swebench`` (the package's specs) or ``none``."""

    @property
    def needed(self) -> bool:
        return bool(self.pre_install or self.install)

    def key(self) -> str:
        blob = json.dumps(
            [
                self.repo,
                self.version,
                self.setup_commit,
                self.pre_install,
                self.install,
                sys.executable,
            ]
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class EnvResult:
    """A ready environment (``env`` holds the variables test runs need) or why there is none."""

    env: Mapping[str, str]
    log: Path | None
    error: str | None = None
    reused: bool = False


@dataclass(frozen=True)
class Known:
    """What the driver looked up for one instance before it is sent to a worker."""

    swebench_spec: dict[str, Any] | None
    """SWE-bench's spec for the instance's (repo, version); ``None`` when the installed
    swebench has none, or swebench is not installed."""


def look_up(items: Iterable[Instance]) -> dict[str, Known]:
    """``Known`` of each instance, by ``instance_id`` (imports swebench once, here)."""
    return {
        i.instance_id: Known(swebench_specs(i.repo, i.version) if i.repo else None) for i in items
    }


_SPECS: list[Mapping[str, Any] | None] = []


def _may_have_specs() -> bool:
    """Can the installed swebench hold per-version specs? Its releases 5.x and later have no
    ``MAP_REPO_VERSION_TO_SPECS`` anywhere in ``swebench/harness/constants``: importing the
    package (a second or two: pandas, datasets, docker) to find that out would be for nothing.
    Reads the package's files without importing it."""
    found = importlib.util.find_spec("swebench")  # a top-level name: nothing is imported
    if found is None or not found.submodule_search_locations:
        return False
    for folder in found.submodule_search_locations:
        constants = Path(folder) / "harness" / "constants"
        files = sorted(constants.glob("*.py")) or [constants.with_suffix(".py")]
        for file in files:
            with contextlib.suppress(OSError):
                if "MAP_REPO_VERSION_TO_SPECS" in file.read_text(encoding="utf-8"):
                    return True
    return False


def _swebench_spec_map() -> Mapping[str, Any] | None:
    # Imported once per process (the package takes a second or two to import).
    if not _SPECS and not _may_have_specs():
        _SPECS.append(None)
    if not _SPECS:
        try:
            from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS  # type: ignore
        except Exception:  # noqa: BLE001 - not installed, or a release without per-version specs
            _SPECS.append(None)
        else:
            _SPECS.append(MAP_REPO_VERSION_TO_SPECS)
    return _SPECS[0]


def swebench_specs(repo: str, version: str) -> dict[str, Any] | None:
    """SWE-bench's spec for (repo, version) when the installed ``swebench`` has one (its 2.x-4.x
    releases keep them in ``swebench.harness.constants``; 5.x moved set-up to Dockerfiles)."""
    specs = _swebench_spec_map()
    spec = (specs or {}).get(repo, {}).get(version)
    return dict(spec) if isinstance(spec, Mapping) else None


def swebench_parser(repo: str) -> Callable[[str], dict[str, str]] | None:
    """SWE-bench's log parser for ``repo`` (test name -> PASSED/FAILED/...), when installed."""
    try:
        from swebench.harness.log_parsers import MAP_REPO_TO_PARSER  # type: ignore
    except Exception:  # noqa: BLE001
        return None
    fn = MAP_REPO_TO_PARSER.get(repo)
    if fn is None:
        return None

    def parse(log: str) -> dict[str, str]:
        return dict(fn(log, None))

    return parse


def env_spec_for(inst: Instance, known: Known | None = None) -> EnvSpec:
    """The instance's own set-up commands, else SWE-bench's spec for its repo and version
    (``known``'s when the driver looked it up, else looked up here)."""
    repo = inst.repo or f"local/{inst.instance_id}"
    if inst.pre_install or inst.install:
        return EnvSpec(
            repo,
            inst.version,
            inst.environment_setup_commit,
            inst.pre_install,
            inst.install,
            "instance",
        )
    if known is not None:
        spec = known.swebench_spec
    else:
        spec = swebench_specs(inst.repo, inst.version) if inst.repo else None
    if spec:
        pre = spec.get("pre_install") or []
        install: list[str] = []
        if spec.get("pip_packages"):
            install.append("python -m pip install " + " ".join(spec["pip_packages"]))
        if spec.get("install"):
            install.append(str(spec["install"]))
        return EnvSpec(
            repo,
            inst.version,
            inst.environment_setup_commit,
            tuple(pre),
            tuple(install),
            "swebench",
        )
    return EnvSpec(repo, inst.version, inst.environment_setup_commit, (), (), "none")


def interpreter_vars() -> dict[str, str]:
    """Without set-up commands, ``python`` in test commands is the running interpreter (its
    folder first on ``PATH``), whatever the shell that started the batch has first."""
    path = os.environ.get("PATH", os.defpath)
    return {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{path}"}


def _venv_vars(venv: Path) -> dict[str, str]:
    path = os.environ.get("PATH", os.defpath)
    return {"VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}{os.pathsep}{path}"}


def prepare_env(
    spec: EnvSpec,
    root: Path,
    materialize: Callable[[Path], None],
    *,
    timeout: float,
) -> EnvResult:
    """Make (or reuse) the environment of ``spec`` under ``root``.

    ``materialize(dest)`` writes the source tree the set-up commands run in. Several processes
    may ask for the same key at once: one builds, the others wait on its lock and reuse it.
    """
    if not spec.needed:
        return EnvResult(interpreter_vars(), None)
    root.mkdir(parents=True, exist_ok=True)
    home = root / spec.key()
    log = root / f"{spec.key()}.log"
    with open(root / f"{spec.key()}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        venv = home / "venv"
        if (home / "ok").is_file():
            return EnvResult(_venv_vars(venv), log, reused=True)
        if (home / "failed").is_file():
            reason = (home / "failed").read_text(encoding="utf-8").strip()
            return EnvResult({}, log, f"{reason} (set-up of this environment failed before)")
        if home.exists():
            shutil.rmtree(home, ignore_errors=True)  # a set-up cut short: start again
        home.mkdir(parents=True)
        error = _build(spec, home, venv, log, materialize, timeout)
        if error is not None:
            (home / "failed").write_text(error + "\n", encoding="utf-8")
            return EnvResult({}, log, error)
        (home / "ok").write_text(json.dumps({"time": time.time()}) + "\n", encoding="utf-8")
        return EnvResult(_venv_vars(venv), log)


def _build(
    spec: EnvSpec,
    home: Path,
    venv: Path,
    log: Path,
    materialize: Callable[[Path], None],
    timeout: float,
) -> str | None:
    deadline = time.monotonic() + timeout
    src = home / "src"
    with open(log, "w", encoding="utf-8") as out:
        out.write(f"# environment {spec.key()}: {spec.repo} {spec.version} ({spec.source})\n")
        try:
            materialize(src)
        except Exception as exc:  # noqa: BLE001 - any failure here is the set-up's
            out.write(f"cannot write the source tree: {exc}\n")
            return f"environment set-up: cannot write the source tree: {exc}"
        steps = [f"{sys.executable} -m venv --system-site-packages {venv}"]
        steps += list(spec.pre_install) + list(spec.install)
        env = dict(os.environ)
        for i, cmd in enumerate(steps):
            left = deadline - time.monotonic()
            if left <= 0:
                out.write(f"$ {cmd}\n(not run: set-up timeout of {timeout:g}s spent)\n")
                return f"environment set-up timed out after {timeout:g}s (log: {log})"
            if i == 1:
                env.update(_venv_vars(venv))
                _see_parent_packages(venv)
            out.write(f"$ {cmd}\n")
            out.flush()
            res = sandbox.run(cmd, src, timeout=left, env=env, output_limit=256 * 1024)
            out.write(res.stdout)
            out.write(res.stderr)
            out.write(f"\n(exit {res.exit_code}, {res.seconds:.1f}s)\n")
            if res.timed_out:
                return f"environment set-up timed out after {timeout:g}s at `{cmd}` (log: {log})"
            if not res.ok:
                return f"environment set-up failed: `{cmd}` exited {res.exit_code} (log: {log})"
    return None


def _see_parent_packages(venv: Path) -> None:
    # The running interpreter's packages (its test tools, treesearch's pytest probe) stay
    # importable in the new venv, after whatever the set-up installs there.
    found = sorted(venv.glob("lib/python*/site-packages"))
    if not found:
        return
    parents = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (found[0] / "_treesearch_parent.pth").write_text("".join(p + "\n" for p in parents))


def remove_tree(path: Path) -> None:
    """Remove a folder that may hold read-only folders."""
    for dirpath, dirs, _files in os.walk(path):
        for name in dirs:
            full = os.path.join(dirpath, name)
            if not os.path.islink(full):
                with contextlib.suppress(OSError):
                    os.chmod(full, 0o700)
    shutil.rmtree(path, ignore_errors=True)
