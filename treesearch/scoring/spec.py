"""``TestSpec``: what test command to run, where, for how long, and how to read its results."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from treesearch.errors import ConfigError
from treesearch.scoring._words import shell_words

DEFAULT_COMMAND = "python -m pytest -q"
DEFAULT_TIMEOUT = 600.0
RUNNERS = ("auto", "pytest", "generic")

# Bump when the runner changes in a way that changes results for the same spec and tree:
# cached runs of older versions are then ignored.
_RUNNER_VERSION = 2

_PYTEST_WORD = re.compile(r"^py\.?test(-?\d+(\.\d+)*)?$")


@dataclass(frozen=True)
class TestSpec:
    """How to run a test suite in a workspace. Built by ``from_config`` or directly."""

    __test__ = False  # not a pytest test class

    command: str | Sequence[str] = DEFAULT_COMMAND
    """The test command: a string runs through ``/bin/sh -c``; a tuple is an argument vector."""
    cwd: str = "."
    """Working directory, relative to the workspace (must stay inside it)."""
    timeout: float = DEFAULT_TIMEOUT
    """Seconds before the whole process group is ended and the run is a TIMEOUT."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment variables, on top of the inherited environment."""
    junit_xml: str | None = None
    """Path of the JUnit XML report the command writes (relative to ``cwd``). Leave unset for
    pytest: the runner then adds ``--junitxml`` with a temporary file outside the workspace.
    Whatever was at this path before the run is put back afterwards (never read as a result)."""
    tests: Sequence[str] = ()
    """Explicit test ids to run, appended (shell-quoted) to the end of the command line
    (pytest node ids for pytest)."""
    reruns: int = 0
    """Re-run tests whose outcome differs from the parent's this many times; a test whose
    outcome flips across the re-runs is marked flaky."""
    runner: str = "auto"
    """``pytest`` (add ``--junitxml`` and friends), ``generic`` (run as is; read ``junit_xml``
    if set, else only the exit code) or ``auto`` (pytest when the command invokes pytest)."""

    def __post_init__(self) -> None:
        # Direct construction gets the same checks as a config file.
        _command(self.command, "TestSpec.command")
        _cwd(self.cwd, "TestSpec.cwd")
        _timeout(self.timeout, "TestSpec.timeout")
        _junit(self.junit_xml, "TestSpec.junit_xml")
        _tests(self.tests, "TestSpec.tests")
        _reruns(self.reruns, "TestSpec.reruns")
        _runner(self.runner, "TestSpec.runner")
        # Normalise the containers so that equal specs compare (and fingerprint) equal.
        if not isinstance(self.command, str):
            object.__setattr__(self, "command", tuple(self.command))
        env = _env(self.env, "TestSpec.env")
        object.__setattr__(self, "env", MappingProxyType(dict(sorted(env.items()))))
        object.__setattr__(self, "timeout", float(self.timeout))
        object.__setattr__(self, "tests", tuple(self.tests))

    def __hash__(self) -> int:
        return hash(self.fingerprint())

    @property
    def is_pytest(self) -> bool:
        """True when the runner adds pytest's report options (see ``runner``)."""
        if self.runner != "auto":
            return self.runner == "pytest"
        if isinstance(self.command, str):
            try:
                words = shell_words(self.command)
            except ValueError:
                return False
        else:
            words = list(self.command)
        return any(_PYTEST_WORD.match(os.path.basename(w)) for w in words)

    @property
    def display_command(self) -> str:
        """The command as one shell-quoted line."""
        return self.command if isinstance(self.command, str) else shlex.join(self.command)

    def canonical(self) -> dict[str, Any]:
        """The fields that affect results, as plain JSON values."""
        return {
            "version": _RUNNER_VERSION,
            "command": self.command if isinstance(self.command, str) else list(self.command),
            "cwd": self.cwd,
            "timeout": self.timeout,
            "env": dict(self.env),
            "junit_xml": self.junit_xml,
            "tests": list(self.tests),
            "reruns": self.reruns,
            "runner": "pytest" if self.is_pytest else "generic",
        }

    def fingerprint(self) -> str:
        """sha256 (hex) of the canonical JSON of ``canonical()``: stable across processes."""
        text = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def to_config(self) -> dict[str, Any]:
        """The spec as a config dict (``from_config`` reads it back)."""
        d: dict[str, Any] = {
            "command": self.command if isinstance(self.command, str) else list(self.command),
            "cwd": self.cwd,
            "timeout": self.timeout,
            "env": dict(self.env),
            "tests": list(self.tests),
            "reruns": self.reruns,
            "runner": self.runner,
        }
        if self.junit_xml is not None:
            d["junit_xml"] = self.junit_xml
        return d

    @classmethod
    def from_config(
        cls, d: Mapping[str, Any] | None, source: str = "<config>", *, where: str = ""
    ) -> TestSpec:
        """Build a spec from a config mapping; ``ConfigError`` names source, key and what is
        allowed. ``where`` is the key path of ``d`` inside the file (for messages)."""
        if d is None:
            d = {}
        if not isinstance(d, Mapping):
            raise ConfigError(f"{_at(source, where)}: must be a mapping, got {_kind(d)}")
        unknown = sorted(str(k) for k in d if k not in _KEYS)
        if unknown:
            raise ConfigError(
                f"{_at(source, where)}: unknown key(s) {', '.join(unknown)}; "
                f"allowed: {', '.join(_KEYS)}"
            )
        kwargs: dict[str, Any] = {}
        for key in _KEYS:
            if key in d:
                kwargs[key] = _KEYS[key](d[key], _at(source, _join(where, key)))
        return cls(**kwargs)


