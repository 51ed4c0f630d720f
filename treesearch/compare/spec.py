"""The compare SPEC: instances, contenders, seeds and ONE budget (YAML, validated with pydantic).

::

    instances: ../instances/build/instances.jsonl   # as for `treesearch eval` (relative to
    repos: ../instances/build/repos                 #   this file's folder)
    contenders:
      - name: random
        config: ../../configs/eval-mutation.yaml    # an eval config (no workspace)
        overrides: ["search.policy=random"]         # -c style strings, or a mapping
      - name: mcts
        config: ../../configs/eval-mutation.yaml
        overrides: {search.policy: mcts, search.params: {pw_k: 2, pw_alpha: 0.6}}
    seeds: [0, 1]
    budget: {test_runs: 15, expansions: 150}        # as search.budget; replaces each config's

Each contender runs as ``config`` with its ``overrides``, then ``search.budget`` replaced by the
SPEC's ``budget`` (keys it does not give take ``search.budget``'s defaults) and ``search.seed`` set
to each seed in turn. A problem is one line: the file, the field, what to do.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from treesearch.config import BudgetConfig
from treesearch.errors import ConfigError

__all__ = ["CompareSpec", "Contender", "SpecError", "load_spec", "spec_from_mapping"]

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")
RESERVED = ("search.seed", "search.budget")
"""Keys the SPEC sets for every contender (``seeds`` and ``budget``): overrides may not."""

_HINTS = {
    "instances": "name the instances file (SWE-bench JSON or JSONL), relative to the SPEC",
    "repos": "name the folder of local repositories, relative to the SPEC",
    "contenders": "give a list of {name, config, overrides}",
    "name": "use letters, digits and _ . + - (it names a folder), each name once",
    "config": "name an eval config file (no workspace), relative to the SPEC",
    "overrides": "give -c style strings (key.path=value) or a mapping of key.path: value",
    "seeds": "give a list of distinct integers, e.g. [0, 1, 2]",
    "budget": "give one mapping as search.budget, e.g. {test_runs: 15, expansions: 150}",
}


class SpecError(ConfigError):
    """The SPEC is not valid (one line: file, field, what to do)."""


class _ContenderModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    config: str
    overrides: list[str] | dict[str, Any] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME.match(v):
            raise ValueError(f"{v!r} is not a usable name")
        return v


class _SpecModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    instances: str
    repos: str | None = None
    contenders: list[_ContenderModel] = Field(min_length=1)
    seeds: list[int] = Field(min_length=1)
    budget: BudgetConfig

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError("a seed is given twice")
        return v

    @field_validator("contenders")
    @classmethod
    def _unique(cls, v: list[_ContenderModel]) -> list[_ContenderModel]:
        seen: set[str] = set()
        for c in v:
            if c.name in seen:
                raise ValueError(f"two contenders are named {c.name!r}")
            seen.add(c.name)
        return v


@dataclass(frozen=True)
class Contender:
    name: str
    config: str
    """Absolute path of the contender's eval config."""
    overrides: tuple[str, ...]
    """Its own ``-c`` overrides (``key.path=value``), in order."""
    config_sha256: str


@dataclass(frozen=True)
class CompareSpec:
    source: str
    """The SPEC file (absolute), or ``<mapping>``."""
    instances: str
    repos: str | None
    contenders: tuple[Contender, ...]
    seeds: tuple[int, ...]
    budget: dict[str, Any]
    """The budget as given (only the keys the SPEC names)."""
    raw: dict[str, Any]

    def overrides_for(self, contender: Contender, seed: int) -> list[str]:
        """The ``-c`` overrides of one cell: the contender's, then the budget and the seed."""
        return [
            *contender.overrides,
            "search.budget=null",  # replaced, not merged: the contender's own limits go
            f"search.budget={json.dumps(self.budget, sort_keys=True)}",
            f"search.seed={seed}",
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "instances": self.instances,
            "repos": self.repos,
            "contenders": [
                {
                    "name": c.name,
                    "config": c.config,
                    "overrides": list(c.overrides),
                    "config_sha256": c.config_sha256,
                }
                for c in self.contenders
            ],
            "seeds": list(self.seeds),
            "budget": dict(self.budget),
            "raw": self.raw,
        }


