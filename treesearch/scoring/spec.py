"""``TestSpec``: what test command to run, where, for how long, and how to read its results."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    field_validator,
)

from treesearch.scoring._words import shell_words
from treesearch.validation import MAX_SECONDS, Number, check_command, config_error, shown

DEFAULT_COMMAND = "python -m pytest -q"
DEFAULT_TIMEOUT = 600.0

# Bump when the runner changes in a way that changes results for the same spec and tree:
# cached runs of older versions are then ignored.
_RUNNER_VERSION = 2

_PYTEST_WORD = re.compile(r"^py\.?test(-?\d+(\.\d+)*)?$")


class TestSpec(BaseModel):
    """How to run a test suite in a workspace: the ``scoring.search_tests`` and
    ``scoring.grade_tests`` sections and a mutation agent's ``tests``, or built directly (the
    same checks either way: ``from_config`` says a bad value as a ``ConfigError``, the
    constructor as pydantic's ``ValidationError``). Each field's description is what a bad
    value is told."""

    __test__ = False  # not a pytest test class
    model_config = ConfigDict(extra="forbid", frozen=True)

    command: Annotated[str | tuple[str, ...], BeforeValidator(check_command)] = DEFAULT_COMMAND
    """The test command: a string runs through ``/bin/sh -c``; a tuple is an argument vector."""
    cwd: Annotated[str, Strict()] = Field(
        ".", description="a relative path inside the workspace (no leading / and no ..)"
    )
    """Working directory, relative to the workspace (must stay inside it)."""
    timeout: Number = Field(
        DEFAULT_TIMEOUT,
        gt=0,
        le=MAX_SECONDS,
        description=f"a positive number of seconds up to {MAX_SECONDS} (a year)",
    )
    """Seconds before the whole process group is ended and the run is a TIMEOUT."""
    env: dict[str, str] = Field(
        default_factory=dict,
        description="a mapping of variable names to strings (numbers are taken as their text)",
    )
    """Extra environment variables, on top of the inherited environment."""
    junit_xml: Annotated[str, Strict(), Field(min_length=1)] | None = Field(
        None, description="a file path (relative to cwd) or null"
    )
    """Path of the JUnit XML report the command writes (relative to ``cwd``). Leave unset for
    pytest: the runner then adds ``--junitxml`` with a temporary file outside the workspace.
    Whatever was at this path before the run is put back afterwards (never read as a result)."""
    tests: tuple[Annotated[str, Strict(), Field(min_length=1)], ...] = Field(
        (), description="a list of test ids (non-empty strings)"
    )
    """Explicit test ids to run, appended (shell-quoted) to the end of the command line
    (pytest node ids for pytest)."""
    reruns: Annotated[int, Strict()] = Field(0, ge=0, le=20, description="an integer from 0 to 20")
    """Re-run tests whose outcome differs from the parent's this many times; a test whose
    outcome flips across the re-runs is marked flaky."""
    runner: Literal["auto", "pytest", "generic"] = Field(
        "auto", description="one of auto, pytest, generic"
    )
    """``pytest`` (add ``--junitxml`` and friends), ``generic`` (run as is; read ``junit_xml``
    if set, else only the exit code) or ``auto`` (pytest when the command invokes pytest)."""

    @field_validator("cwd")
    @classmethod
    def _cwd(cls, value: str) -> str:
        path = PurePosixPath(value)
        if not value or path.is_absolute() or ".." in path.parts:
            raise ValueError(
                "must be a relative path inside the workspace (no leading / and no ..), "
                f"got {value!r}"
            )
        return value

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value  # pydantic says it must be a mapping
        out: dict[str, str] = {}
        for k, v in value.items():
            if not isinstance(k, str) or not k or "=" in k or "\0" in k:
                raise ValueError(f"invalid variable name {k!r}")
            # YAML reads `PYTHONHASHSEED: 0` as a number; numbers are taken as their text.
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                raise ValueError(f"{k}: must be a string or a number, got {shown(v)}")
            if isinstance(v, str) and "\0" in v:
                raise ValueError(f"{k}: must not contain NUL")
            out[k] = str(v)
        return dict(sorted(out.items()))  # equal specs compare and fingerprint equal

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
        try:
            return cls.model_validate({} if d is None else d)
        except ValidationError as exc:
            raise config_error(exc, cls, source, where) from None
