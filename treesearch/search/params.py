"""Each policy's hyper-parameters (config ``search.params``) as one small pydantic model, and
``make_policy``, which binds validated values to the policy function.

A model's fields are its policy's keyword-only hyper-parameters, with the function's own
defaults (read from its signature: one place says each default); each field's description is
what a bad value is told. ``policies.py`` stays free of pydantic: the controller imports it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from treesearch.search import policies as P
from treesearch.validation import Number, config_error

__all__ = ["POLICY_PARAMS", "PolicyParams", "make_policy"]


def _default(policy: Callable[..., Any], name: str) -> Any:
    return inspect.signature(policy).parameters[name].default


class PolicyParams(BaseModel):
    """Base of every policy's hyper-parameters: unknown names refused, values frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    policy: ClassVar[str]
    """The policy (``search.policy``) these are the hyper-parameters of."""


class BfsParams(PolicyParams):
    """``bfs``: none."""

    policy: ClassVar[str] = "bfs"


class RandomParams(PolicyParams):
    """``random``: none."""

    policy: ClassVar[str] = "random"


class BestFirstParams(PolicyParams):
    """``best_first``: ``patience`` and ``priors`` (see ``policies.best_first``)."""

    policy: ClassVar[str] = "best_first"
    patience: StrictInt | None = Field(
        _default(P.best_first, "patience"),
        ge=0,
        description="a whole number of expansions >= 0 (0: no patience), or null",
    )
    priors: Number | None = Field(
        _default(P.best_first, "priors"), ge=0, description="a number >= 0, or null"
    )


class BeamParams(PolicyParams):
    """``beam``: ``width``."""

    policy: ClassVar[str] = "beam"
    width: StrictInt = Field(
        _default(P.beam, "width"), ge=1, description="a whole number of nodes per depth >= 1"
    )


class MctsParams(PolicyParams):
    """``mcts``: ``c`` (exploration) and progressive widening's ``pw_k``, ``pw_alpha``."""

    policy: ClassVar[str] = "mcts"
    c: Number = Field(_default(P.mcts, "c"), ge=0, description="a number >= 0")
    pw_k: Number = Field(_default(P.mcts, "pw_k"), ge=0, description="a number >= 0")
    pw_alpha: Number = Field(_default(P.mcts, "pw_alpha"), ge=0, description="a number >= 0")


class PuctParams(PolicyParams):
    """``puct``: ``c`` (how much the priors weigh)."""

    policy: ClassVar[str] = "puct"
    c: Number = Field(_default(P.puct, "c"), ge=0, description="a number >= 0")


POLICY_PARAMS: dict[str, type[PolicyParams]] = {
    m.policy: m
    for m in (BfsParams, BestFirstParams, BeamParams, MctsParams, PuctParams, RandomParams)
}
"""Each policy's hyper-parameter model, by policy name (the keys of ``policies.POLICIES``)."""


def make_policy(name: str, params: PolicyParams | None = None, **values: Any) -> P.Policy:
    """The policy ``name`` with its hyper-parameters bound (``functools.partial``): ``params``
    already validated (a loaded config's ``search.params``), or ``values`` checked by the
    policy's model.

    Raises:
        KeyError: an unknown policy.
        ValueError: a value the policy's model refuses (one line: which parameter, and why).
    """
    model = POLICY_PARAMS[name]
    if params is None:
        try:
            params = model.model_validate(values)
        except ValidationError as exc:
            raise ValueError(f"policy {name!r}: {config_error(exc, model, '', 'params')}") from None
    elif not isinstance(params, model):
        raise ValueError(f"policy {name!r} takes {model.__name__}, not {type(params).__name__}")
    return partial(P.POLICIES[name], **dict(params))
