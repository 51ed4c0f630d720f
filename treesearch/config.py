"""Search configuration: YAML (plus ``-c key.path=value`` overrides) into typed, validated values.

Sections: ``workspace``, ``store``, ``task``, ``strategies`` (each a named agent config with a
``kind``), ``scoring``, ``search``, ``sandbox``, ``output``. Every error names the file, the key path and what
is allowed. Relative paths in ``workspace.path`` are resolved against the config file's folder.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Union

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SerializeAsAny,
    StrictInt,
    StrictStr,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from treesearch.agents.configs import (
    AGENT_MODELS,
    STRATEGY_KEYS,
    AgentConfig,
    CommandConfig,
    LLMAgentConfig,
    MutationConfig,
    PatchConfig,
    PythonConfig,
    ScriptedConfig,
)
from treesearch.agents.llm.judge import JudgeConfig
from treesearch.errors import AgentError, ConfigError
from treesearch.scoring.section import ScorerConfig
from treesearch.search.params import POLICY_PARAMS, PolicyParams
from treesearch.validation import MAX_SECONDS, Number, explain, field_at, model_at, unknown_key

MAX_COUNT = 10**9
"""Upper bound of every count in a config (steps, expansions, test runs, depth)."""
MAX_TOKENS = 10**15
DEFAULT_EXCLUDES = ("__pycache__/", ".pytest_cache/", "*.pyc", ".coverage", ".coverage.*")


class _Loader(yaml.SafeLoader):
    """YAML as PyYAML reads it, plus numbers like ``1e300`` (YAML 1.1 wants ``1.0e+300``): a
    user who writes an exponent means a number, not a string."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WorkspaceConfig(_Model):
    path: str
    """The project folder (relative paths: from the config file's folder)."""
    copy_: bool = Field(False, alias="copy")
    """Search a fresh temporary copy instead of the folder itself (the demo does)."""
    source: str | None = None
    """Set in a run's resolved config: the folder the searched copy was made from."""


class StoreConfig(_Model):
    home: str | None = None
    """Store home (default: $TREESEARCH_HOME or ~/.cache/treesearch)."""
    excludes: tuple[str, ...] = DEFAULT_EXCLUDES
    max_file_bytes: int | None = Field(None, gt=0, le=2**62)
    respect_gitignore: bool = True


class BudgetConfig(_Model):
    expansions: int | None = Field(20, ge=0, le=MAX_COUNT)
    test_runs: int | None = Field(None, ge=0, le=MAX_COUNT)
    wall_seconds: float | None = Field(None, gt=0, le=MAX_SECONDS, allow_inf_nan=False)
    """Wall-clock seconds of the search, from its start (the root's test run included), summed
    over the processes that ran it (see ``search.controller.Controller.time_left``)."""
    tokens: int | None = Field(None, ge=0, le=MAX_TOKENS)
    max_depth: int | None = Field(None, ge=0, le=MAX_COUNT)


class ReproduceConfig(_Model):
    """``search.reproduce``: reproduction tests written before the search (``search.reproduce``
    module): a strategy of ``strategies`` that writes them (it takes no part in the search
    itself), how often it is asked, and the weight of the kept tests in the score."""

    strategy: str
    """Name of the strategy that writes the tests (in ``strategies``)."""
    samples: int = Field(2, ge=1, le=20)
    """Attempts (each may write several files)."""
    weight: float = Field(0.5, gt=0, le=1, allow_inf_nan=False)
    """Share of the score the reproduction tests carry (the repository's tests: the rest)."""
    task: str | None = None
    """How the strategy is asked (``{task}``: the search's task text); default
    ``reproduce.REPRODUCE_TASK``."""


