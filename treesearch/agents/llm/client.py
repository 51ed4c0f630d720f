"""The HTTP side: one chat-completions request through the openai SDK, with bounded retries.

This module is the boundary to the openai SDK: its exceptions become ``ModelRequestError`` here
and nowhere else. The SDK's own retries are off; ``ChatClient`` retries 408, 409, 429 and 5xx
statuses, timeouts and lost connections itself, with exponential backoff (a ``Retry-After``
header wins), within the run's deadline, and reports each retry to its caller for the transcript.
A refused connection (nothing listens at the address, or the name does not resolve) is not
retried: the server is not there, and waiting would only cost the search its time.

``read_api_key`` is the package's only read of the process environment (the key's variable is
named by the config's ``api_key_env``); the key goes to the SDK and nowhere else, and is scrubbed
from every error message.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from treesearch.errors import AgentError

__all__ = [
    "ChatClient",
    "ChatReply",
    "ContextLengthError",
    "ModelDeadlineError",
    "ModelRequestError",
    "parse_reply",
    "read_api_key",
]

NO_KEY = "no-key"
"""Sent as the key when ``api_key_env`` is null (local servers ignore it; the SDK needs one)."""

_SDK_ARGS = ("model", "messages", "tools", "tool_choice", "temperature", "max_tokens", "seed")


class ModelRequestError(AgentError):
    """A request to the model failed for good: an error status not worth retrying, retries used
    up, an unreadable reply, or a missing API key."""


class ContextLengthError(ModelRequestError):
    """The server refused the request as longer than the model's context (HTTP 400
    ``context_length_exceeded`` or its wording): shorten the conversation and send it again."""


_CONTEXT_WORDS = (
    "context_length_exceeded",
    "context length",
    "context window",
    "maximum context",
    "prompt is too long",
    "too many tokens",
    "input is too long",
)


def _is_context_error(status: int, exc: Any, detail: str) -> bool:
    if status not in (400, 413, 422):
        return False
    body = getattr(exc, "body", None)
    code = ""
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            code = str(inner.get("code") or "")
    text = f"{code} {detail}".lower()
    return any(word in text for word in _CONTEXT_WORDS)


class ModelDeadlineError(ModelRequestError):
    """The run's time limit came before the model answered."""


def read_api_key(env_name: str | None) -> str:
    """The API key from the environment variable ``env_name`` (``None``: no key needed).

    The one place the llm package reads the environment: the issue asks for the key to come from
    a variable the config names, so it never sits in a config file, run directory or log.
    """
    if env_name is None:
        return NO_KEY
    value = os.environ.get(env_name, "")
    if not value.strip():
        raise ModelRequestError(
            f"the API key variable {env_name} (config field api_key_env) is not set; export it, "
            "or set api_key_env: null for a server that needs no key"
        )
    return value.strip()


@dataclass(frozen=True)
class ChatReply:
    """The parts of a chat-completions response the agent uses."""

    content: str | None
    """The assistant's text."""
    tool_calls: list[Any]
    """Tool calls as the server sent them (not yet checked)."""
    finish_reason: str | None
    """``stop``, ``tool_calls``, ``length``..."""
    tokens_in: int
    """Prompt tokens (from ``usage``; estimated when the server sent none)."""
    tokens_out: int
    """Completion tokens (likewise)."""
    estimated: bool = False
    """True when the server reported no usage and the token counts are estimates."""


