"""The ``llm`` agent's configuration: one frozen value (``LLMAgentConfig`` in
``treesearch.agents.configs`` checks the YAML fields and builds it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from treesearch.agents.llm.prompts import Prompts

__all__ = ["LLMConfig"]


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
