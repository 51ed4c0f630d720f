"""The set-up table: how to build the environment of each (repository, version), from a YAML file.

Published SWE-bench rows carry no set-up commands. Where the installed ``swebench`` release has
no spec for a repository and version (its 5.x releases have none at all), the user passes a
table (``experiments/swebench/setup-dev.yaml`` is the development set's)::

    marshmallow-code/marshmallow:
      "2.20":                       # versions are text: quote them ("2.20", not 2.20 = 2.2)
        packages: ["pytest==7.4.4", pytz]   # `python -m pip install` into the venv, one
                                            # requirement per item
        pre_install: []             # shell commands run first (cwd = checkout of
                                    # environment_setup_commit, the venv's python first on PATH)
        install: []                 # shell commands after the packages
        shims: ["import collections, collections.abc; ..."]  # lines of a .pth file in the venv
        test_cmd: "python -m pytest -rA -p no:cacheprovider"  # the grade command (test files
                                                              # get appended)
        env: {PYTEST_DISABLE_PLUGIN_AUTOLOAD: "1"}            # variables of the test runs

Every field is optional; unknown fields are errors. The file is read and checked once
(``load_setup_table``); each problem is one line ``FILE: owner/name: VERSION: field: problem``
with what to do about it. ``SetupTable.entry(repo, version)`` gives a ``SetupEntry``: a plain,
frozen, picklable value that travels to the workers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    StringConstraints,
    ValidationError,
    field_validator,
)

from treesearch.errors import ConfigError

__all__ = ["SetupEntry", "SetupTable", "SetupTableError", "load_setup_table"]

_REPO = r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$"
_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_STR_TAG = "tag:yaml.org,2002:str"


class SetupTableError(ConfigError):
    """A set-up table that cannot be used (one line per problem:
    ``FILE: owner/name: VERSION: field: problem``)."""


@dataclass(frozen=True)
class SetupEntry:
    """How to set up one (repository, version): see the module's documentation."""

    repo: str
    version: str
    packages: tuple[str, ...] = ()
    pre_install: tuple[str, ...] = ()
    install: tuple[str, ...] = ()
    shims: tuple[str, ...] = ()
    test_cmd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict, hash=False)
    where: str = ""
    """``FILE: owner/name: VERSION``: where the entry came from."""


@dataclass(frozen=True)
class SetupTable:
    """A checked set-up table."""

    path: Path
    entries: Mapping[tuple[str, str], SetupEntry]

    def entry(self, repo: str, version: str) -> SetupEntry | None:
        """The entry of ``repo`` (``owner/name``) at ``version``, or ``None``."""
        return self.entries.get((repo, version))


