"""The built-in agents' configs: one pydantic model per ``kind``, whose fields are the YAML keys.

A model validates a strategy's mapping (types, ranges, the rules between fields) and
``agent_kwargs()`` turns it into the keyword arguments of the agent's constructor, so an agent is
built from checked values only (``build_agent`` in ``treesearch.agents``; ``treesearch.config``
puts these models in a union on ``kind``). Each field's description is the text of the error a
bad value gets: ``<kind> agent: field 'x' must be <description>, got <value>``.

This module imports only pydantic at load time (agent modules are imported where needed), so the
config layer can use it without loading every agent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializeAsAny,
    SerializerFunctionWrapHandler,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from treesearch.agents.llm.prompts import Prompts
from treesearch.errors import AgentError
from treesearch.scoring.spec import TestSpec
from treesearch.validation import Number, check_command, explain, model_at, shown

__all__ = [
    "ACTIONS",
    "AGENT_MODELS",
    "STRATEGY_KEYS",
    "Action",
    "AgentConfig",
    "CommandConfig",
    "Finish",
    "GiveUp",
    "LLMAgentConfig",
    "List",
    "MutationConfig",
    "PatchConfig",
    "PythonConfig",
    "Read",
    "Replace",
    "Run",
    "ScriptedConfig",
    "Write",
    "agent_error",
    "agent_kwargs",
    "parse_steps",
]

STRATEGY_KEYS = ("max_steps", "timeout", "samples", "description")
"""Strategy-level keys the controller uses; the rest of a strategy's mapping configures its agent."""


class AgentConfig(BaseModel):
    """Base of every agent config model: unknown keys refused, values frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    """The registry key of the agent."""

    shadowed: ClassVar[frozenset[str]] = frozenset()
    """Fields of a subclass that are not the agent's (a strategy's own keys)."""

    def fields(self) -> dict[str, Any]:
        """The agent's fields (``kind`` and ``shadowed`` left out), as validated values."""
        skip = self.shadowed | {"kind"}
        return {name: getattr(self, name) for name in type(self).model_fields if name not in skip}

    def agent_kwargs(self) -> dict[str, Any]:
        """The agent constructor's keyword arguments."""
        return self.fields()

    def agent_config(self) -> dict[str, Any]:
        """The agent's part as plain data with its ``kind`` (``build_agent`` reads it back)."""
        data = self.model_dump(mode="json", by_alias=True, exclude=set(self.shadowed))
        return {"kind": self.kind, **{k: v for k, v in data.items() if k != "kind"}}


def agent_error(kind: str, exc: ValidationError, model: type[BaseModel]) -> AgentError:
    """A model's validation error as one ``AgentError`` line naming the field and what it
    allows (the first problem; the others follow once it is fixed)."""
    err = exc.errors()[0]
    loc = [str(x) for x in err["loc"]]
    text = explain(err, model)
    if err["type"] == "extra_forbidden" and len(loc) == 1:
        listing = "; ".join(
            f"{f.alias or n}: {f.description}"
            for n, f in model.model_fields.items()
            if n != "kind" and n not in getattr(model, "shadowed", ())
        )
        return AgentError(f"{kind} agent: unknown field {loc[0]!r}; allowed fields: {listing}")
    if not loc or text.startswith(loc[0]):
        return AgentError(f"{kind} agent: {text}")
    if len(loc) > 1:
        parent = model_at(model, loc[:-1]) if err["type"] == "extra_forbidden" else None
        if parent is not None:
            text = f"unknown field; allowed: {', '.join(parent.model_fields)}"
        return AgentError(f"{kind} agent: {'.'.join(loc)}: {text}")
    return AgentError(f"{kind} agent: field {loc[0]!r} {text}")


def agent_kwargs(model: type[AgentConfig], config: Mapping[str, Any]) -> dict[str, Any]:
    """Validate ``config`` (without ``kind``, or with the model's) by ``model``: the agent's
    constructor keyword arguments, or ``AgentError`` naming the bad field."""
    kind = str(model.model_fields["kind"].default)
    try:
        validated = model.model_validate({**config, "kind": kind})
    except ValidationError as exc:
        raise agent_error(kind, exc, model) from None
    return validated.agent_kwargs()


# --- scripted ---------------------------------------------------------------------------------


