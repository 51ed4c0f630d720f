"""A pydantic validation error in the config's words (shared by every config model).

A model field's ``description`` is the text of the error a bad value gets: ``must be
<description>, got <value>``; a validator's own ``ValueError`` text is said as it is. The config
(``treesearch.config``), the agents' models (``treesearch.agents.configs``) and the scoring
section (``treesearch.scoring``) word their errors with ``explain``.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic.types import Strict

from treesearch.errors import ConfigError

__all__ = [
    "MAX_SECONDS",
    "Number",
    "check_command",
    "config_error",
    "explain",
    "field_at",
    "model_at",
    "shown",
    "unknown_key",
]

MAX_SECONDS = 366 * 86400
"""Upper bound of every time limit in a config (a year): larger values are typing slips (and
overflow the OS's timers)."""

Number = Annotated[float, Strict(), Field(allow_inf_nan=False)]
"""A finite number (an int is taken as a float; true/false and strings are refused)."""


def check_command(value: Any) -> Any:
    """A command (for a ``BeforeValidator``): a non-blank shell command string or a non-empty
    argument vector of strings, as given."""
    if isinstance(value, str):
        if not value.strip():
            raise ValueError("must not be empty")
        return value
    if isinstance(value, Sequence) and value and all(isinstance(v, str) for v in value):
        return value
    raise ValueError(
        "must be a shell command string (run by /bin/sh) or a non-empty list of strings, "
        f"got {shown(value)}"
    )


def model_at(model: type[BaseModel], loc: Sequence[Any]) -> type[BaseModel] | None:
    """The model of the value at key path ``loc`` below ``model`` (``None``: not a model)."""
    for part in loc:
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        found = next(
            (
                a
                for a in (field.annotation, *typing.get_args(field.annotation))
                if isinstance(a, type) and issubclass(a, BaseModel)
            ),
            None,
        )
        if found is None:
            return None
        model = found
    return model


def field_at(model: type[BaseModel], loc: Sequence[Any]) -> FieldInfo | None:
    """The field at key path ``loc`` below ``model``, if the path runs through models."""
    if not loc:
        return None
    parent = model_at(model, loc[:-1])
    return parent.model_fields.get(str(loc[-1])) if parent is not None else None


def unknown_key(allowed: Sequence[str], what: str = "unknown key") -> str:
    """The one wording of a key that is not allowed: ``unknown key (allowed: a, b)``."""
    return f"{what} (allowed: {', '.join(allowed) or 'none'})"


def shown(value: Any) -> str:
    """A value as an error message quotes it (cut to 80 characters)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def explain(err: Mapping[str, Any], model: type[BaseModel]) -> str:
    """What is wrong, for one pydantic error of ``model`` (without the field's path)."""
    kind, msg, loc = err["type"], str(err["msg"]), tuple(err["loc"])
    field = field_at(model, loc)
    desc = field.description if field is not None else None
    if kind == "missing":
        return f"is required: {desc}" if desc else "is required"
    if kind == "extra_forbidden":
        return "unknown field"
    if kind in ("value_error", "assertion_error"):
        return msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if desc:
        return f"must be {desc}, got {shown(err.get('input'))}"
    return f"{msg[:1].lower()}{msg[1:]}, got {shown(err.get('input'))}"


def config_error(exc: ValidationError, model: type[BaseModel], at: str, where: str) -> ConfigError:
    """``model``'s first validation error as one ``ConfigError`` line: ``<at>: <key path>: <what
    is wrong>``, where the key path starts at ``where`` (the model's place in the file); an
    unknown key is answered with the keys allowed there."""
    err = exc.errors()[0]
    loc = tuple(err["loc"])
    path = ".".join([where, *map(str, loc)] if where else map(str, loc))
    prefix = ": ".join(part for part in (at, path) if part)
    if err["type"] == "extra_forbidden":
        parent = model_at(model, loc[:-1])
        return ConfigError(f"{prefix}: {unknown_key(list(parent.model_fields) if parent else [])}")
    if err["type"] == "model_type":
        return ConfigError(f"{prefix}: must be a mapping, got {shown(err.get('input'))}")
    return ConfigError(f"{prefix}: {explain(err, model)}")