class SearchConfig(_Model):
    policy: Literal["bfs", "best_first", "beam", "mcts", "puct", "random"] = "best_first"
    params: SerializeAsAny[PolicyParams] = Field(
        default_factory=PolicyParams, validate_default=True
    )
    """Policy hyper-parameters, the policy's model (``search.params.POLICY_PARAMS``): beam
    ``width``; best_first ``patience``, ``priors``; mcts ``c``, ``pw_k``, ``pw_alpha``; puct ``c``."""
    seed: int = 0
    steps: int = Field(10, ge=1, le=MAX_COUNT)
    """Default agent steps per expansion (a strategy's ``max_steps`` overrides it)."""
    agent_timeout: float = Field(600.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False)
    """Default wall seconds per agent run (a strategy's ``timeout`` overrides it)."""
    stop_on_perfect: bool = True
    max_consecutive_errors: int | None = Field(3, ge=1)
    """Stop the search after this many expansions in a row failed with the same agent error and
    left no new state (e.g. a model server that is down); ``null``: never."""
    workers: int = Field(1, ge=1, le=64)
    """Worker processes expanding (node, strategy) pairs at once, each in a folder of its own
    (``search.parallel``); results are applied in selection order, so the same seed and the same
    ``workers`` give the same graph. 1: one expansion at a time, in the workspace itself."""
    budget: BudgetConfig = BudgetConfig()
    reproduce: ReproduceConfig | None = None
    """Reproduction tests before the search (off by default)."""

    @field_validator("params", mode="before")
    @classmethod
    def _params(cls, value: Any, info: ValidationInfo) -> Any:
        # The policy's own model: its errors come out under search.params.<name>.
        model = POLICY_PARAMS.get(info.data.get("policy", ""))
        if model is None:  # the policy was refused: that error is the one to read
            return PolicyParams()
        return model.model_validate(
            dict(value) if isinstance(value, PolicyParams) else {} if value is None else value
        )


class SandboxConfig(_Model):
    """How agent commands (the ``run`` tool, ``command`` agents) are confined."""

    isolation: Literal["auto", "namespace", "none"] = "auto"
    """``auto``: the workspace is the only writable path where the system allows it (else
    unconfined, said in summary.json); ``namespace``: required (the run refuses to start
    without it); ``none``: commands may write anywhere the user can."""
    network: bool = False
    """Allow isolated commands to use the network."""
    writable: tuple[str, ...] = ()
    """Further folders isolated commands may write (e.g. a tool's cache)."""


class OutputConfig(_Model):
    runs_dir: str = "runs"
    run_id: str | None = None
    instance_id: str = "treesearch"
    model_name: str = "treesearch"


class ScoringConfig(ScorerConfig):
    """How states are scored: what the ``Scorer`` reads (``treesearch.scoring.ScorerConfig``)
    and the value judge."""

    judge: JudgeConfig | None = None
    """A model that rates each state beside its tests (``agents.llm.judge``; off by default)."""


class StrategyKeys(BaseModel):
    """The keys of a strategy that the controller uses (the others configure its agent)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_steps: StrictInt | None = Field(None, ge=1, le=MAX_COUNT)
    """Agent steps per expansion (default: ``search.steps``)."""
    timeout: Number | None = Field(None, gt=0, le=MAX_SECONDS)
    """Wall seconds per agent run (default: ``search.agent_timeout``)."""
    samples: StrictInt = Field(1, ge=1, le=MAX_COUNT)
    """How often it may be applied to one node (> 1: a sampled strategy)."""
    description: StrictStr | None = None
    """Free text for people reading the config."""


class CustomStrategy(StrategyKeys):
    """A strategy of a kind registered without a config model: its fields go to the agent's
    factory as they are (the factory checks them)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    kind: str
    shadowed: ClassVar[frozenset[str]] = frozenset(STRATEGY_KEYS)

    def agent_config(self) -> dict[str, Any]:
        """The agent's part with its ``kind``."""
        return {"kind": self.kind, **(self.model_extra or {})}


# A strategy of a built-in kind: the agent's model plus the strategy keys, which win over an agent
# field of the same name (the command agent's own ``timeout`` is not settable from a strategy).


class ScriptedStrategy(StrategyKeys, ScriptedConfig):
    """A ``scripted`` strategy."""

    shadowed: ClassVar[frozenset[str]] = frozenset(STRATEGY_KEYS)


class PatchStrategy(StrategyKeys, PatchConfig):
    """A ``patch`` strategy."""

    shadowed: ClassVar[frozenset[str]] = frozenset(STRATEGY_KEYS)


class CommandStrategy(StrategyKeys, CommandConfig):
    """A ``command`` strategy."""

    shadowed: ClassVar[frozenset[str]] = frozenset(STRATEGY_KEYS)


class PythonStrategy(StrategyKeys, PythonConfig):
    """A ``python`` strategy."""

    shadowed: ClassVar[frozenset[str]] = frozenset(STRATEGY_KEYS)


class LLMStrategy(StrategyKeys, LLMAgentConfig):
    """A ``llm`` strategy."""

    shadowed: ClassVar[frozenset[str]] = frozenset(STRATEGY_KEYS)


class MutationStrategy(StrategyKeys, MutationConfig):
    """A ``mutation`` strategy."""

    shadowed: ClassVar[frozenset[str]] = frozenset(STRATEGY_KEYS)