def load_spec(path: str | Path) -> CompareSpec:
    """Read and check a SPEC file (every contender's config is loaded and checked too)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"cannot read SPEC {p}: {exc.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f":{where.line + 1}" if where is not None else ""
        raise SpecError(f"{p}{line}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(raw, dict):
        raise SpecError(
            f"{p}: the top level must be a mapping with instances, contenders, seeds, budget"
        )
    return spec_from_mapping(raw, source=str(p.resolve()), base_dir=p.resolve().parent)


def spec_from_mapping(raw: Mapping[str, Any], *, source: str, base_dir: Path) -> CompareSpec:
    """Check a SPEC mapping; relative paths are taken from ``base_dir``."""
    try:
        model = _SpecModel.model_validate(dict(raw))
    except ValidationError as exc:
        raise SpecError(_one_line(source, exc)) from None
    inst = (base_dir / Path(model.instances).expanduser()).resolve()
    if not inst.is_file():
        raise SpecError(f"{source}: instances: {inst} is not a file ({_HINTS['instances']})")
    repos = None
    if model.repos is not None:
        rp = (base_dir / Path(model.repos).expanduser()).resolve()
        if not rp.is_dir():
            raise SpecError(f"{source}: repos: {rp} is not a folder ({_HINTS['repos']})")
        repos = str(rp)
    budget = model.budget.model_dump(exclude_unset=True)
    contenders = []
    for i, c in enumerate(model.contenders):
        field = f"contenders[{i}] ({c.name})"
        cfg = (base_dir / Path(c.config).expanduser()).resolve()
        if not cfg.is_file():
            raise SpecError(f"{source}: {field}.config: {cfg} is not a file ({_HINTS['config']})")
        overrides = _overrides(source, field, c.overrides)
        contender = Contender(
            c.name, str(cfg), overrides, hashlib.sha256(cfg.read_bytes()).hexdigest()
        )
        _check_config(source, field, cfg, overrides, budget)
        contenders.append(contender)
    return CompareSpec(
        source=source,
        instances=str(inst),
        repos=repos,
        contenders=tuple(contenders),
        seeds=tuple(model.seeds),
        budget=budget,
        raw=json.loads(json.dumps(dict(raw), default=str)),
    )


def _check_config(
    source: str, field: str, cfg: Path, overrides: tuple[str, ...], budget: dict[str, Any]
) -> None:
    """The contender's config loads as an eval config, with the SPEC's budget, then with its
    overrides too (a problem names the one to blame)."""
    from treesearch.eval import load_eval_config

    spec_part = ["search.budget=null", f"search.budget={json.dumps(budget)}"]
    try:
        load_eval_config(cfg, spec_part)
    except ConfigError as exc:
        raise SpecError(f"{source}: {field}.config: {exc}") from None
    try:
        load_eval_config(cfg, [*overrides, *spec_part])
    except ConfigError as exc:
        raise SpecError(
            f"{source}: {field}.overrides: {exc} (the overrides make this config invalid)"
        ) from None


def _overrides(source: str, field: str, given: list[str] | dict[str, Any]) -> tuple[str, ...]:
    if isinstance(given, dict):
        items = [f"{k}={json.dumps(v)}" for k, v in given.items()]
    else:
        items = list(given)
    for text in items:
        key, sep, _ = text.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SpecError(
                f"{source}: {field}.overrides: {text!r} is not key.path=value "
                f"({_HINTS['overrides']})"
            )
        for reserved in RESERVED:
            if key == reserved or key.startswith(reserved + "."):
                what = "seeds" if reserved == "search.seed" else "budget"
                raise SpecError(
                    f"{source}: {field}.overrides: {key} is set by the SPEC's {what} for every "
                    f"contender; remove it from the overrides"
                )
    return tuple(items)


def _one_line(source: str, exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = err.get("loc", ())
    field = ""
    for part in loc:
        if isinstance(part, int):
            field += f"[{part}]"
        elif part in ("list[str]", "dict[str,any]"):
            continue  # pydantic's union branch, not a key
        else:
            field += ("." if field else "") + str(part)
    last = next((str(p) for p in reversed(loc) if str(p) in _HINTS), "")
    if loc and loc[0] == "budget":
        last = "budget"
    msg = err.get("msg", "invalid")
    if err.get("type") == "missing":
        msg = "missing"
    elif err.get("type") == "extra_forbidden":
        msg = (
            "unknown key (allowed: instances, repos, contenders, seeds, budget; in a contender: "
            "name, config, overrides; in budget: the keys of search.budget)"
        )
    more = len(exc.errors()) - 1
    hint = f" ({_HINTS[last]})" if last in _HINTS and err.get("type") != "extra_forbidden" else ""
    tail = f"; and {more} more" if more > 0 else ""
    return f"{source}: {field or 'SPEC'}: {msg}{hint}{tail}"