# --- the schema -----------------------------------------------------------------------------


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    packages: list[str] = Field(
        default_factory=list,
        description="a list of requirements for `python -m pip install`, one per item "
        '(e.g. ["pytest==7.4.4", pytz])',
    )
    pre_install: list[str] = Field(
        default_factory=list,
        description="a list of shell commands (run before the packages are installed)",
    )
    install: list[str] = Field(
        default_factory=list,
        description="a list of shell commands (run after the packages are installed)",
    )
    shims: list[str] = Field(
        default_factory=list,
        description="a list of one-line `import ...` statements (each one line of a .pth file)",
    )
    test_cmd: str | None = Field(
        default=None,
        description='a shell command, e.g. "python -m pytest -rA -p no:cacheprovider"',
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description='a mapping of variable names to text values, e.g. {PYTHONHASHSEED: "0"}',
    )

    @field_validator("packages")
    @classmethod
    def _packages(cls, value: list[str]) -> list[str]:
        for i, req in enumerate(value):
            if not req.strip():
                raise ValueError(f"item {i} is empty: remove it")
            if "\n" in req:
                raise ValueError(f"item {i} spans several lines: give one requirement per item")
            if req.strip().startswith("-"):
                raise ValueError(
                    f"item {i} {req!r} is a pip option, not a requirement: put a full "
                    "`python -m pip install ...` command in `install` instead"
                )
        return [r.strip() for r in value]

    @field_validator("pre_install", "install")
    @classmethod
    def _commands(cls, value: list[str]) -> list[str]:
        for i, cmd in enumerate(value):
            if not cmd.strip():
                raise ValueError(f"item {i} is an empty command: remove it")
        return value

    @field_validator("shims")
    @classmethod
    def _shims(cls, value: list[str]) -> list[str]:
        for i, line in enumerate(value):
            if "\n" in line.strip() or "\r" in line.strip():
                raise ValueError(
                    f"item {i} spans several lines: a .pth line is one line (join statements "
                    "with `;`)"
                )
            if not line.strip().startswith(("import ", "import\t")):
                raise ValueError(
                    f"item {i} {line[:60]!r} does not start with `import `: Python runs a .pth "
                    "line only when it does (any other line is taken as a folder to add to "
                    'sys.path); write e.g. "import collections, collections.abc; ..."'
                )
        return [line.strip() for line in value]

    @field_validator("test_cmd")
    @classmethod
    def _test_cmd(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("is empty: give a command, or leave the field out")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not _VAR.match(name):
                raise ValueError(f"{name!r} is not a variable name (letters, digits and _)")
        return value


_RepoName = Annotated[str, StringConstraints(pattern=_REPO)]


class _Table(RootModel[dict[_RepoName, dict[str, _Entry]]]):
    model_config = ConfigDict(strict=True)


# --- loading --------------------------------------------------------------------------------


def load_setup_table(path: str | Path) -> SetupTable:
    """Read and check a set-up table (YAML).

    Raises:
        SetupTableError: unreadable file, bad YAML, or a bad key or field (every problem found,
            one per line).
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise SetupTableError(f"{p}: cannot read the set-up table: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise SetupTableError(f"{p}: the set-up table is not UTF-8 text") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SetupTableError(f"{p}: not valid YAML: {_one_line(str(exc))}") from None
    if data is None:
        raise SetupTableError(
            f"{p}: the set-up table is empty: give `owner/name:` keys, each with versions"
        )
    if not isinstance(data, dict):
        raise SetupTableError(
            f"{p}: the set-up table must be a mapping of `owner/name:` keys, got "
            f"{type(data).__name__}"
        )
    problems = _key_problems(node, str(p))
    if problems:
        raise SetupTableError("\n".join(problems))
    try:
        table = _Table.model_validate(data)
    except ValidationError as exc:
        raise SetupTableError("\n".join(_explain(str(p), e) for e in exc.errors())) from None
    entries: dict[tuple[str, str], SetupEntry] = {}
    for repo, versions in table.root.items():
        for version, e in versions.items():
            entries[(repo, version)] = SetupEntry(
                repo=repo,
                version=version,
                packages=tuple(e.packages),
                pre_install=tuple(e.pre_install),
                install=tuple(e.install),
                shims=tuple(e.shims),
                test_cmd=e.test_cmd,
                env=dict(e.env),
                where=f"{p}: {repo}: {version}",
            )
    return SetupTable(p, entries)


def _key_problems(node: Any, where: str) -> list[str]:
    """Keys the parsed data cannot show: a version YAML read as a number (``2.20`` -> 2.2), a
    key that is not text, and a key given twice (YAML keeps the last one silently)."""
    out: list[str] = []
    if not isinstance(node, yaml.MappingNode):
        return out
    out += _duplicates(node, [where])
    for repo_key, versions in node.value:
        repo = str(repo_key.value)
        if repo_key.tag != _STR_TAG:
            out.append(f"{where}: {repo}: a repository key must be text `owner/name`")
            continue
        if not isinstance(versions, yaml.MappingNode):
            continue  # the schema says what is wrong with it
        for version_key, _entry in versions.value:
            if version_key.tag == _STR_TAG:
                continue
            text = str(version_key.value)
            if isinstance(version_key, yaml.ScalarNode) and re.match(r"^[0-9.eE+_-]+$", text):
                read = yaml.safe_load(text)
                out.append(
                    f"{where}: {repo}: {text}: the version key was read as the number {read!r}; "
                    f'quote it: "{text}":'
                )
            else:
                out.append(f'{where}: {repo}: {text}: a version key must be text; quote it: "..."')
    return out


def _duplicates(node: yaml.MappingNode, path: list[str]) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for key, value in node.value:
        name = str(key.value) if isinstance(key, yaml.ScalarNode) else "?"
        if name in seen:
            out.append(
                ": ".join([*path, name])
                + ": given twice (YAML would keep only the last one); remove one"
            )
        seen.add(name)
        if isinstance(value, yaml.MappingNode):
            out += _duplicates(value, [*path, name])
    return out


def _explain(where: str, err: Mapping[str, Any]) -> str:
    loc = [str(x) for x in err["loc"]]
    kind, msg, given = err["type"], str(err["msg"]), err.get("input")
    if len(loc) >= 2 and loc[1] == "[key]":  # a repository key that is not owner/name
        return f"{where}: {loc[0]}: a repository key must look like owner/name"
    if len(loc) == 1:
        if kind == "dict_type":
            return (
                f"{where}: {loc[0]}: must be a mapping of versions to entries (e.g. "
                f'"1.0": {{packages: [...]}}), got {_shown(given)}'
            )
        return f"{where}: {loc[0]}: {msg}"
    if len(loc) == 2:
        return (
            f"{where}: {loc[0]}: {loc[1]}: must be a mapping of fields ("
            + ", ".join(_Entry.model_fields)
            + f"), got {_shown(given)}"
        )
    repo, version, name, *rest = loc
    head = f"{where}: {repo}: {version}: {name}"
    if kind == "extra_forbidden":
        return (
            f"{head}: unknown field; the fields are " + ", ".join(_Entry.model_fields) + " "
            "(check the spelling)"
        )
    desc = _Entry.model_fields[name].description if name in _Entry.model_fields else None
    if kind in ("value_error", "assertion_error"):
        return f"{head}: " + msg.removeprefix("Value error, ")
    if rest:
        if name == "env" and kind == "string_type":
            return f'{head}: {rest[0]}: must be text, got {_shown(given)}; quote it ("{given}")'
        return f"{head}: item {rest[0]}: must be text, got {_shown(given)}"
    return f"{head}: must be {desc}, got {_shown(given)}"


def _shown(value: Any) -> str:
    text = f"{type(value).__name__} {value!r}"
    return text if len(text) <= 80 else text[:77] + "..."


def _one_line(text: str) -> str:
    return " ".join(text.split())