def parse_reply(data: Any, request_chars: int) -> ChatReply:
    """Read a response body; raises ``ModelRequestError`` when it is not a chat completion."""
    if not isinstance(data, Mapping):
        raise ModelRequestError(f"the server's reply is not a JSON object: {str(data)[:200]!r}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise ModelRequestError(f"the server's reply has no choices: {json.dumps(data)[:300]}")
    message = choices[0].get("message")
    if not isinstance(message, Mapping):
        raise ModelRequestError(f"the server's reply has no message: {json.dumps(data)[:300]}")
    content = message.get("content")
    if isinstance(content, list):  # content parts
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    elif content is not None and not isinstance(content, str):
        content = str(content)
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        calls = [calls]
    usage = data.get("usage") if isinstance(data.get("usage"), Mapping) else None
    tin = usage.get("prompt_tokens") if usage else None
    tout = usage.get("completion_tokens") if usage else None
    estimated = not (isinstance(tin, int) and isinstance(tout, int))
    if estimated:
        # Servers that report no usage still count against token budgets: about 4 characters
        # per token.
        tin = math.ceil(request_chars / 4)
        tout = math.ceil((len(content or "") + len(json.dumps(calls))) / 4)
    finish = choices[0].get("finish_reason")
    return ChatReply(
        content=content,
        tool_calls=list(calls),
        finish_reason=finish if isinstance(finish, str) else None,
        tokens_in=int(tin or 0),
        tokens_out=int(tout or 0),
        estimated=estimated,
    )


class ChatClient:
    """Sends chat-completions requests to one endpoint (the SDK client is made on first use)."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key_env: str | None,
        request_timeout: float,
        retries: int,
        retry_backoff: float,
        retry_max_wait: float,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.request_timeout = request_timeout
        self.retries = retries
        self.retry_backoff = retry_backoff
        self.retry_max_wait = retry_max_wait
        self._sleep = sleep
        self._client: Any = None
        self._key: str | None = None

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool (the client can be used again afterwards)."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def _sdk(self) -> Any:
        if self._client is None:
            try:
                import openai
            except ImportError as exc:
                raise ModelRequestError(
                    "the llm agent needs the openai package: pip install 'treesearch[llm]'"
                ) from exc
            self._key = read_api_key(self.api_key_env)
            self._client = openai.OpenAI(
                api_key=self._key,
                base_url=self.base_url,
                max_retries=0,
                timeout=self.request_timeout,
            )
        return self._client

    def scrub(self, text: str) -> str:
        """``text`` without the API key."""
        if self._key and self._key != NO_KEY:
            text = text.replace(self._key, "***")
        return text

    def complete(
        self,
        request: Mapping[str, Any],
        *,
        deadline: float | None = None,
        on_retry: Callable[[dict[str, Any]], None] | None = None,
    ) -> tuple[dict[str, Any], int]:
        """Send ``request`` (a chat-completions body); returns the response JSON and the number of
        attempts it took. ``deadline`` (``time.monotonic()``) bounds every attempt and wait."""
        client = self._sdk()
        kwargs = {k: request[k] for k in _SDK_ARGS if k in request}
        extra = {k: v for k, v in request.items() if k not in _SDK_ARGS}
        attempt = 0
        while True:
            attempt += 1
            timeout = self.request_timeout
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0.05:
                    raise ModelDeadlineError(
                        "the run's time limit was reached before the model answered"
                    )
                timeout = min(timeout, remaining)
            data, problem, retry_after = self._attempt(client, kwargs, extra, timeout)
            if data is not None:
                return data, attempt
            if attempt > self.retries:
                raise ModelRequestError(
                    f"the model server ({self.base_url}) failed {attempt} time(s) "
                    f"(retries: {self.retries}); last: {problem}"
                )
            wait = self.retry_backoff * 2 ** (attempt - 1)
            if retry_after is not None:
                wait = retry_after
            wait = min(wait, self.retry_max_wait)
            if deadline is not None and time.monotonic() + wait >= deadline:
                raise ModelDeadlineError(
                    f"the run's time limit was reached while retrying the model ({problem})"
                )
            if on_retry is not None:
                on_retry({"attempt": attempt, "error": problem, "wait": round(wait, 3)})
            if wait > 0:
                self._sleep(wait)

    def _attempt(
        self, client: Any, kwargs: dict[str, Any], extra: dict[str, Any], timeout: float
    ) -> tuple[dict[str, Any] | None, str, float | None]:
        """One request: ``(response JSON, "", None)``, or ``(None, problem, Retry-After)`` for a
        failure worth a retry; raises for the others."""
        import openai

        try:
            raw = client.chat.completions.with_raw_response.create(
                **kwargs, extra_body=extra or None, timeout=timeout
            )
            text = raw.text
        except openai.APITimeoutError:
            return None, f"no answer within {timeout:.3g} s", None
        except openai.APIConnectionError as exc:
            unreachable = _unreachable(exc)
            if unreachable is not None:
                raise ModelRequestError(
                    f"cannot reach the model server at {self.base_url}: {unreachable} "
                    "(is it running? check base_url)"
                ) from None
            return None, f"connection failed: {self.scrub(str(exc))}", None
        except openai.APIStatusError as exc:
            status = exc.status_code
            detail = self.scrub(_error_detail(exc))
            if _is_context_error(status, exc, detail):
                raise ContextLengthError(
                    f"the model server ({self.base_url}) answered HTTP {status}: {detail}"
                ) from None
            if not (status in (408, 409, 429) or status >= 500):
                raise ModelRequestError(
                    f"the model server ({self.base_url}) answered HTTP {status}: {detail}"
                ) from None
            return None, f"HTTP {status}: {detail}", _retry_after(exc)
        except openai.OpenAIError as exc:
            raise ModelRequestError(
                f"request to {self.base_url} failed: {self.scrub(str(exc))}"
            ) from None
        try:
            data = json.loads(text)
        except ValueError:
            raise ModelRequestError(
                f"the model server ({self.base_url}) sent a reply that is not JSON: "
                f"{self.scrub(text[:200])!r}"
            ) from None
        if not isinstance(data, dict):
            raise ModelRequestError(
                f"the model server ({self.base_url}) sent JSON that is not an object"
            )
        return data, "", None


def _unreachable(exc: BaseException) -> str | None:
    """``"connection refused"`` (or the name-resolution error) when ``exc`` was caused by a
    server that is not there, else ``None`` (a lost or reset connection is worth a retry)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cur, socket.gaierror) and cur.errno == socket.EAI_NONAME:
            return f"cannot resolve the host name ({cur.strerror or cur})"
        text = str(cur)
        if "Connection refused" in text or "[Errno 111]" in text:
            return "connection refused"
        cur = cur.__cause__ or cur.__context__
    return None


def _error_detail(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and isinstance(inner.get("message"), str):
            return str(inner["message"])[:500]
        return json.dumps(body)[:500]
    return str(getattr(exc, "message", exc))[:500]


def _retry_after(exc: Any) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue  # an HTTP date: fall back to the backoff
        if seconds >= 0 and math.isfinite(seconds):
            return seconds
    return None
