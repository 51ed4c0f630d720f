"""Instance sets: SWE-bench's own format (JSON or JSONL), read and checked line by line.

An instance carries ``instance_id``, ``repo`` + ``base_commit`` (or, in the local form, a
``workspace`` folder), ``patch`` (the gold patch: never shown to the search), ``test_patch`` (the
held-out tests), ``FAIL_TO_PASS`` and ``PASS_TO_PASS`` (lists, or the JSON-encoded strings the
published files use), ``problem_statement``, ``version``, ``environment_setup_commit`` and
``hints_text``. Local extensions: ``pre_install`` and ``install`` (set-up commands, a string or a
list) and ``search_tests`` (this instance's search-test command, in place of the config's
``scoring.search_tests.command``: a way to give a search a signal). Other fields are kept in
``extra`` and ignored.

Every problem is one line ``FILE:LINE: field: problem``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from treesearch.errors import ConfigError

__all__ = [
    "Instance",
    "InstanceFileError",
    "find_repo",
    "json_rows",
    "load_instances",
    "parse_instance",
]

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


class InstanceFileError(ConfigError):
    """An instances file that cannot be used (the message is ``FILE:LINE: field: problem``)."""


def _usable_id(iid: str) -> str:
    if not _ID.match(iid) or iid in (".", ".."):
        raise ValueError(
            f"{iid!r} is not a usable id (letters, digits and _ . + - only; it names a folder)"
        )
    return iid


def _test_ids(value: Any) -> Any:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ValueError("a string must be a JSON-encoded list of test ids") from None
    if not isinstance(value, (list, tuple)) or not all(isinstance(t, str) and t for t in value):
        raise ValueError("must be a list of test ids (non-empty strings)")
    if len(set(value)) != len(value):
        raise ValueError("lists a test id twice")
    return tuple(value)


def _commands(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if isinstance(value, Sequence) and all(isinstance(c, str) for c in value):
        return tuple(c for c in value if c.strip())
    raise ValueError("must be a shell command or a list of them")


_TestIds = Annotated[tuple[str, ...], BeforeValidator(_test_ids)]
_Commands = Annotated[tuple[str, ...], BeforeValidator(_commands)]
_Version = Annotated[  # published as text ("3.0"); a number in hand-made rows
    StrictStr, BeforeValidator(lambda v: str(v) if type(v) in (int, float) else v)
]
_Blank = Annotated[  # blank text is no value
    StrictStr | None, AfterValidator(lambda v: v.strip() or None if v is not None else None)
]


class Instance(BaseModel):
    """One task: a repository state, a problem statement and its grading tests. Validated from
    a row (SWE-bench's field names, ``FAIL_TO_PASS``...; a ``null`` is as if the field were
    left out) or built by keyword (``fail_to_pass``...); fields of no use here are kept in
    ``extra``."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    instance_id: Annotated[StrictStr, AfterValidator(_usable_id)]
    fail_to_pass: _TestIds = Field(alias="FAIL_TO_PASS", min_length=1)
    pass_to_pass: _TestIds = Field((), alias="PASS_TO_PASS")
    repo: _Blank = None
    base_commit: _Blank = None
    workspace: _Blank = None
    """Local form: an absolute folder path used instead of ``repo`` + ``base_commit``."""
    patch: StrictStr = ""
    test_patch: StrictStr = ""
    problem_statement: StrictStr = ""
    version: _Version = ""
    environment_setup_commit: _Blank = None
    hints_text: StrictStr = ""
    pre_install: _Commands = ()
    install: _Commands = ()
    search_tests: _Blank = None
    """Local extension: the command that steers this instance's search (visible tests only)."""
    where: str = Field("", exclude=True)
    """``FILE:LINE`` the instance came from."""

    @field_validator("workspace")
    @classmethod
    def _absolute(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        path, base = Path(value).expanduser(), (info.context or {}).get("base", Path())
        return str(path if path.is_absolute() else (base / path).resolve())

    @model_validator(mode="after")
    def _one_form(self) -> Instance:
        if self.workspace is not None and (self.repo is not None or self.base_commit is not None):
            raise ValueError("workspace: give either workspace or repo + base_commit, not both")
        if self.workspace is not None:
            return self
        if self.repo is None:
            raise ValueError(
                "repo: missing (required unless the local form `workspace: PATH` is used)"
            )
        if self.base_commit is None:
            raise ValueError("base_commit: missing (required with repo)")
        if not _REPO.match(self.repo) or ".." in self.repo.split("/"):
            raise ValueError(f"repo: {self.repo!r} must look like owner/name")
        return self

    @property
    def extra(self) -> dict[str, Any]:
        """The row's other fields, as given."""
        return self.model_extra or {}

    def to_json(self) -> dict[str, Any]:
        """The instance as a SWE-bench row (local fields included, extras kept)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


def load_instances(path: str | Path) -> list[Instance]:
    """Read and check an instances file (JSON array or JSONL).

    Raises:
        InstanceFileError: unreadable file, bad JSON, a bad field or a duplicate ``instance_id``.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise InstanceFileError(f"{p}:1: (file): cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InstanceFileError(f"{p}:1: (file): not UTF-8 text") from None
    rows = json_rows(p, text)
    if not rows:
        raise InstanceFileError(f"{p}:1: (file): no instances in the file")
    base = p.resolve().parent
    out: list[Instance] = []
    seen: dict[str, int] = {}
    for line, row in rows:
        inst = parse_instance(row, f"{p}:{line}", base)
        if inst.instance_id in seen:
            raise InstanceFileError(
                f"{p}:{line}: instance_id: duplicate {inst.instance_id!r} "
                f"(first at line {seen[inst.instance_id]}); ids must be unique"
            )
        seen[inst.instance_id] = line
        out.append(inst)
    return out


def json_rows(
    p: Path, text: str, error: type[ConfigError] = InstanceFileError
) -> list[tuple[int, Any]]:
    """(line, value) of each row of a JSON array or a JSONL text (SWE-bench's two forms);
    ``error``: the class of the ``FILE:LINE: ...`` error raised for bad JSON."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        return _json_array(p, text, error)
    rows: list[tuple[int, Any]] = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append((i, json.loads(line)))
        except ValueError as exc:
            raise error(
                f"{p}:{i}: (line): not a JSON object ({_json_msg(exc)}); "
                "give one JSON object per line (JSONL) or a JSON array"
            ) from None
    return rows


def _json_array(p: Path, text: str, error: type[ConfigError]) -> list[tuple[int, Any]]:
    decoder = json.JSONDecoder()
    idx = text.index("[") + 1
    rows: list[tuple[int, Any]] = []

    def skip(i: int) -> int:
        while i < len(text) and text[i] in " \t\r\n":
            i += 1
        return i

    idx = skip(idx)
    if idx < len(text) and text[idx] == "]":
        return rows
    while True:
        idx = skip(idx)
        line = text.count("\n", 0, idx) + 1
        try:
            obj, end = decoder.raw_decode(text, idx)
        except ValueError as exc:
            err_line = getattr(exc, "lineno", line)
            raise error(f"{p}:{err_line}: (file): not valid JSON ({_json_msg(exc)})") from None
        rows.append((line, obj))
        idx = skip(end)
        if idx < len(text) and text[idx] == ",":
            idx += 1
            continue
        if idx < len(text) and text[idx] == "]":
            if text[idx + 1 :].strip():
                raise error(
                    f"{p}:{text.count(chr(10), 0, idx) + 1}: (file): text after the closing ]"
                )
            return rows
        raise error(
            f"{p}:{text.count(chr(10), 0, idx) + 1}: (file): not valid JSON "
            "(expected , or ] between instances)"
        )


def _json_msg(exc: ValueError) -> str:
    return str(getattr(exc, "msg", exc))


_MISSING = {
    "FAIL_TO_PASS": "missing (required): the test ids the grade checks",
    "instance_id": "missing (required)",
}


def parse_instance(row: Any, where: str, base: Path) -> Instance:
    """Check one row (``where`` is ``FILE:LINE``; ``base`` resolves a relative ``workspace``)."""
    if not isinstance(row, Mapping):
        raise InstanceFileError(f"{where}: (line): must be a JSON object, got {type(row).__name__}")
    given = {k: v for k, v in row.items() if v is not None and k != "where"}
    try:
        return Instance.model_validate({**given, "where": where}, context={"base": base})
    except ValidationError as exc:
        err = exc.errors()[0]
    key, msg = ".".join(map(str, err["loc"])), str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "missing":
        msg = _MISSING.get(key, "missing (required)")
    elif err["type"] == "string_type":
        msg = f"must be a string, got {type(err['input']).__name__}"
    elif err["type"] == "too_short":
        msg = "empty: an instance needs at least one test to make pass"
    raise InstanceFileError(f"{where}: {key}: {msg}" if key else f"{where}: {msg}")


def find_repo(repos: Path | None, name: str) -> tuple[Path | None, str]:
    """The local repository of ``owner/name`` under ``repos``: ``DIR/owner__name``,
    ``DIR/owner/name`` or ``DIR/owner/name.git`` (also ``DIR/owner__name.git``).

    Returns (path, "") or (None, reason)."""
    if repos is None:
        return None, f"repository {name} needs --repos DIR (nothing is fetched over the network)"
    owner, _, short = name.partition("/")
    candidates = [
        repos / f"{owner}__{short}",
        repos / f"{owner}__{short}.git",
        repos / owner / short,
        repos / owner / f"{short}.git",
    ]
    for c in candidates:
        if c.is_dir():
            return c, ""
    looked = ", ".join(str(c.relative_to(repos)) for c in candidates)
    return None, f"repository {name} not found under {repos} (looked for {looked})"