STRATEGY_MODELS: dict[str, type[AgentConfig]] = {
    "command": CommandStrategy,
    "llm": LLMStrategy,
    "mutation": MutationStrategy,
    "patch": PatchStrategy,
    "python": PythonStrategy,
    "scripted": ScriptedStrategy,
}
"""The built-in kinds' strategy models (agent fields plus ``STRATEGY_KEYS``)."""


def _strategy_tag(value: Any) -> str | None:
    """The union member a strategy validates as: its built-in kind, ``custom`` for another
    registered kind, ``None`` (an error listing the kinds) for an unknown one."""
    from treesearch.agents import agent_model, known_kinds

    kind = value.get("kind") if isinstance(value, Mapping) else getattr(value, "kind", None)
    if not isinstance(kind, str) or kind not in known_kinds():
        return None
    if kind in AGENT_MODELS and agent_model(kind) is AGENT_MODELS[kind]:
        return kind
    return "custom"


StrategyConfig = Annotated[
    Union[  # noqa: UP007 - a Union of Annotated members reads better than a long | chain
        Annotated[CommandStrategy, Tag("command")],
        Annotated[LLMStrategy, Tag("llm")],
        Annotated[MutationStrategy, Tag("mutation")],
        Annotated[PatchStrategy, Tag("patch")],
        Annotated[PythonStrategy, Tag("python")],
        Annotated[ScriptedStrategy, Tag("scripted")],
        Annotated[CustomStrategy, Tag("custom")],
    ],
    Discriminator(_strategy_tag),
]
"""One strategy: a discriminated union on ``kind``."""


class Config(_Model):
    """A whole search configuration (validated)."""

    workspace: WorkspaceConfig
    store: StoreConfig = StoreConfig()
    task: str = "Make the failing tests pass."
    strategies: dict[str, StrategyConfig]
    scoring: ScoringConfig = ScoringConfig()
    search: SearchConfig = SearchConfig()
    sandbox: SandboxConfig = SandboxConfig()
    output: OutputConfig = OutputConfig()

    @field_validator("strategies")
    @classmethod
    def _non_empty(cls, v: dict[str, Any]) -> dict[str, Any]:
        if not v:
            raise ValueError("at least one strategy is needed")
        return v

    @model_validator(mode="after")
    def _reproducer_is_a_strategy(self) -> Config:
        rep = self.search.reproduce
        if rep is None:
            return self
        if rep.strategy not in self.strategies:
            known = ", ".join(sorted(self.strategies))
            raise ValueError(
                f"search.reproduce.strategy: {rep.strategy!r} is not a strategy (known: {known})"
            )
        if len(self.strategies) < 2:
            raise ValueError(
                "search.reproduce.strategy: the strategy that writes reproduction tests takes "
                "no part in the search; add a strategy that fixes"
            )
        if not self.scoring.search_tests.is_pytest:
            raise ValueError(
                "search.reproduce: scoring.search_tests must run pytest (the reproduction "
                "tests join its run); its command does not"
            )
        return self


class LoadedConfig:
    """A validated config, the raw mapping it came from, and where it came from."""

    def __init__(
        self,
        config: Config,
        raw: dict[str, Any],
        source: str,
        base_dir: Path,
        overrides: Sequence[str] = (),
    ) -> None:
        self.config = config
        self.raw = raw
        self.source = source
        self.base_dir = base_dir
        self.overrides = tuple(overrides)
        """The ``-c key.path=value`` overrides applied on top of ``source``."""
        self.reproduction: Any = None
        """What ``search.reproduce`` found (``search.reproduce.Reproduction``), once the search
        has run it; the config then no longer has the section."""

    def workspace_path(self) -> Path:
        p = Path(self.config.workspace.path).expanduser()
        return p if p.is_absolute() else (self.base_dir / p).resolve()