class Action(BaseModel):
    """One entry of a scripted agent's ``steps``: a single action key (the subclass's
    ``action``) with its fields; each field's description is what a bad value is told."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: ClassVar[str]
    """The key that names the action."""

    say: StrictStr | None = Field(None, description="assistant text recorded with the call")

    @property
    def target(self) -> str:
        """The action key's value (a path, a command or a reason)."""
        return str(getattr(self, self.action))

    @model_serializer(mode="wrap")
    def _as_given(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if k in self.model_fields_set}


class Run(Action):
    """``{"run": "pytest -x", "timeout": 30, "check": true}``: a shell command."""

    action: ClassVar[str] = "run"
    run: StrictStr = Field(description="a shell command (string)")
    timeout: Number | None = Field(None, gt=0, description="seconds > 0")
    check: StrictBool = Field(True, description="true (exit code 0 required, default) or false")


class Write(Action):
    """``{"write": "src/a.py", "content": "..."}``: create or overwrite a file."""

    action: ClassVar[str] = "write"
    write: StrictStr = Field(description="a workspace-relative path")
    content: StrictStr = Field(description="the file text")


class Replace(Action):
    """``{"replace": "src/a.py", "old": "x = 1", "new": "x = 2"}``: one exact match."""

    action: ClassVar[str] = "replace"
    replace: StrictStr = Field(description="a workspace-relative path")
    old: StrictStr = Field(description="text that occurs exactly once")
    new: StrictStr = Field(description="its replacement")
    check: StrictBool = Field(
        True, description="true (the text must be there, default) or false (no match: no change)"
    )


class Read(Action):
    """``{"read": "src/a.py"}``: read a file (an observation only)."""

    action: ClassVar[str] = "read"
    read: StrictStr = Field(description="a workspace-relative path")


class List(Action):
    """``{"list": "src"}``: list a folder."""

    action: ClassVar[str] = "list"
    list: StrictStr = Field(description="a workspace-relative folder")


class Finish(Action):
    """``{"finish": "why"}``: stop, finished."""

    action: ClassVar[str] = "finish"
    finish: StrictStr = Field(description="the reason (text)")


class GiveUp(Action):
    """``{"give_up": "why"}``: stop, gave up."""

    action: ClassVar[str] = "give_up"
    give_up: StrictStr = Field(description="the reason (text)")


ACTIONS: dict[str, type[Action]] = {
    a.action: a for a in (Run, Write, Replace, Read, List, Finish, GiveUp)
}
"""The scripted agent's actions by key."""


def parse_steps(steps: Any) -> list[Action]:
    """Scripted steps as ``Action`` models (those given as models are kept); ``ValueError``
    names the first bad entry, its field and what is allowed."""
    if not isinstance(steps, Sequence) or isinstance(steps, str):
        raise ValueError(f"must be a list of actions, got {shown(steps)}")
    return [_step(n, entry) for n, entry in enumerate(steps)]


def _step(n: int, entry: Any) -> Action:
    if isinstance(entry, Action):
        return entry
    where = f"steps[{n}]"
    if not isinstance(entry, Mapping):
        raise ValueError(f"{where} must be a mapping, got {type(entry).__name__}")
    keys = [k for k in entry if k in ACTIONS]
    if len(keys) != 1:
        raise ValueError(
            f"{where} must hold exactly one action of {', '.join(ACTIONS)}; got {sorted(entry)}"
        )
    model = ACTIONS[keys[0]]
    try:
        return model.model_validate(entry)
    except ValidationError as exc:
        err = exc.errors()[0]
    field = str(err["loc"][0])
    if err["type"] == "extra_forbidden":
        names = ", ".join(sorted(model.model_fields))
        raise ValueError(
            f"{where}: unknown field {field!r} for a {keys[0]!r} action; allowed: {names}"
        )
    if err["type"] == "missing":
        raise ValueError(f"{where}: a {keys[0]!r} action needs {field!r}")
    raise ValueError(f"{where}: field {field!r} {explain(err, model)}")


class ScriptedConfig(AgentConfig):
    """``scripted``: a fixed list of actions (``treesearch.agents.scripted``)."""

    kind: Literal["scripted"] = "scripted"
    steps: list[SerializeAsAny[Action]] = Field(
        description="a list of actions (run/write/replace/read/list/finish/give_up)"
    )
    rollback_on_error: StrictBool = Field(True, description="true (default) or false")
    observation_chars: StrictInt = Field(
        2000, gt=0, description="an integer > 0 (transcript excerpt length)"
    )

    @field_validator("steps", mode="before")
    @classmethod
    def _actions(cls, steps: Any) -> list[Action]:
        return parse_steps(steps)


