"""Each policy's hyper-parameters (config ``search.params``) as a small pydantic model, made from
the policy function's keyword-only parameters (their names and defaults are said there only), and
``make_policy``, which binds validated values. ``policies.py`` stays free of pydantic: the
controller imports it."""

from __future__ import annotations

import inspect
from functools import partial
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, create_model

from treesearch.search.policies import POLICIES, Policy
from treesearch.validation import Number, config_error

__all__ = ["POLICY_PARAMS", "PolicyParams", "make_policy"]

_SPECS: dict[str, tuple[Any, dict[str, Any]]] = {
    "patience": (
        StrictInt | None,
        {"ge": 0, "description": "a whole number of expansions >= 0 (0: no patience), or null"},
    ),
    "priors": (Number | None, {"ge": 0, "description": "a number >= 0, or null"}),
    "width": (StrictInt, {"ge": 1, "description": "a whole number of nodes per depth >= 1"}),
    "c": (Number, {"ge": 0, "description": "a number >= 0"}),
    "pw_k": (Number, {"ge": 0, "description": "a number >= 0"}),
    "pw_alpha": (Number, {"ge": 0, "description": "a number >= 0"}),
}
"""Each hyper-parameter's type and range, and what a bad value is told (the same in every policy
that takes it; a policy's parameter missing here fails at import)."""


class PolicyParams(BaseModel):
    """Base of every policy's hyper-parameter model: unknown names refused, values frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    policy: ClassVar[str] = ""
    """The policy (``search.policy``) these are the hyper-parameters of."""


def _model(name: str) -> type[PolicyParams]:
    params = inspect.signature(POLICIES[name]).parameters.values()
    fields: dict[str, Any] = {
        p.name: (_SPECS[p.name][0], Field(p.default, **_SPECS[p.name][1]))
        for p in params
        if p.kind is p.KEYWORD_ONLY and p.name not in ("strategies", "max_depth")
    }
    title = name.title().replace("_", "") + "Params"
    model = create_model(title, __base__=PolicyParams, **fields)
    model.policy = name
    return model


POLICY_PARAMS: dict[str, type[PolicyParams]] = {name: _model(name) for name in POLICIES}
"""Each policy's hyper-parameter model (``MctsParams``...), by policy name."""


def make_policy(name: str, params: PolicyParams | None = None, **values: Any) -> Policy:
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
    return partial(POLICIES[name], **dict(params))