def parse_override(text: str) -> tuple[list[str], Any]:
    """``a.b.c=value`` -> (["a", "b", "c"], value parsed as YAML)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override {text!r} must look like key.path=value (e.g. search.seed=3)")
    parts = [p for p in key.strip().split(".")]
    if any(not p for p in parts):
        raise ConfigError(f"override {text!r} has an empty key part")
    try:
        parsed = _load_yaml(value) if value.strip() else ""
    except yaml.YAMLError:
        parsed = value
    return parts, parsed


def apply_overrides(raw: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """Merge ``-c key.path=value`` overrides on top of ``raw`` (recursively; returns a copy)."""
    out = copy.deepcopy(raw)
    for text in overrides:
        parts, value = parse_override(text)
        node = out
        for i, part in enumerate(parts[:-1]):
            nxt = node.get(part)
            if nxt is None:
                nxt = node[part] = {}
            if not isinstance(nxt, dict):
                raise ConfigError(
                    f"override {text!r}: {'.'.join(parts[: i + 1])} is not a "
                    "mapping, cannot set a key below it"
                )
            node = nxt
        if isinstance(value, dict) and isinstance(node.get(parts[-1]), dict):
            node[parts[-1]] = _merge(node[parts[-1]], value)
        else:
            node[parts[-1]] = value
    return out


def _merge(a: dict[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), dict) else v
    return out


def load_config(
    path: str | Path, overrides: Sequence[str] = (), *, _depth: int = 0
) -> LoadedConfig:
    """Read, merge and validate a YAML config file.

    ``extends: other.yaml`` (relative to this file) starts from another config and merges this
    one on top; ``overrides`` (``key.path=value``) are applied last.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config {p}: {exc.strerror}") from exc
    try:
        raw = _load_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: {_yaml_problem(exc)}") from None
    if not isinstance(raw, dict):
        raise ConfigError(
            f"{p}: the top level must be a mapping with sections workspace, "
            "strategies, scoring, search, output"
        )
    base_dir = p.parent.resolve()
    parent = raw.pop("extends", None)
    if parent is not None:
        if not isinstance(parent, str):
            raise ConfigError(f"{p}: extends: must be the path of another config file")
        if _depth > 8:
            raise ConfigError(f"{p}: extends: chain too deep (a cycle?)")
        base = load_config(base_dir / parent, (), _depth=_depth + 1)
        raw = _merge(base.raw, raw)
        base_dir = base.base_dir  # relative paths keep meaning what they meant in the base
    return validate(
        apply_overrides(raw, overrides), source=str(p), base_dir=base_dir, overrides=overrides
    )


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's several-line message as one line: where, and what is wrong."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"not valid YAML{where}: {problem} (fix the syntax there)"


def validate(
    raw: Mapping[str, Any], *, source: str, base_dir: Path, overrides: Sequence[str] = ()
) -> LoadedConfig:
    """Validate a config mapping; errors name ``source``, or the ``-c`` override they come from
    (``overrides`` were already merged into ``raw``)."""

    def blame(loc: Sequence[Any]) -> str:
        return origin(loc, source, overrides)

    try:
        cfg = Config.model_validate(raw)
    except ValidationError as exc:
        search = raw.get("search")
        policy = search.get("policy") if isinstance(search, Mapping) else None
        params = POLICY_PARAMS.get(policy or SearchConfig.model_fields["policy"].default)
        raise ConfigError(_format(exc, blame, params)) from None
    for name, strat in cfg.strategies.items():
        _check_strategy(name, strat, blame(["strategies", name]))
    return LoadedConfig(cfg, dict(raw), source, base_dir, overrides)


def origin(loc: Sequence[Any], source: str, overrides: Sequence[str]) -> str:
    """What to blame for a value at key path ``loc``: the last ``-c`` override that set it (or a
    key above or below it), else the file ``source``."""
    want = [str(x) for x in loc]
    for text in reversed(overrides):
        key = text.partition("=")[0].strip()
        parts = key.split(".")
        n = min(len(parts), len(want))
        if parts[:n] == want[:n]:
            return f"-c {text}"
    return source


def _format(exc: ValidationError, blame: Any, params: type[PolicyParams] | None) -> str:
    """The first errors, one line each (``params``: the model of ``search.params``)."""
    msgs = [_one_error(err, blame, params) for err in exc.errors()[:5]]
    more = len(exc.errors()) - 5
    return "; ".join(msgs) + (f"; and {more} more" if more > 0 else "")


def _one_error(err: Any, blame: Any, params: type[PolicyParams] | None) -> str:
    """``<file or -c override>: <key path>: <what is wrong>`` for one pydantic error."""
    err = dict(err)
    if err["type"] == "union_tag_not_found":
        return _kind_error(err, blame)
    model = params if tuple(err["loc"])[:2] == ("search", "params") else _untag(err)
    loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
    msg = _field_message(err, model) or _message(err, model)
    return f"{blame(err['loc'])}: {loc}: {msg}"


def _field_message(err: dict[str, Any], model: type[BaseModel] | None) -> str | None:
    """A field with a description (a strategy's agent field, a policy's, a test spec's):
    ``must be <description>, got ...``."""
    if err["type"] in ("extra_forbidden", "missing"):
        return None
    root, loc = (model, tuple(err["loc"])[2:]) if model is not None else (Config, err["loc"])
    field = field_at(root, loc)
    if field is None or not field.description:
        return None
    return explain({**err, "loc": loc}, root)