# --- patch ------------------------------------------------------------------------------------


class PatchConfig(AgentConfig):
    """``patch``: unified diffs applied in order (``treesearch.agents.patch``)."""

    kind: Literal["patch"] = "patch"
    patches: list[StrictStr] = Field(
        default_factory=list, description="a list of unified diffs (inline text or file paths)"
    )
    patch: StrictStr | None = Field(
        None, description="one unified diff (inline text or a file path)"
    )
    strip: StrictInt = Field(
        1, ge=0, description="an integer >= 0 (leading path components to remove, default 1)"
    )
    base_dir: StrictStr | None = Field(
        None, description="a folder that relative patch paths are resolved against"
    )

    @model_validator(mode="after")
    def _some_patch(self) -> PatchConfig:
        if self.patch is None and not self.patches:
            raise ValueError("give 'patches' (a list) or 'patch' (one diff)")
        return self

    def agent_kwargs(self) -> dict[str, Any]:
        first = [] if self.patch is None else [self.patch]
        return {
            "patches": first + list(self.patches),
            "strip": self.strip,
            "base_dir": self.base_dir,
        }


# --- command ----------------------------------------------------------------------------------


class CommandConfig(AgentConfig):
    """``command``: an external agent CLI run in the workspace (``treesearch.agents.command``)."""

    kind: Literal["command"] = "command"
    command: Annotated[str | list[str], BeforeValidator(check_command)] = Field(
        description="an argv list of strings or a shell command string "
        "({task}, {feedback}, {workspace}, {max_steps} are replaced)"
    )
    stdin: StrictBool = Field(
        False, description="true or false: feed the task text on standard input (default false)"
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="a mapping of extra environment variables (strings)"
    )
    timeout: Number | None = Field(None, gt=0, description="seconds > 0")
    limits: dict[str, Any] | None = Field(
        None, description="a mapping with cpu_seconds, memory_bytes, file_size_bytes, open_files"
    )
    tail_chars: StrictInt = Field(4000, gt=0, description="an integer > 0")

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, value: Any) -> Any:
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) and k and "=" not in k
            for k, v in value.items()
        ):
            raise ValueError("must map variable names to strings")
        return value

    @field_validator("limits", mode="before")
    @classmethod
    def _limits(cls, value: Any) -> Any:
        from treesearch import sandbox
        from treesearch.errors import SandboxError

        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise ValueError("must be a mapping")
        try:
            sandbox.Limits(**value)
        except TypeError as exc:
            raise ValueError(
                f"allows cpu_seconds, memory_bytes, file_size_bytes, open_files ({exc})"
            ) from None
        except SandboxError as exc:
            raise ValueError(f"is wrong: {exc}") from None
        return value

    def agent_kwargs(self) -> dict[str, Any]:
        from treesearch import sandbox

        kw = self.fields()
        kw["limits"] = None if self.limits is None else sandbox.Limits(**self.limits)
        return kw


# --- python -----------------------------------------------------------------------------------


class PythonConfig(AgentConfig):
    """``python``: a Python function called with the context (``treesearch.agents.python``)."""

    kind: Literal["python"] = "python"
    function: StrictStr = Field(description="a dotted path 'package.module:function'")
    options: dict[str, Any] = Field(
        default_factory=dict, description="a mapping of keyword arguments for the function"
    )

    @field_validator("function")
    @classmethod
    def _dotted(cls, value: str) -> str:
        if ":" not in value:
            raise ValueError(f"must be a dotted path like 'package.module:function', got {value!r}")
        return value


# --- llm --------------------------------------------------------------------------------------