def _at(source: str, where: str) -> str:
    return f"{source}: {where}" if where else source


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _kind(value: object) -> str:
    return f"{type(value).__name__} {value!r}"[:120]


def _command(value: object, at: str) -> str | tuple[str, ...]:
    if isinstance(value, str):
        if not value.strip():
            raise ConfigError(f"{at}: must not be empty")
        return value
    if isinstance(value, Sequence) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ConfigError(
        f"{at}: must be a string (run by /bin/sh) or a non-empty list of strings, "
        f"got {_kind(value)}"
    )


def _cwd(value: object, at: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{at}: must be a path relative to the workspace, got {_kind(value)}")
    path = PurePosixPath(value)
    if path.is_absolute() or ".." in path.parts:
        raise ConfigError(
            f"{at}: must be a relative path inside the workspace (no leading / and no ..), "
            f"got {value!r}"
        )
    return value


_MAX_TIMEOUT = 366 * 86400


def _timeout(value: object, at: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
        or value > _MAX_TIMEOUT  # larger values overflow the OS's timers
    ):
        raise ConfigError(
            f"{at}: must be a positive number of seconds up to {_MAX_TIMEOUT} (a year), "
            f"got {_kind(value)}"
        )
    return float(value)


def _env(value: object, at: str) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"{at}: must be a mapping of variable names to strings, got {_kind(value)}"
        )
    out: dict[str, str] = {}
    for k, v in value.items():
        if not isinstance(k, str) or not k or "=" in k or "\0" in k:
            raise ConfigError(f"{at}: invalid variable name {k!r}")
        # YAML reads `PYTHONHASHSEED: 0` as a number; numbers are taken as their text.
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise ConfigError(f"{at}.{k}: must be a string or a number, got {_kind(v)}")
        if isinstance(v, str) and "\0" in v:
            raise ConfigError(f"{at}.{k}: must not contain NUL")
        out[k] = str(v)
    return out


def _junit(value: object, at: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(
            f"{at}: must be a file path (relative to cwd) or null, got {_kind(value)}"
        )
    return value


def _tests(value: object, at: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigError(f"{at}: must be a list of test ids, got {_kind(value)}")
    for v in value:
        if not isinstance(v, str) or not v:
            raise ConfigError(f"{at}: every test id must be a non-empty string, got {_kind(v)}")
    return tuple(value)


def _reruns(value: object, at: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 20:
        raise ConfigError(f"{at}: must be an integer from 0 to 20, got {_kind(value)}")
    return value


def _runner(value: object, at: str) -> str:
    if value not in RUNNERS:
        raise ConfigError(f"{at}: must be one of {', '.join(RUNNERS)}, got {_kind(value)}")
    return str(value)


_KEYS: dict[str, Any] = {
    "command": _command,
    "cwd": _cwd,
    "timeout": _timeout,
    "env": _env,
    "junit_xml": _junit,
    "tests": _tests,
    "reruns": _reruns,
    "runner": _runner,
}


_AT = "\x00"


def _checked(check: Any, value: object) -> Any:
    """Run a ``_KEYS`` check for a pydantic validator: its error as a ``ValueError`` without
    the location (pydantic's error carries the key path)."""
    try:
        return check(value, _AT)
    except ConfigError as exc:
        raise ValueError(str(exc).removeprefix(_AT).removeprefix(": ").removeprefix(".")) from None


class TestSpecConfig(BaseModel):
    """A ``TestSpec`` as a config section (``scoring.search_tests``, ``scoring.grade_tests``,
    a mutation agent's ``tests``): the same fields, checked by the same rules."""

    __test__ = False  # not a pytest test class
    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str | tuple[str, ...] = DEFAULT_COMMAND
    """The test command: a string runs through ``/bin/sh -c``; a list is an argument vector."""
    cwd: str = "."
    """Working directory, relative to the workspace."""
    timeout: float = DEFAULT_TIMEOUT
    """Seconds before the run is ended and counted as a TIMEOUT."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables (numbers are taken as their text)."""
    junit_xml: str | None = None
    """JUnit XML report the command writes (relative to ``cwd``); unset for pytest."""
    tests: tuple[str, ...] = ()
    """Explicit test ids appended to the command."""
    reruns: int = 0
    """Re-runs of tests whose outcome differs from the parent's (flaky detection)."""
    runner: str = "auto"
    """``auto``, ``pytest`` or ``generic``."""

    @field_validator("*", mode="before")
    @classmethod
    def _check(cls, value: object, info: ValidationInfo) -> Any:
        return _checked(_KEYS[str(info.field_name)], value)

    def to_spec(self) -> TestSpec:
        """The ``TestSpec`` these fields describe."""
        return TestSpec(**self.model_dump())
