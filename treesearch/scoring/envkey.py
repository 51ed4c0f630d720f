"""The environment half of the score cache key: what, besides the tree and the spec, decides a
test run's result.

A cached run is only reused when the tests would run the same way: the same programs (the
command's executables as ``PATH`` resolves them, with their size and modification time), the
same Python installations (the listing of their ``site-packages``), the same interpreter running
treesearch, the same environment variables that steer Python and pytest, and the same content of
the ``cache_inputs`` files (files the tests read that the snapshot does not hold, such as ignored
fixtures or data). Anything else the tests depend on (a database, the network, files outside
the workspace, other environment variables) must be declared: variables in the spec's ``env``
(part of its fingerprint), files in ``cache_inputs``; or the cache switched off.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from treesearch._environ import inherited
from treesearch.errors import ConfigError
from treesearch.scoring._words import shell_words

ENV_VARS = (
    "PATH",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONNOUSERSITE",
    "PYTHONSAFEPATH",
    "PYTHONHASHSEED",
    "PYTHONWARNINGS",
    "PYTEST_ADDOPTS",
    "PYTEST_PLUGINS",
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
)
"""Inherited variables that are part of the key (the spec's own ``env`` overrides them)."""

_MAX_PROGRAMS = 16
_MAX_INPUT_FILES = 100_000
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SHELL_SPLIT = re.compile(r"[;&|()<>`\n]")

Memo = MutableMapping[tuple[str, int, int, int], str]
"""Content hashes of ``cache_inputs`` files by (path, size, mtime_ns, inode)."""


def check_cache_inputs(value: object, at: str) -> tuple[str, ...]:
    """``cache_inputs`` as a tuple of globs; ``ConfigError`` naming ``at`` when it is not a list
    of non-empty relative paths that stay inside the workspace."""
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigError(
            f"{at}: must be a list of glob paths relative to the workspace (e.g. "
            f"[data/**, fixtures/*.json]), got {type(value).__name__} {value!r}"[:240]
        )
    out: list[str] = []
    for item in value:
        if not isinstance(item, str) or not item.strip():
            raise ConfigError(f"{at}: every entry must be a non-empty glob path, got {item!r}")
        path = PurePosixPath(item)
        if path.is_absolute() or ".." in path.parts or "\0" in item:
            raise ConfigError(
                f"{at}: {item!r} must be a path relative to the workspace (no leading / and no ..)"
            )
        out.append(item)
    return tuple(out)


def environment_key(
    command: str | Sequence[str],
    spec_env: Mapping[str, str],
    workspace: str | os.PathLike[str],
    cache_inputs: Sequence[str] = (),
    *,
    environ: Mapping[str, str] | None = None,
    memo: Memo | None = None,
) -> str:
    """sha256 (hex) of ``environment(...)``."""
    data = environment(command, spec_env, workspace, cache_inputs, environ=environ, memo=memo)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def environment(
    command: str | Sequence[str],
    spec_env: Mapping[str, str],
    workspace: str | os.PathLike[str],
    cache_inputs: Sequence[str] = (),
    *,
    environ: Mapping[str, str] | None = None,
    memo: Memo | None = None,
) -> dict[str, Any]:
    """What the key is made of, as plain JSON values (see the module's docstring)."""
    env = inherited() if environ is None else dict(environ)
    env.update(spec_env)
    variables = {name: env.get(name) for name in ENV_VARS}
    programs: dict[str, Any] = {}
    prefixes: set[str] = set()
    for word in _program_words(command):
        found = _resolve(word, env.get("PATH"))
        if found is None:
            programs[word] = None
            continue
        real = os.path.realpath(found)
        programs[word] = [found, real, *_stat(real)]
        for path in (found, real):
            bin_dir = os.path.dirname(path)
            if os.path.basename(bin_dir) in ("bin", "Scripts"):
                prefixes.add(os.path.dirname(bin_dir))
    for name in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        if env.get(name):
            prefixes.add(env[name])
    return {
        "python": [os.path.realpath(sys.executable), sys.version],
        "variables": variables,
        "programs": programs,
        "packages": {p: _packages(p) for p in sorted(prefixes)},
        "inputs": _inputs(Path(workspace), cache_inputs, memo),
    }


def _program_words(command: str | Sequence[str]) -> list[str]:
    """The words of the command that may name programs: the first word of each simple command
    (after variable assignments) and every other word without a leading ``-``."""
    if isinstance(command, str):
        try:
            words = shell_words(_SHELL_SPLIT.sub(" ; ", command))
        except ValueError:
            words = command.split()
    else:
        words = list(command)
    out: list[str] = []
    for word in words:
        if word == ";" or word.startswith("-") or _ASSIGNMENT.match(word) or not word:
            continue
        if word not in out:
            out.append(word)
        if len(out) >= _MAX_PROGRAMS:
            break
    return out


def _resolve(word: str, path: str | None) -> str | None:
    if "/" in word:
        # A path into the workspace is covered by the tree; an absolute one is looked at.
        return word if os.path.isabs(word) and os.path.isfile(word) else None
    return shutil.which(word, path=path)


def _stat(path: str) -> list[int]:
    try:
        st = os.stat(path)
    except OSError:
        return [-1, -1]
    return [st.st_size, st.st_mtime_ns]


def _packages(prefix: str) -> list[Any]:
    """The installed distributions of a Python prefix: each ``site-packages`` folder's listing
    and modification time (an install, upgrade or removal changes both)."""
    out: list[Any] = []
    root = Path(prefix)
    for pattern in ("lib/python*/site-packages", "lib/python*/dist-packages", "Lib/site-packages"):
        for folder in sorted(root.glob(pattern)):
            try:
                names = sorted(
                    e.name
                    for e in os.scandir(folder)
                    if e.name.endswith((".dist-info", ".egg-info", ".pth", ".egg-link"))
                )
                mtime = folder.stat().st_mtime_ns
            except OSError:
                continue
            out.append([str(folder), mtime, hashlib.sha256("\n".join(names).encode()).hexdigest()])
    return out


def _inputs(workspace: Path, patterns: Sequence[str], memo: Memo | None) -> list[Any]:
    """Per glob, the matching files (relative path and content hash), sorted."""
    out: list[Any] = []
    budget = _MAX_INPUT_FILES
    for pattern in patterns:
        files: list[Any] = []
        try:
            matches = sorted(workspace.glob(pattern))
        except (OSError, ValueError):
            matches = []
        for match in matches:
            paths = [match] if not match.is_dir() else sorted(p for p in match.rglob("*"))
            for path in paths:
                if budget <= 0 or not path.is_file():
                    continue
                budget -= 1
                rel = path.relative_to(workspace).as_posix()
                files.append([rel, _digest(path, memo)])
        out.append([pattern, files])
    return out


def _digest(path: Path, memo: Memo | None) -> str:
    try:
        st = path.stat()
    except OSError:
        return "unreadable"
    key = (str(path), st.st_size, st.st_mtime_ns, st.st_ino)
    if memo is not None and key in memo:
        return memo[key]
    h = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return "unreadable"
    digest = h.hexdigest()
    if memo is not None:
        memo[key] = digest
    return digest