class LLMAgentConfig(AgentConfig):
    """``llm``: a model behind an OpenAI-compatible API (``treesearch.agents.llm``); the
    ``LLMAgent`` takes this model itself. The API key is read from ``api_key_env`` when a request
    is sent and is never recorded; ``extra_body`` is part of the response cache's key; a
    ``Retry-After`` header wins over ``retry_backoff``; ``request_timeout`` is cut further by the
    run's own deadline."""

    kind: Literal["llm"] = "llm"
    model: StrictStr = Field(description="the model name the server knows (required)")
    base_url: StrictStr = Field(
        "https://api.openai.com/v1",
        description="the OpenAI-compatible endpoint, e.g. http://localhost:11434/v1",
    )
    api_key_env: StrictStr | None = Field(
        "OPENAI_API_KEY",
        description="name of the environment variable holding the API key, or null for none",
    )
    temperature: Number = Field(0.0, ge=0, description="a number >= 0 (default 0)")
    max_tokens: StrictInt | None = Field(
        4096, ge=1, description="an integer > 0: most tokens per reply (default 4096), or null"
    )
    seed: StrictInt | None = Field(
        None,
        description="an integer sent with each request (sample k of a node gets seed + k), or null",
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict,
        description="a mapping of further request fields (e.g. top_p), sent as is",
    )
    request_timeout: Number = Field(
        120.0, gt=0, description="a number > 0: seconds per model request (default 120)"
    )
    retries: StrictInt = Field(
        4,
        ge=0,
        description="an integer >= 0: retries on 429, 5xx, timeouts and lost connections "
        "(default 4)",
    )
    retry_backoff: Number = Field(
        1.0,
        ge=0,
        description="a number >= 0: seconds before the first retry, doubled each time (default 1)",
    )
    retry_max_wait: Number = Field(
        60.0,
        ge=0,
        description="a number >= 0: the longest wait between retries, in seconds (default 60)",
    )
    input_price: Number = Field(
        0.0, ge=0, description="a number >= 0: USD per million input tokens (default 0)"
    )
    output_price: Number = Field(
        0.0, ge=0, description="a number >= 0: USD per million output tokens (default 0)"
    )
    token_limit: StrictInt | None = Field(
        None,
        ge=1,
        description="an integer > 0: most tokens (input + output) per agent run, or null",
    )
    cost_limit: Number | None = Field(
        None, gt=0, description="a number > 0: most USD per agent run, or null"
    )
    context_tokens: StrictInt = Field(
        32000,
        ge=1,
        description="an integer > 0: the prompt budget; older observations are shortened to fit "
        "(default 32000)",
    )
    observation_chars: StrictInt = Field(
        12000,
        ge=1,
        description="an integer > 0: most characters of one tool result shown to the model "
        "(default 12000)",
    )
    command_timeout: Number | None = Field(
        None,
        gt=0,
        description="a number > 0: seconds one 'run' command may take (default: the session's)",
    )
    mode: Literal["tools", "text"] = Field(
        "tools",
        description="'tools' (function calling, default) or 'text' (one fenced shell block per turn)",
    )
    instructions: StrictStr = Field(
        "", description="strategy guidance put in the system prompt's {instructions}"
    )
    prompts: Prompts = Field(
        default_factory=Prompts,
        description="a mapping of template name to text, overriding the defaults: system, "
        "task, feedback, siblings, text_mode",
    )
    cache: StrictStr | Literal[False] | None = Field(
        None,
        description="folder of the response cache; default <cache_dir>/llm-cache; false: no cache",
    )
    replay: StrictBool = Field(
        False,
        description="true or false: true answers from the cache only, and fails on a request it "
        "does not hold",
    )

    @field_validator("model", "base_url", "api_key_env")
    @classmethod
    def _not_blank(cls, value: str | None, info: Any) -> str | None:
        if value is not None and not value.strip():
            raise ValueError(
                f"must be {cls.model_fields[info.field_name].description}, got {value!r}"
            )
        return value

    @field_validator("extra_body")
    @classmethod
    def _extra(cls, value: dict[str, Any]) -> dict[str, Any]:
        clash = sorted(set(value) & {"model", "messages", "tools", "stream"})
        if clash:
            raise ValueError(f"extra_body may not set {', '.join(clash)}")
        return value

    @field_validator("prompts", mode="before")
    @classmethod
    def _prompts(cls, value: Any) -> Any:
        return {} if value is None else value  # `prompts:` with nothing: the defaults

    @field_validator("cache", mode="before")
    @classmethod
    def _cache(cls, value: Any) -> Any:
        if value is None or value is False or (isinstance(value, str) and value.strip()):
            return value
        raise ValueError("must be a folder path or false")

    @model_validator(mode="after")
    def _replay_needs_cache(self) -> LLMAgentConfig:
        if self.replay and self.cache is False:
            raise ValueError("'replay: true' needs a cache (it is set to false)")
        return self

    @property
    def use_cache(self) -> bool:
        """False when the config says ``cache: false``: every request is sent."""
        return self.cache is not False

    @property
    def cache_folder(self) -> Path | None:
        """The response cache folder; ``None``: ``<cache_dir>/llm-cache`` (if there is one)."""
        return Path(self.cache).expanduser() if isinstance(self.cache, str) else None

    def agent_kwargs(self) -> dict[str, Any]:
        return {"config": self}