def _untag(err: dict[str, Any]) -> type[BaseModel] | None:
    """Drop the union tag pydantic puts in a strategy error's location
    (``strategies.<name>.<kind>.<field>``); the strategy's model, if it was one."""
    loc = tuple(err["loc"])
    if len(loc) < 3 or loc[0] != "strategies":
        return None
    err["loc"] = loc[:2] + loc[3:]
    return STRATEGY_MODELS.get(str(loc[2]), CustomStrategy)


def _kind_error(err: dict[str, Any], blame: Any) -> str:
    from treesearch.agents import known_kinds

    where = ".".join(str(x) for x in err["loc"])
    kinds = ", ".join(known_kinds())
    value = err.get("input")
    if not isinstance(value, Mapping):
        return f"{blame(err['loc'])}: {where}: must be a mapping with a 'kind' (one of {kinds})"
    at = f"{blame([*err['loc'], 'kind'])}: {where}.kind"
    if "kind" not in value:
        return f"{at}: missing (required: one of {kinds})"
    return f"{at}: unknown agent kind {value['kind']!r} (known kinds: {kinds})"


def _message(err: dict[str, Any], model: type[BaseModel] | None) -> str:
    """What is wrong with a value, in the config's words (``model``: of a strategy or of
    ``search.params``)."""
    kind, msg, ctx = err["type"], err["msg"], err.get("ctx") or {}
    got = _shown(err.get("input"))
    loc = ".".join(str(x) for x in err["loc"])
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        keys = _allowed_keys(err["loc"])
        example = f" (keys: {', '.join(keys)}; e.g. -c {loc}.{keys[0]}=...)" if keys else ""
        return f"must be a mapping, got {got}{example}"
    if kind == "extra_forbidden":
        allowed = _allowed_keys(err["loc"][:-1], model)
        if isinstance(model, type) and issubclass(model, PolicyParams):
            return unknown_key(allowed, f"not a parameter of policy {model.policy!r}")
        return unknown_key(allowed)
    if kind in _MESSAGES:
        return _MESSAGES[kind](msg, ctx, got)
    if kind.endswith(("_type", "_parsing")):
        return f"{msg[0].lower()}{msg[1:]}, got {got}"
    return msg.removeprefix("Value error, ")


_MESSAGES: dict[str, Any] = {
    "finite_number": lambda msg, ctx, got: (
        "must be a finite number (leave the key out for no limit)"
    ),
    "less_than_equal": lambda msg, ctx, got: f"must be at most {ctx.get('le')}, got {got}",
    "less_than": lambda msg, ctx, got: f"must be at most {ctx.get('lt')}, got {got}",
    "greater_than": lambda msg, ctx, got: f"must be more than {ctx.get('gt')}, got {got}",
    "greater_than_equal": lambda msg, ctx, got: f"must be at least {ctx.get('ge')}, got {got}",
    "literal_error": lambda msg, ctx, got: (
        f"must be {msg.removeprefix('Input should be ')}, got {got}"
    ),
    "missing": lambda msg, ctx, got: "missing (required)",
}
"""Pydantic error types whose message the config words its own way."""


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _allowed_keys(loc: Sequence[Any], model: Any = None) -> list[str]:
    """The keys allowed at key path ``loc`` (``model``: a strategy's or ``search.params``', for a
    path inside it)."""
    if model is not None and len(loc) >= 2:
        found = model_at(model, loc[2:])
    else:
        found = model_at(Config, loc)
    if found is None:
        return []
    return [f.alias or name for name, f in found.model_fields.items()]


def _check_strategy(name: str, strat: Any, source: str) -> None:
    """Build the strategy's agent once: what its constructor checks beyond the model (e.g. a
    package it needs) is said now, not in the middle of a search."""
    from treesearch.agents import build_agent

    try:
        build_agent(strat if isinstance(strat, AgentConfig) else agent_config(strat))
    except AgentError as exc:
        raise ConfigError(f"{source}: strategies.{name}: {exc}") from None


def agent_config(strat: Any) -> dict[str, Any]:
    """The part of a strategy (a validated model or a mapping) that configures its agent, with
    its ``kind``: ``build_agent`` reads it."""
    if isinstance(strat, (AgentConfig, CustomStrategy)):
        return strat.agent_config()
    return {k: v for k, v in strat.items() if k not in STRATEGY_KEYS}
