"""Which test commands the warm runner can run, and how (``treesearch.scoring.warm``).

``plan`` reads a command the way ``/bin/sh`` (for a string) or ``exec`` (for an argument vector)
would start it: ``python -m pytest ...`` or a ``pytest`` script whose first line names a Python
interpreter, found on the run's ``PATH``; anything else is refused with the reason.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from treesearch.scoring._words import shell_words

__all__ = ["Launch", "ShellEnv", "plan", "register_boot", "shell_env", "shell_execs"]

_SHELL_SPECIAL = re.compile(r"[$`;&|<>(){}*?\[\]~!#\n\r]")
_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?$")
_PYTEST_SCRIPT = re.compile(r"^py\.?test$")


@dataclass(frozen=True)
class Launch:
    """How a test command runs in a warm child."""

    interpreter: str
    """The Python the cold command runs (the server's interpreter)."""
    mode: str
    """``module`` (``python -m pytest``), ``script`` (a ``pytest`` script) or ``command``
    (``python -c`` with a program of treesearch's own: ``register_boot``)."""
    target: str
    """The module name, the script's path, or the ``-c`` program."""
    args: tuple[str, ...]
    """pytest's arguments."""
    orig_argv: tuple[str, ...]
    """``sys.orig_argv`` of the cold interpreter."""
    argv0: str = ""
    """``sys.argv[0]`` of a script."""
    shell: bool = False
    """The command is a shell line: a signal's death reads as the shell reports it."""


_BOOTS: set[str] = set()


def register_boot(code: str) -> None:
    """Let ``python -c code ...`` run warm: ``code`` is a program of treesearch's own that runs
    pytest as ``python -m pytest`` would (the fault localisation's coverage run). No other
    ``-c`` program does: the warm child runs it in a process that has imported pytest."""
    _BOOTS.add(code)


def plan(command: str | Sequence[str], env: Mapping[str, str], cwd: str) -> Launch | str:
    """How ``command`` runs warm with environment ``env`` in ``cwd``, or why it cannot."""
    shell = isinstance(command, str)
    if isinstance(command, str):
        if _SHELL_SPECIAL.search(command):
            return "the test command uses shell features (expansions, redirections, pipes...)"
        try:
            words = shell_words(command)
        except ValueError:
            return "the test command is not a plain shell line"
    else:
        words = list(command)
    if not words:
        return "the test command is empty"
    first = words[0]
    if "=" in first and not shell:
        return "the test command does not start with a program"
    if "=" in first:
        return "the test command sets variables before its program"
    path = env.get("PATH", os.defpath)
    name = os.path.basename(first)
    if _PYTHON.match(name):
        interpreter = _find(first, path, cwd)
        if interpreter is None:
            return f"{first} was not found"
        if len(words) >= 3 and words[1] == "-c" and words[2] in _BOOTS:
            return Launch(
                interpreter, "command", words[2], tuple(words[3:]), (first, *words[1:]), shell=shell
            )
        if len(words) < 3 or words[1] != "-m" or words[2] != "pytest":
            return "only `python -m pytest ...` runs warm (no interpreter options)"
        return Launch(
            interpreter, "module", "pytest", tuple(words[3:]), (first, *words[1:]), shell=shell
        )
    if _PYTEST_SCRIPT.match(name):
        script = _find(first, path, cwd)
        if script is None:
            return f"{first} was not found"
        interpreter = _shebang(script, path)
        if interpreter is None:
            return f"{script} is not a Python script with a plain interpreter line"
        return Launch(
            interpreter,
            "script",
            os.path.abspath(os.path.join(cwd, script)),
            tuple(words[1:]),
            (interpreter, first if "/" in first else script, *words[1:]),
            argv0=first if "/" in first else script,
            shell=shell,
        )
    return "only pytest commands run warm"


def _find(word: str, path: str, cwd: str) -> str | None:
    if "/" in word:
        full = os.path.normpath(os.path.join(cwd, word))
        return full if os.path.isfile(full) and os.access(full, os.X_OK) else None
    return shutil.which(word, path=path)


def _shebang(script: str, path: str) -> str | None:
    try:
        with open(script, "rb") as handle:
            line = handle.readline(512)
    except OSError:
        return None
    if not line.startswith(b"#!"):
        return None
    words = line[2:].decode("utf-8", "replace").split()
    if len(words) == 2 and os.path.basename(words[0]) == "env":
        found = shutil.which(words[1], path=path)
        words = [found] if found else []
    if len(words) != 1 or not _PYTHON.match(os.path.basename(words[0])):
        return None
    return words[0] if os.path.isabs(words[0]) else None


@functools.lru_cache(maxsize=1)
def shell_execs() -> bool:
    """Whether ``/bin/sh -c 'cmd'`` replaces itself by a lone command (bash does, dash not):
    then a signal's death of the tests reaches us as such, else as the shell's 128 + n."""
    done = subprocess.run(
        ["/bin/sh", "-c", "/bin/sh -c 'kill -TERM $$'"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=30,
        check=False,
    )
    return done.returncode < 0


def shell_env(env: Mapping[str, str], cwd: str, launch: Launch) -> dict[str, str] | None:
    """The environment ``/bin/sh -c`` gives the program it runs in ``cwd`` (it sets ``PWD``;
    bash also ``SHLVL`` and ``_``), or None when it cannot be read."""
    program = shutil.which("env", path=env.get("PATH", os.defpath))
    if program is None:
        return None
    try:
        done = subprocess.run(
            ["/bin/sh", "-c", "env -0"],
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    out: dict[str, str] = {}
    for item in done.stdout.split(b"\0"):
        if item:
            key, _, value = item.partition(b"=")
            out[os.fsdecode(key)] = os.fsdecode(value)
    if out.get("_") == program:  # bash names the program it runs there: ours, not env's
        out["_"] = launch.interpreter if launch.mode == "module" else launch.argv0
    return out


# Variables a run sets for itself (its plugin files, its import path) that /bin/sh passes on as
# they are: their values stay out of ``ShellEnv``'s key.
_PER_RUN = ("PYTHONPATH", "PYTEST_PLUGINS")
_PER_RUN_PREFIX = "TREESEARCH_"
# Variables that make /bin/sh run a file first (whose effect may depend on any value): no cache.
_SOURCED = ("ENV", "BASH_ENV")


class ShellEnv:
    """``shell_env`` with its answers kept: a run's environment differs from the last one's
    only in the values of its own plugin variables, which the shell passes on unchanged, so
    ``/bin/sh`` runs again only for another folder, another set of names or another value of
    any other variable (or another ``/bin/sh``). Each kept answer was checked to pass those
    values through."""

    def __init__(self) -> None:
        self._answers: dict[tuple[object, ...], dict[str, str]] = {}

    def __call__(self, env: Mapping[str, str], cwd: str, launch: Launch) -> dict[str, str] | None:
        if any(name in env for name in _SOURCED):
            return shell_env(env, cwd, launch)
        per_run = sorted(n for n in env if n in _PER_RUN or n.startswith(_PER_RUN_PREFIX))
        try:
            shell = os.stat("/bin/sh")
        except OSError:
            return shell_env(env, cwd, launch)
        fixed = tuple(sorted((k, v) for k, v in env.items() if k not in per_run))
        program = (launch.mode, launch.interpreter, launch.argv0)  # what `_` may name
        key = (cwd, program, shell.st_ino, shell.st_mtime_ns, tuple(per_run), fixed)
        answer = self._answers.get(key)
        if answer is None:
            out = shell_env(env, cwd, launch)
            if out is None or any(out.get(n) != env[n] for n in per_run):
                return out
            if len(self._answers) >= 64:
                self._answers.clear()
            self._answers[key] = answer = out
        out = dict(answer)
        for name in per_run:
            out[name] = env[name]
        return out
