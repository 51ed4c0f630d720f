"""The ``llm`` agent's configuration: one frozen value, read and checked from a config mapping."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from treesearch.agents import check_fields
from treesearch.agents.llm.prompts import Prompts
from treesearch.errors import AgentError

__all__ = ["FIELDS", "LLMConfig"]

FIELDS: dict[str, str] = {
    "model": "the model name the server knows (required)",
    "base_url": "the OpenAI-compatible endpoint, e.g. http://localhost:11434/v1",
    "api_key_env": "name of the environment variable holding the API key, or null for none",
    "temperature": "a number >= 0 (default 0)",
    "max_tokens": "an integer > 0: most tokens per reply (default 4096), or null",
    "seed": "an integer sent with each request (sample k of a node gets seed + k), or null",
    "extra_body": "a mapping of further request fields (e.g. top_p), sent as is",
    "request_timeout": "seconds per model request (default 120)",
    "retries": "an integer >= 0: retries on 429, 5xx, timeouts and lost connections (default 4)",
    "retry_backoff": "seconds before the first retry, doubled each time (default 1)",
    "retry_max_wait": "the longest wait between retries, in seconds (default 60)",
    "input_price": "USD per million input tokens (default 0)",
    "output_price": "USD per million output tokens (default 0)",
    "token_limit": "most tokens (input + output) per agent run, or null",
    "cost_limit": "most USD per agent run, or null",
    "context_tokens": "the prompt budget; older observations are shortened to fit (default 32000)",
    "observation_chars": "most characters of one tool result shown to the model (default 12000)",
    "command_timeout": "seconds one 'run' command may take (default: the session's)",
    "mode": "'tools' (function calling, default) or 'text' (one fenced shell block per turn)",
    "instructions": "strategy guidance put in the system prompt's {instructions}",
    "prompts": "templates overriding the defaults: system, task, feedback, siblings, text_mode",
    "cache": "folder of the response cache; default <cache_dir>/llm-cache; false: no cache",
    "replay": "true: answer from the cache only, and fail on a request it does not hold",
}
"""Every config field, with what it allows (the text of ``check_fields`` errors)."""


@dataclass(frozen=True)
class LLMConfig:
    """What an ``LLMAgent`` is built from (the YAML fields, checked)."""

    model: str
    """Model name as the server knows it."""
    base_url: str = "https://api.openai.com/v1"
    """The chat-completions endpoint (a hosted API, vLLM, Ollama, LiteLLM...)."""
    api_key_env: str | None = "OPENAI_API_KEY"
    """Environment variable that holds the API key; ``None``: send no real key (local servers).
    The key is read when a request is sent and is never recorded."""
    temperature: float = 0.0
    """Sampling temperature."""
    max_tokens: int | None = 4096
    """Most tokens per reply (``None``: the server's default)."""
    seed: int | None = None
    """Sent with each request; sample ``k`` of a node gets ``seed + k``."""
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    """Further request fields, sent as is and part of the cache key."""
    request_timeout: float = 120.0
    """Seconds per request (cut further by the run's own deadline)."""
    retries: int = 4
    """Retries after a 408/409/429/5xx status, a timeout or a lost connection."""
    retry_backoff: float = 1.0
    """Seconds before the first retry; doubled each time (a ``Retry-After`` header wins)."""
    retry_max_wait: float = 60.0
    """Upper bound of one wait between retries."""
    input_price: float = 0.0
    """USD per million input tokens."""
    output_price: float = 0.0
    """USD per million output tokens."""
    token_limit: int | None = None
    """Tokens (input + output) one run may use; ``None``: no limit."""
    cost_limit: float | None = None
    """USD one run may spend; ``None``: no limit."""
    context_tokens: int = 32000
    """Prompt budget; older observations are shortened to fit."""
    observation_chars: int = 12000
    """Most characters of one tool result shown to the model (cut in the middle)."""
    command_timeout: float | None = None
    """Seconds one ``run`` command may take (``None``: the session's timeout)."""
    mode: str = "tools"
    """``tools`` (function calling) or ``text`` (one fenced shell block per turn)."""
    instructions: str = ""
    """Strategy-specific guidance (the system prompt's ``{instructions}``)."""
    prompts: Prompts = field(default_factory=Prompts)
    """The prompt templates."""
    cache: Path | None = None
    """Response cache folder; ``None``: ``ctx.cache_dir / "llm-cache"`` (if there is one)."""
    use_cache: bool = True
    """False (config ``cache: false``): no cache; every request is sent."""
    replay: bool = False
    """Answer from the cache only; a request it does not hold fails the run."""

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> LLMConfig:
        """Read and check the fields of an ``llm`` strategy (``AgentError`` names the field)."""
        check_fields("llm", config, FIELDS)
        c = dict(config)
        model = c.get("model")
        if not isinstance(model, str) or not model.strip():
            raise AgentError(f"llm agent: field 'model' is required: {FIELDS['model']}")
        kw: dict[str, Any] = {"model": model}
        for name in ("base_url", "instructions"):
            if name in c:
                kw[name] = _text(c[name], name, empty_ok=name == "instructions")
        if "api_key_env" in c:
            value = c["api_key_env"]
            kw["api_key_env"] = None if value is None else _text(value, "api_key_env")
        if "mode" in c:
            if c["mode"] not in ("tools", "text"):
                raise AgentError(f"llm agent: field 'mode' must be {FIELDS['mode']}")
            kw["mode"] = c["mode"]
        for name, lowest, strict in (
            ("temperature", 0.0, False),
            ("request_timeout", 0.0, True),
            ("retry_backoff", 0.0, False),
            ("retry_max_wait", 0.0, False),
            ("input_price", 0.0, False),
            ("output_price", 0.0, False),
        ):
            if name in c:
                kw[name] = _number(c[name], name, lowest, strict)
        for name in ("cost_limit", "command_timeout"):
            if c.get(name) is not None:
                kw[name] = _number(c[name], name, 0.0, True)
        for name, lowest in (("retries", 0), ("context_tokens", 1), ("observation_chars", 1)):
            if name in c:
                kw[name] = _integer(c[name], name, lowest)
        for name in ("max_tokens", "token_limit"):
            if name in c:
                kw[name] = None if c[name] is None else _integer(c[name], name, 1)
        if c.get("seed") is not None:
            kw["seed"] = _integer(c["seed"], "seed", None)
        if "extra_body" in c:
            extra = c["extra_body"]
            if not isinstance(extra, Mapping) or not all(isinstance(k, str) for k in extra):
                raise AgentError(f"llm agent: field 'extra_body' must be {FIELDS['extra_body']}")
            clash = sorted(set(extra) & {"model", "messages", "tools", "stream"})
            if clash:
                raise AgentError(f"llm agent: extra_body may not set {', '.join(clash)}")
            kw["extra_body"] = dict(extra)
        kw["prompts"] = Prompts.from_config(c.get("prompts"))
        if "cache" in c:
            value = c["cache"]
            if value is False:
                kw["use_cache"] = False
            elif isinstance(value, str) and value.strip():
                kw["cache"] = Path(value).expanduser()
            elif value is not None:
                raise AgentError("llm agent: field 'cache' must be a folder path or false")
        if "replay" in c:
            if not isinstance(c["replay"], bool):
                raise AgentError("llm agent: field 'replay' must be true or false")
            kw["replay"] = c["replay"]
        if kw.get("replay") and kw.get("use_cache") is False:
            raise AgentError("llm agent: 'replay: true' needs a cache (it is set to false)")
        return cls(**kw)


def _text(value: Any, name: str, *, empty_ok: bool = False) -> str:
    if not isinstance(value, str) or (not empty_ok and not value.strip()):
        raise AgentError(f"llm agent: field {name!r} must be {FIELDS[name]}, got {value!r:.80}")
    return value


def _number(value: Any, name: str, lowest: float, strict: bool) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    finite = ok and value == value and value not in (float("inf"), float("-inf"))
    if finite and (value > lowest or (not strict and value == lowest)):
        return float(value)
    bound = f"> {lowest:g}" if strict else f">= {lowest:g}"
    raise AgentError(
        f"llm agent: field {name!r} must be a number {bound} ({FIELDS[name]}), got {value!r:.80}"
    )


def _integer(value: Any, name: str, lowest: int | None) -> int:
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if is_int and (lowest is None or value >= lowest):
        return int(value)
    bound = "" if lowest is None else f" >= {lowest}"
    raise AgentError(
        f"llm agent: field {name!r} must be an integer{bound} ({FIELDS[name]}), got {value!r:.80}"
    )
