"""Recording and replay: request keys, the response cache, and requests rebuilt from transcripts.

A request's key is the SHA-256 of its canonical JSON (sorted keys, no whitespace, UTF-8, no NaN),
so it is the same in every process and on every machine. The key covers everything that can
change the answer: model, messages, tools, temperature, max_tokens, seed, extra body fields, and
which sample of which node the request belongs to (``sample``), so that two samples of one node
are two draws, not one cached answer. The endpoint (``base_url``), timeouts and retries are
transport and are not part of the key: a recording made against one server replays against none.

Before hashing, *volatile text* in message contents is masked: text that differs between two
runs of the same search although nothing the model could act on changed. That is elapsed-time
figures (``0.31 s``, ``in 0.05s``), memory addresses (``0x7f3a...``), the workspace's absolute
path (a search of a temporary copy works in a new folder each time) and the names of the test
runner's own report files (pytest prints ``generated xml file: ...`` at ``-v``). The request sent to the
model is never altered; only its key is computed from the masked copy.

The cache is a folder of JSON files, one per key (``<key[:2]>/<key>.json``), written atomically,
so concurrent runs can share one cache folder. Each file holds the request as sent (never the API
key) and the raw response.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from treesearch._atomic import write_text
from treesearch.errors import AgentError

__all__ = [
    "CACHE_FORMAT",
    "ReplayMissError",
    "ResponseCache",
    "canonical_json",
    "mask_volatile",
    "request_key",
    "requests_from_transcript",
]

CACHE_FORMAT = "treesearch-llm-cache"
_KEY_VERSION = 1

_DURATION = re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s|sec|secs|seconds)\b")
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")
# The test runner's own report files (``lifecycle.process_dir``: a folder per process), whose
# names pytest prints at -v ("generated xml file: ..."): never the same twice.
_OWN_REPORT = re.compile(r"(?:/[^\s/]+)*/treesearch-\d+/score-[^\s/]+/(?:junit|probe)-[^\s/]+")


class ReplayMissError(AgentError):
    """Replay mode met a request that the recording does not hold."""


def canonical_json(value: Any) -> bytes:
    """Deterministic JSON bytes: sorted keys, no whitespace, UTF-8, NaN refused."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def mask_volatile(text: str, paths: Sequence[str] = ()) -> str:
    """``text`` with the given absolute paths, the test runner's own report files, durations
    and memory addresses masked."""
    for path in sorted({p for p in paths if p and p != "/"}, key=len, reverse=True):
        text = text.replace(path, "<workspace>")
    text = _OWN_REPORT.sub("<report>", text)
    text = _DURATION.sub("<duration>", text)
    return _ADDRESS.sub("<address>", text)


def _mask_message(message: Mapping[str, Any], paths: Sequence[str]) -> dict[str, Any]:
    out = dict(message)
    content = out.get("content")
    if isinstance(content, str):
        out["content"] = mask_volatile(content, paths)
    elif isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
        out["content"] = [
            {**part, "text": mask_volatile(part["text"], paths)}
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
            else part
            for part in content
        ]
    return out


def request_key(
    request: Mapping[str, Any],
    *,
    sample: Mapping[str, Any] | None = None,
    volatile_paths: Sequence[str] = (),
) -> str:
    """The cache key of ``request`` (a chat-completions body) for ``sample`` (e.g. node and
    attempt); see the module docstring for what is masked."""
    body = dict(request)
    messages = body.get("messages")
    if isinstance(messages, list):
        body["messages"] = [
            _mask_message(m, volatile_paths) if isinstance(m, Mapping) else m for m in messages
        ]
    payload = {"v": _KEY_VERSION, "request": body, "sample": dict(sample or {})}
    return hashlib.sha256(canonical_json(payload)).hexdigest()


class ResponseCache:
    """Responses by request key, one JSON file each under ``path``."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        """The cache folder (created on the first ``put``)."""

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r})"

    def _file(self, key: str) -> Path:
        if not re.fullmatch(r"[0-9a-f]{64}", key):
            raise AgentError(f"llm cache: {key!r} is not a request key")
        return self.path / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The recorded response for ``key``, or ``None`` (an unreadable entry counts as none)."""
        try:
            entry = json.loads(self._file(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(entry, dict) or entry.get("key") != key:
            return None
        response = entry.get("response")
        return response if isinstance(response, dict) else None

    def put(self, key: str, request: Mapping[str, Any], response: Mapping[str, Any]) -> Path:
        """Record ``response`` for ``key`` (atomically; an existing entry is replaced)."""
        target = self._file(key)
        entry = {
            "format": CACHE_FORMAT,
            "version": 1,
            "key": key,
            "request": request,
            "response": response,
        }
        data = json.dumps(entry, ensure_ascii=False, indent=1, sort_keys=True)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            write_text(target, data)
        except OSError as exc:
            raise AgentError(f"llm cache: cannot write to {target.parent}: {exc}") from exc
        return target

    def keys(self) -> list[str]:
        """Every key held, sorted."""
        if not self.path.is_dir():
            return []
        return sorted(p.stem for p in self.path.glob("??/*.json"))


def requests_from_transcript(transcript: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The full request bodies of a run, rebuilt from its transcript events.

    Request events store only what changed: ``messages`` beyond the first ``base`` messages of
    the previous request, and the tools once (in the ``llm_start`` event).
    """
    tools: list[Any] | None = None
    previous: list[Any] = []
    out: list[dict[str, Any]] = []
    for event in transcript:
        kind = event.get("event")
        if kind == "llm_start":
            tools = event.get("tools")
        elif kind == "request":
            messages = previous[: int(event["base"])] + list(event["messages"])
            body = dict(event["params"])
            body["messages"] = messages
            if tools:
                body["tools"] = tools
            out.append(body)
            previous = messages
    return out
