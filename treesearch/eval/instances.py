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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
_KNOWN = (
    "instance_id",
    "repo",
    "base_commit",
    "workspace",
    "patch",
    "test_patch",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "problem_statement",
    "version",
    "environment_setup_commit",
    "hints_text",
    "pre_install",
    "install",
    "search_tests",
)


class InstanceFileError(ConfigError):
    """An instances file that cannot be used (the message is ``FILE:LINE: field: problem``)."""


@dataclass(frozen=True)
class Instance:
    """One task: a repository state, a problem statement and its grading tests."""

    instance_id: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...] = ()
    repo: str | None = None
    base_commit: str | None = None
    workspace: str | None = None
    """Local form: an absolute folder path used instead of ``repo`` + ``base_commit``."""
    patch: str = ""
    test_patch: str = ""
    problem_statement: str = ""
    version: str = ""
    environment_setup_commit: str | None = None
    hints_text: str = ""
    pre_install: tuple[str, ...] = ()
    install: tuple[str, ...] = ()
    search_tests: str | None = None
    """Local extension: the command that steers this instance's search (visible tests only)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    where: str = ""
    """``FILE:LINE`` the instance came from."""

    def to_json(self) -> dict[str, Any]:
        """The instance as a SWE-bench row (local fields included, extras kept)."""
        out: dict[str, Any] = dict(self.extra)
        out.update(
            {
                "instance_id": self.instance_id,
                "patch": self.patch,
                "test_patch": self.test_patch,
                "FAIL_TO_PASS": list(self.fail_to_pass),
                "PASS_TO_PASS": list(self.pass_to_pass),
                "problem_statement": self.problem_statement,
                "version": self.version,
                "hints_text": self.hints_text,
            }
        )
        if self.workspace is not None:
            out["workspace"] = self.workspace
        else:
            out["repo"] = self.repo
            out["base_commit"] = self.base_commit
        if self.environment_setup_commit:
            out["environment_setup_commit"] = self.environment_setup_commit
        if self.pre_install:
            out["pre_install"] = list(self.pre_install)
        if self.install:
            out["install"] = list(self.install)
        if self.search_tests:
            out["search_tests"] = self.search_tests
        return out


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


def parse_instance(row: Any, where: str, base: Path) -> Instance:
    """Check one row (``where`` is ``FILE:LINE``; ``base`` resolves a relative ``workspace``)."""
    if not isinstance(row, Mapping):
        raise InstanceFileError(f"{where}: (line): must be a JSON object, got {type(row).__name__}")

    def bad(key: str, problem: str) -> InstanceFileError:
        return InstanceFileError(f"{where}: {key}: {problem}")

    def text(key: str, default: str = "", *, required: bool = False) -> str:
        if key not in row or row[key] is None:
            if required:
                raise bad(key, "missing (required)")
            return default
        v = row[key]
        if key == "version" and isinstance(v, (int, float)) and not isinstance(v, bool):
            return str(v)
        if not isinstance(v, str):
            raise bad(key, f"must be a string, got {type(v).__name__}")
        return v

    iid = text("instance_id", required=True)
    if not _ID.match(iid) or iid in (".", ".."):
        raise bad(
            "instance_id",
            f"{iid!r} is not a usable id (letters, digits and _ . + - only; it names a folder)",
        )
    workspace = text("workspace") or None
    repo = text("repo") or None
    commit = text("base_commit") or None
    if workspace is not None and (repo is not None or commit is not None):
        raise bad("workspace", "give either workspace or repo + base_commit, not both")
    if workspace is None:
        if repo is None:
            raise bad("repo", "missing (required unless the local form `workspace: PATH` is used)")
        if commit is None:
            raise bad("base_commit", "missing (required with repo)")
        if not re.match(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$", repo) or ".." in repo.split("/"):
            raise bad("repo", f"{repo!r} must look like owner/name")
    else:
        wp = Path(workspace).expanduser()
        workspace = str(wp if wp.is_absolute() else (base / wp).resolve())
    f2p = _test_list(row, "FAIL_TO_PASS", bad, required=True)
    if not f2p:
        raise bad("FAIL_TO_PASS", "empty: an instance needs at least one test to make pass")
    p2p = _test_list(row, "PASS_TO_PASS", bad, required=False)
    return Instance(
        instance_id=iid,
        fail_to_pass=f2p,
        pass_to_pass=p2p,
        repo=repo,
        base_commit=commit,
        workspace=workspace,
        patch=text("patch"),
        test_patch=text("test_patch"),
        problem_statement=text("problem_statement"),
        version=text("version"),
        environment_setup_commit=text("environment_setup_commit") or None,
        hints_text=text("hints_text"),
        pre_install=_commands(row, "pre_install", bad),
        install=_commands(row, "install", bad),
        search_tests=text("search_tests").strip() or None,
        extra={k: v for k, v in row.items() if k not in _KNOWN},
        where=where,
    )


def _test_list(row: Mapping[str, Any], key: str, bad: Any, *, required: bool) -> tuple[str, ...]:
    if key not in row or row[key] is None:
        if required:
            raise bad(key, "missing (required): the test ids the grade checks")
        return ()
    v = row[key]
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            raise bad(key, "a string must be a JSON-encoded list of test ids") from None
    if not isinstance(v, list) or not all(isinstance(t, str) and t for t in v):
        raise bad(key, "must be a list of test ids (non-empty strings)")
    if len(set(v)) != len(v):
        raise bad(key, "lists a test id twice")
    return tuple(v)


def _commands(row: Mapping[str, Any], key: str, bad: Any) -> tuple[str, ...]:
    v = row.get(key)
    if v is None:
        return ()
    if isinstance(v, str):
        return (v,) if v.strip() else ()
    if isinstance(v, Sequence) and all(isinstance(c, str) for c in v):
        return tuple(c for c in v if c.strip())
    raise bad(key, "must be a shell command or a list of them")


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
