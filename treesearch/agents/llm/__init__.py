"""The ``llm`` agent: a language model behind an OpenAI-compatible chat-completions endpoint.

Works with hosted APIs and with local vLLM, Ollama or LiteLLM servers (optional extra
``treesearch[llm]``, built on the openai SDK). The model acts through the session's tools
(``read_file``, ``list_dir``, ``write_file``, ``replace_in_file``, ``run``) plus ``run_tests``
(the search's tests, when the controller offers them) and ``finish``; with ``mode: text`` it
answers with one fenced shell block per turn instead, for models without tool calling.

Every request and response goes into the run's transcript (``AgentResult.transcript``; never the
API key), and into a response cache keyed by a hash of the request, so a search can be run again
offline with identical results (``replay: true`` refuses any request the cache lacks). Tokens go
to ``AgentResult.cost``; the USD cost is in the transcript's ``usage`` event. See ``docs/llm.md``.

Public names: ``LLMAgent`` (the agent, built from a validated
``treesearch.agents.configs.LLMAgentConfig``; ``LLMAgent.from_config(fields)``), ``Prompts``
(the templates), ``ResponseCache``, ``request_key`` and ``requests_from_transcript`` (recording
and replay), ``ModelRequestError`` and ``ReplayMissError`` (the errors a run reports as its
failure reason).
"""

from __future__ import annotations

from treesearch.agents.llm.agent import LLMAgent
from treesearch.agents.llm.client import ModelRequestError
from treesearch.agents.llm.prompts import Prompts
from treesearch.agents.llm.replay import (
    ReplayMissError,
    ResponseCache,
    request_key,
    requests_from_transcript,
)

__all__ = [
    "LLMAgent",
    "ModelRequestError",
    "Prompts",
    "ReplayMissError",
    "ResponseCache",
    "request_key",
    "requests_from_transcript",
]
