"""A real OpenAI-compatible chat-completions server on 127.0.0.1 for the LLM agent's tests.

``FakeLLMServer(script)`` listens on an ephemeral loopback port (stdlib ``http.server``, one
thread per request) and answers ``POST /v1/chat/completions`` with what ``script(body, n)``
returns for the n-th request (0-based): a ``Reply``. Helpers build the usual replies::

    with FakeLLMServer(lambda body, n: tool_reply(call("read_file", path="a.py"))) as server:
        server.base_url         # "http://127.0.0.1:PORT/v1"
        server.requests         # the parsed JSON bodies received, in order
        server.headers          # their headers

``FakeLLMServer(script, max_request_chars=N)`` refuses a request body longer than N characters
the way OpenAI does (HTTP 400, code ``context_length_exceeded``), without calling the script;
such requests go to ``server.too_long``. ``Reply(delay=2.0, ...)`` answers late (the wait ends early when the server stops, so a test
never waits for a reply nobody reads); ``error_reply(429, retry_after=0)`` sends an error status.
``stop()`` (or leaving the ``with`` block) shuts the server down and joins every thread.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "FakeLLMServer",
    "Reply",
    "ScriptFn",
    "call",
    "error_reply",
    "sequence",
    "text_reply",
    "tool_reply",
]


@dataclass
class Reply:
    """One HTTP answer."""

    body: Any = None
    """JSON body (a dict) or raw ``bytes``/``str`` sent as is."""
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    """Seconds to wait before answering."""


ScriptFn = Callable[[dict[str, Any], int], Reply]
"""``script(body, n)``: the reply to the n-th request (0-based), given its JSON body."""

_ids = itertools.count(1)


def call(name: str, _id: str | None = None, _raw: str | None = None, **arguments: Any) -> dict:
    """A tool call in OpenAI form; ``_raw`` sends that exact arguments string (e.g. bad JSON)."""
    args = _raw if _raw is not None else json.dumps(arguments)
    return {
        "id": _id or f"call_{next(_ids)}",
        "type": "function",
        "function": {"name": name, "arguments": args},
    }


def _completion(message: dict[str, Any], finish: str, usage: tuple[int, int]) -> dict:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": usage[0] + usage[1],
        },
    }


def tool_reply(
    *calls: dict, content: str | None = None, usage: tuple[int, int] = (100, 20), delay: float = 0
) -> Reply:
    """A completion whose message makes the given tool calls."""
    message = {"role": "assistant", "content": content, "tool_calls": list(calls)}
    return Reply(_completion(message, "tool_calls", usage), delay=delay)


def text_reply(text: str, *, usage: tuple[int, int] = (100, 20), delay: float = 0) -> Reply:
    """A completion with text only."""
    return Reply(_completion({"role": "assistant", "content": text}, "stop", usage), delay=delay)


def error_reply(status: int, message: str = "error", *, retry_after: float | None = None) -> Reply:
    """An error status with an OpenAI-style error body."""
    headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
    return Reply({"error": {"message": message, "type": "fake", "code": status}}, status, headers)


def sequence(replies: Sequence[Reply]) -> ScriptFn:
    """A script that gives ``replies`` in order (and fails the request past the end)."""

    def script(body: dict[str, Any], n: int) -> Reply:
        if n < len(replies):
            return replies[n]
        return error_reply(500, f"the fake server's script has only {len(replies)} replies")

    return script


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins every request thread
    block_on_close = True

    def __init__(self, owner: FakeLLMServer) -> None:
        self.owner = owner
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (timeout) closes its socket; the late write then fails here.
        pass


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(Reply({"error": {"message": f"no route {self.path}"}}, 404))
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._send(Reply({"error": {"message": "body is not JSON"}}, 400))
            return
        if owner.max_request_chars is not None and len(raw) > owner.max_request_chars:
            with owner.lock:
                owner.too_long.append(body)
            limit = owner.max_request_chars // 4
            message = (
                f"This model's maximum context length is {limit} tokens. However, your "
                f"messages resulted in {len(raw) // 4} tokens. Please reduce the length of the "
                "messages."
            )
            error = {
                "message": message,
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
            self._send(Reply({"error": error}, 400))
            return
        with owner.lock:
            n = len(owner.requests)
            owner.requests.append(body)
            owner.headers.append(dict(self.headers))
        try:
            reply = owner.script(body, n)
        except Exception as exc:  # a broken script answers 500, and the test sees why
            owner.errors.append(f"{type(exc).__name__}: {exc}")
            reply = Reply({"error": {"message": f"script error: {exc}"}}, 500)
        if reply.delay and owner.stopping.wait(reply.delay):
            return
        self._send(reply)

    def _send(self, reply: Reply) -> None:
        if isinstance(reply.body, bytes):
            data = reply.body
        elif isinstance(reply.body, str):
            data = reply.body.encode()
        else:
            data = json.dumps(reply.body).encode()
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


class FakeLLMServer:
    """The server (see the module docstring). Use as a context manager."""

    def __init__(self, script: ScriptFn, *, max_request_chars: int | None = None) -> None:
        self.script = script
        self.max_request_chars = max_request_chars
        """Longer request bodies get HTTP 400 ``context_length_exceeded``."""
        self.too_long: list[dict[str, Any]] = []
        """The request bodies refused as too long (not in ``requests``)."""
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.errors: list[str] = []
        """Exceptions raised by the script (each answered with a 500)."""
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        """Shut down: late replies are dropped, every request thread is joined, the port closed."""
        if self.stopping.is_set():
            return
        self.stopping.set()
        self._server.shutdown()
        self._thread.join()
        self._server.server_close()

    def __enter__(self) -> FakeLLMServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