# --- mutation ---------------------------------------------------------------------------------


def _families() -> tuple[str, ...]:
    from treesearch.agents.mutation.ranking import ALL_FAMILIES

    return ALL_FAMILIES


def _formulas() -> tuple[str, ...]:
    from treesearch.agents.mutation.localize import FORMULAS

    return tuple(FORMULAS)


class MutationConfig(AgentConfig):
    """``mutation``: fault localisation plus sampled or ranked program edits
    (``treesearch.agents.mutation``); what ``MutationAgent`` is built from."""

    kind: Literal["mutation"] = "mutation"
    operators: list[StrictStr] | None = Field(
        None,
        description="a list of families (or 'all'; default: the classic operators when sampled, "
        "all when ranked), see treesearch.agents.mutation.ranking.ALL_FAMILIES",
    )
    order: Literal["sampled", "ranked"] = Field(
        "sampled",
        description="sampled (default: one seeded draw per expansion) or ranked (best untried "
        "first)",
    )
    formula: StrictStr = Field(
        "ochiai",
        description="the localisation formula: ochiai, tarantula or dstar (default ochiai)",
    )
    top_lines: StrictInt = Field(
        10,
        ge=1,
        description="how many of the most suspicious lines to mutate, an integer > 0 (default 10)",
    )
    edits: StrictInt = Field(
        1, ge=1, description="edits per expansion, an integer > 0, capped by max_steps (default 1)"
    )
    seed: StrictInt = Field(0, description="an integer mixed into the random stream (default 0)")
    coverage: StrictBool = Field(
        True, description="true (default: localise with coverage) or false (tracebacks only)"
    )
    relocalize: StrictBool = Field(
        False,
        description="false (default: a child inherits its parent's ranking) or true (run anew)",
    )
    traceback_boost: Number = Field(
        0.5, ge=0, description="a number >= 0 added for lines in failing tracebacks (default 0.5)"
    )
    family_weights: dict[str, float] | None = Field(
        None, description="a mapping family -> weight >= 0 (default 1; delete and insert 0.5)"
    )
    exclude: list[StrictStr] = Field(
        default_factory=list,
        description="a list of path globs never mutated (test files are always left out)",
    )
    tests: TestSpec | None = Field(
        None,
        description="a test spec mapping (command, timeout, env, ...) used when the search gives "
        "none",
    )

    @field_validator("operators", mode="before")
    @classmethod
    def _operators(cls, value: Any) -> Any:
        if value is None:  # the default (all), as a run's resolved config.yaml records it
            return None
        if value == "all":
            return list(_families())
        if not isinstance(value, list) or not all(isinstance(o, str) for o in value):
            raise ValueError(f"must be a list of operator families out of {', '.join(_families())}")
        unknown = [op for op in value if op not in _families()]
        if unknown or not value:
            raise ValueError(f"must list families out of {', '.join(_families())}; got {value!r}")
        return value

    @field_validator("formula")
    @classmethod
    def _formula(cls, value: str) -> str:
        if value not in _formulas():
            raise ValueError(f"must be one of {', '.join(_formulas())}; got {value!r}")
        return value

    @field_validator("family_weights", mode="before")
    @classmethod
    def _weights(cls, value: Any) -> Any:
        if value is None:
            return None
        ok = isinstance(value, Mapping) and all(
            isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool)
            for k, v in value.items()
        )
        bad = [] if not ok else [f for f, w in value.items() if f not in _families() or not w >= 0]
        if not ok or bad:
            raise ValueError(
                f"must map families out of {', '.join(_families())} to numbers >= 0"
                + (f"; bad: {', '.join(map(str, bad))}" if bad else "")
            )
        return value

    def agent_kwargs(self) -> dict[str, Any]:
        return {"config": self}


AGENT_MODELS: dict[str, type[AgentConfig]] = {
    "command": CommandConfig,
    "llm": LLMAgentConfig,
    "mutation": MutationConfig,
    "patch": PatchConfig,
    "python": PythonConfig,
    "scripted": ScriptedConfig,
}
"""The built-in kinds' config models."""
