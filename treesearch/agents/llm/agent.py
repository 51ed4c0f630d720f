"""The ``llm`` agent: a chat model drives the session's tools, one model turn per session step.

A run builds the system and task messages from the prompt templates, then loops: shorten old
observations if the conversation is over the context budget, ask the model (from the response
cache when it holds the request), run the tool calls of the reply as one session step, and show
the observations to the model. The run ends when the model calls ``finish`` (finished), answers
twice in a row without acting (gave up), or a limit is reached: ``max_steps`` turns, the token or
cost limit (limit reached), the run's time limit or a model request that fails for good
(failed). A malformed tool call or invalid JSON arguments go back to the model as an error
observation.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from treesearch.agents import AgentContext, AgentCost, AgentResult, AgentStatus
from treesearch.agents.llm.client import (
    ChatClient,
    ChatReply,
    ContextLengthError,
    ModelDeadlineError,
    ModelRequestError,
    parse_reply,
)
from treesearch.agents.llm.prompts import (
    cut_middle,
    format_history,
    format_siblings,
    parse_text_reply,
    render,
    tool_schemas,
)
from treesearch.agents.llm.replay import (
    ReplayMissError,
    ResponseCache,
    canonical_json,
    request_key,
)
from treesearch.errors import AgentError, SessionError
from treesearch.session import SessionDeadlineError, Step, ToolCall, ToolEnv, ToolFn, ToolOutcome

if TYPE_CHECKING:  # the config module imports this package's prompt templates
    from treesearch.agents.configs import LLMAgentConfig

__all__ = ["LLMAgent"]

MAX_IDLE = 2
"""Consecutive replies without an action after which the model is taken to have given up."""
_KEEP_TURNS = 1
"""The latest model turns (with their observations) that are never shortened."""
_SHORT_HEAD, _SHORT_TAIL = 300, 300
_NUDGE = "You did not call a tool. Continue with a tool call, or call finish if you are done."
_SHORT_NOTE = "[... {n} characters of this old output removed to fit the context budget ...]"


class LLMAgent:
    """A model behind an OpenAI-compatible chat-completions endpoint (see the module docstring
    and ``docs/llm.md``). One instance serves any number of runs."""

    kind = "llm"

    def __init__(self, config: LLMAgentConfig) -> None:
        """``config``: the validated fields (``build_agent`` reads a YAML mapping). Without
        ``replay``, the ``openai`` package must be installed (``AgentError`` says how)."""
        if not config.replay:
            import importlib.util

            if importlib.util.find_spec("openai") is None:
                raise AgentError(
                    "llm agent: the openai package is not installed: pip install 'treesearch[llm]'"
                )
        self.config = config

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> LLMAgent:
        """Build from the strategy's fields (``AgentError`` names a bad field)."""
        from treesearch.agents import build_agent

        agent = build_agent({**config, "kind": "llm"})
        assert isinstance(agent, LLMAgent)
        return agent

    def __repr__(self) -> str:
        return f"LLMAgent(model={self.config.model!r}, base_url={self.config.base_url!r})"

    def run(self, ctx: AgentContext) -> AgentResult:
        """Let the model work on ``ctx.task`` (never raises for model or tool faults)."""
        return _Run(self.config, ctx).run()


def _cap(text: str | None, limit: int) -> str | None:
    """``text`` cut in the middle to ``limit`` characters (``None`` stays ``None``)."""
    return None if text is None else cut_middle(text, limit)


def _cap_arguments(call: dict[str, Any], limit: int) -> dict[str, Any]:
    """A tool call (OpenAI form) whose long string arguments are cut to ``limit`` (valid JSON)."""
    fn = call.get("function") or {}
    raw = fn.get("arguments")
    if not isinstance(raw, str) or len(raw) <= limit:
        return call
    try:
        args = json.loads(raw)
    except ValueError:
        return call
    if not isinstance(args, dict):
        return call
    args = {k: cut_middle(v, limit) if isinstance(v, str) else v for k, v in args.items()}
    return {**call, "function": {**fn, "arguments": json.dumps(args)}}


def _shorten_text(text: str) -> str:
    if len(text) <= _SHORT_HEAD + _SHORT_TAIL + 100:
        return text
    removed = len(text) - _SHORT_HEAD - _SHORT_TAIL
    return f"{text[:_SHORT_HEAD]}\n{_SHORT_NOTE.format(n=removed)}\n{text[-_SHORT_TAIL:]}"


class _Run:
    """The state of one agent run."""

    def __init__(self, cfg: LLMAgentConfig, ctx: AgentContext) -> None:
        self.cfg = cfg
        self.ctx = ctx
        self.t0 = time.monotonic()
        self.transcript: list[dict[str, Any]] = []
        self.view: list[dict[str, Any]] = []
        """The conversation as the model sees it (old observations shortened)."""
        self.shrinkable: set[int] = set()
        """Indices in ``view`` of observations and tool-call messages that may be shortened."""
        self.shortened: set[int] = set()
        self.sent: list[dict[str, Any]] = []
        """Messages of the previous request (transcripts store only what changed)."""
        self.tokens_in = 0
        self.tokens_out = 0
        self.cost = 0.0
        self.cost_live = 0.0
        self.requests = 0
        self.from_cache = 0
        self.retries = 0
        self.tokens_per_char = 0.25
        self.context_tokens = cfg.context_tokens
        """The prompt budget; lowered after the server refused a request as too long."""
        ws = str(ctx.workspace)
        self.volatile = [ws, os.path.realpath(ws)]
        self.sample = {"node": ctx.node, "attempt": ctx.attempt}
        self.tools = tool_schemas(run_tests=ctx.run_tests is not None)
        self.extra_tools: dict[str, ToolFn] = {"finish": _finish_tool}
        if ctx.run_tests is not None:
            self.extra_tools["run_tests"] = self._run_tests_tool
        self.cache: ResponseCache | None = None
        if cfg.use_cache:
            folder = cfg.cache_folder
            if folder is None and ctx.cache_dir is not None:
                folder = Path(ctx.cache_dir) / "llm-cache"
            if folder is not None:
                self.cache = ResponseCache(folder)
        self.client = ChatClient(
            base_url=cfg.base_url,
            api_key_env=cfg.api_key_env,
            request_timeout=cfg.request_timeout,
            retries=cfg.retries,
            retry_backoff=cfg.retry_backoff,
            retry_max_wait=cfg.retry_max_wait,
        )

    # --- the loop ---------------------------------------------------------------------------------

    def run(self) -> AgentResult:
        try:
            return self._loop()
        except ReplayMissError as exc:
            return self._done(AgentStatus.FAILED, str(exc))
        except ModelDeadlineError as exc:
            return self._done(AgentStatus.FAILED, f"timed out after {self.ctx.timeout:g} s ({exc})")
        except ModelRequestError as exc:
            return self._done(AgentStatus.FAILED, f"model request failed: {exc}")
        except SessionDeadlineError:
            return self._done(AgentStatus.FAILED, f"timed out after {self.ctx.timeout:g} s")
        except (SessionError, AgentError) as exc:
            return self._done(AgentStatus.FAILED, str(exc))
        finally:
            self.client.close()
            self.transcript.append(
                {
                    "event": "usage",
                    "requests": self.requests,
                    "from_cache": self.from_cache,
                    "retries": self.retries,
                    "tokens_in": self.tokens_in,
                    "tokens_out": self.tokens_out,
                    "cost_usd": round(self.cost, 6),
                    "cost_usd_live": round(self.cost_live, 6),
                }
            )

    def _loop(self) -> AgentResult:
        cfg, ctx = self.cfg, self.ctx
        if cfg.replay and self.cache is None:
            raise AgentError("replay: true needs a cache folder (set the field 'cache')")
        self._start()
        idle = 0
        for turn in range(1, ctx.max_steps + 1):
            limit = self._limit_reached()
            if limit:
                return self._done(AgentStatus.LIMIT_REACHED, limit)
            self._fit_context(turn)
            reply = self._ask(turn)
            if cfg.mode == "text":
                outcome = self._act_text(turn, reply)
            else:
                outcome = self._act_tools(turn, reply)
            if outcome == "finished":
                return self._done(AgentStatus.FINISHED)
            if outcome == "idle":
                idle += 1
                if idle >= MAX_IDLE:
                    said = (reply.content or "").strip().replace("\n", " ")
                    return self._done(
                        AgentStatus.GAVE_UP,
                        f"the model answered {idle} times in a row without acting"
                        + (f"; last: {said[:200]!r}" if said else ""),
                    )
            else:
                idle = 0
        limit = self._limit_reached()
        return self._done(
            AgentStatus.LIMIT_REACHED, limit or f"max_steps={ctx.max_steps} turns reached"
        )

    def _done(self, status: AgentStatus, reason: str | None = None) -> AgentResult:
        cost = AgentCost(time.monotonic() - self.t0, self.tokens_in, self.tokens_out)
        if reason:
            self.transcript.append({"event": "end", "status": status.value, "reason": reason})
        return AgentResult(status, cost=cost, transcript=self.transcript, reason=reason)

    def _limit_reached(self) -> str | None:
        used = self.tokens_in + self.tokens_out
        if self.cfg.token_limit is not None and used >= self.cfg.token_limit:
            return f"token_limit={self.cfg.token_limit} reached ({used} tokens used)"
        if self.cfg.cost_limit is not None and self.cost >= self.cfg.cost_limit:
            return f"cost_limit={self.cfg.cost_limit:g} USD reached ({self.cost:.4f} USD spent)"
        return None

    # --- prompts ----------------------------------------------------------------------------------

    def _start(self) -> None:
        cfg, ctx = self.cfg, self.ctx
        p = cfg.prompts
        latest = ctx.feedback[-1] if ctx.feedback and ctx.feedback[-1] else ""
        values: dict[str, object] = {
            "task": ctx.task,
            "history": format_history(ctx.history),
            "instructions": cfg.instructions,
            "max_steps": ctx.max_steps,
            "attempt": ctx.attempt,
        }
        feedback = render(
            p.feedback, {**values, "feedback": latest or "(no test results yet)", "siblings": ""}
        )
        siblings = ""
        if ctx.siblings:
            siblings = render(
                p.siblings,
                {**values, "siblings": format_siblings(ctx.siblings), "feedback": latest},
            )
        values.update(feedback=feedback, siblings=siblings)
        system = render(p.system, values).strip()
        if cfg.mode == "text":
            system = f"{system}\n{render(p.text_mode, values).strip()}"
        task = render(p.task, values).strip()
        for message in ({"role": "system", "content": system}, {"role": "user", "content": task}):
            self.view.append(message)
            ctx.session.add_message(message)
        self.transcript.append(
            {
                "event": "llm_start",
                "model": cfg.model,
                "base_url": cfg.base_url,
                "mode": cfg.mode,
                "sample": self.sample,
                "cache": str(self.cache.path) if self.cache is not None else None,
                "replay": cfg.replay,
                "tools": self.tools if cfg.mode == "tools" else None,
            }
        )

    # --- model requests ---------------------------------------------------------------------------

    def _request(self) -> dict[str, Any]:
        cfg = self.cfg
        request: dict[str, Any] = dict(cfg.extra_body)
        request["model"] = cfg.model
        request["messages"] = list(self.view)
        if cfg.mode == "tools":
            request["tools"] = self.tools
        request["temperature"] = cfg.temperature
        if cfg.max_tokens is not None:
            request["max_tokens"] = cfg.max_tokens
        if cfg.seed is not None:
            request["seed"] = cfg.seed + self.ctx.attempt
        return request

    def _ask(self, turn: int) -> ChatReply:
        """One model reply; on a context-length refusal, shorten the history and ask once more."""
        try:
            return self._ask_once(turn)
        except ContextLengthError as exc:
            if not self._shorten_after_overflow(turn, str(exc)):
                raise ModelRequestError(
                    f"the conversation is longer than the model's context and nothing is left "
                    f"to shorten: {exc}"
                ) from None
        try:
            return self._ask_once(turn)
        except ContextLengthError as exc:
            raise ModelRequestError(
                f"the conversation is still longer than the model's context after shortening "
                f"the history once: {exc}"
            ) from None

    def _ask_once(self, turn: int) -> ChatReply:
        request = self._request()
        messages = request["messages"]
        base = 0
        while base < min(len(messages), len(self.sent)) and messages[base] == self.sent[base]:
            base += 1
        self.sent = messages
        key = request_key(request, sample=self.sample, volatile_paths=self.volatile)
        chars = len(canonical_json(request))
        self.transcript.append(
            {
                "event": "request",
                "turn": turn,
                "key": key,
                "base": base,
                "messages": messages[base:],
                "params": {k: v for k, v in request.items() if k not in ("messages", "tools")},
            }
        )
        self.requests += 1
        started = time.monotonic()
        response = self.cache.get(key) if self.cache is not None else None
        attempts = 0
        if response is not None:
            source = "cache"
            self.from_cache += 1
            reply = parse_reply(response, chars)
        else:
            if self.cfg.replay:
                self.transcript.append({"event": "replay_miss", "turn": turn, "key": key})
                node = (self.ctx.node or "?")[:12]
                raise ReplayMissError(
                    f"replay: the recording has no response for request {key[:16]} (turn {turn} "
                    f"at node {node}, attempt {self.ctx.attempt}) in cache "
                    f"{self.cache.path if self.cache is not None else '-'}; the run has left the recording "
                    "(different config, prompts, project or code): run without 'replay: true' "
                    "to record it"
                )
            source = "live"

            def on_retry(info: dict[str, Any]) -> None:
                self.retries += 1
                self.transcript.append({"event": "retry", "turn": turn, **info})

            response, attempts = self.client.complete(
                request, deadline=self.ctx.session.deadline, on_retry=on_retry
            )
            reply = parse_reply(response, chars)  # an unreadable reply is never cached
            if self.cache is not None:
                try:
                    self.cache.put(key, request, response)
                except (AgentError, OSError) as exc:
                    self.transcript.append({"event": "cache_error", "key": key, "error": str(exc)})
        cost = (
            reply.tokens_in * self.cfg.input_price + reply.tokens_out * self.cfg.output_price
        ) / 1e6
        self.tokens_in += reply.tokens_in
        self.tokens_out += reply.tokens_out
        self.cost += cost
        if source == "live":
            self.cost_live += cost
        if not reply.estimated and chars:
            self.tokens_per_char = reply.tokens_in / chars
        self.transcript.append(
            {
                "event": "response",
                "turn": turn,
                "key": key,
                "source": source,
                "attempts": attempts,
                "seconds": round(time.monotonic() - started, 3),
                "tokens_in": reply.tokens_in,
                "tokens_out": reply.tokens_out,
                "estimated_tokens": reply.estimated,
                "cost_usd": round(cost, 6),
                "response": response,
            }
        )
        return reply

    # --- acting on a reply ------------------------------------------------------------------------

    def _act_tools(self, turn: int, reply: ChatReply) -> str:
        calls = _read_calls(reply.tool_calls, turn)
        if not calls:
            note = _NUDGE
            if reply.finish_reason == "length":
                note = "Your reply was cut off at max_tokens. " + _NUDGE
            self._say(reply.content or "")
            self._tell(note)
            self.transcript.append({"event": "no_action", "turn": turn, "note": note})
            return "idle"
        step = self._step(turn, calls, reply.content)
        self.view.append(
            {
                "role": "assistant",
                "content": _cap(reply.content, self.cfg.observation_chars),
                "tool_calls": [
                    _cap_arguments(c.to_openai(), self.cfg.observation_chars) for c in calls
                ],
            }
        )
        self.shrinkable.add(len(self.view) - 1)
        for obs in step.observations:
            self.view.append(
                {
                    "role": "tool",
                    "tool_call_id": obs.call_id,
                    "content": cut_middle(obs.content, self.cfg.observation_chars),
                }
            )
            self.shrinkable.add(len(self.view) - 1)
        for call, obs in zip(step.calls, step.observations, strict=True):
            if call.name == "finish" and obs.ok:
                summary = call.arguments.get("summary")
                self.transcript.append({"event": "finish", "turn": turn, "summary": summary})
                return "finished"
        return "acted"

    def _act_text(self, turn: int, reply: ChatReply) -> str:
        action = parse_text_reply(reply.content)
        if action.kind == "finish":
            self._say(reply.content or "")
            self.transcript.append({"event": "finish", "turn": turn, "summary": None})
            return "finished"
        if action.kind == "error":
            self._say(reply.content or "")
            self._tell(f"Format error: {action.text}.")
            self.transcript.append({"event": "no_action", "turn": turn, "note": action.text})
            return "idle"
        if action.kind == "run_tests":
            call = ToolCall(f"text_{turn}", "run_tests", {})
        else:
            call = ToolCall(f"text_{turn}", "run", {"command": action.text})
        step = self._step(turn, [call], reply.content)
        self.view.append(
            {"role": "assistant", "content": _cap(reply.content, self.cfg.observation_chars) or ""}
        )
        self.shrinkable.add(len(self.view) - 1)
        obs = step.observations[0]
        self.view.append(
            {
                "role": "user",
                "content": f"Output:\n{cut_middle(obs.content, self.cfg.observation_chars)}",
            }
        )
        self.shrinkable.add(len(self.view) - 1)
        return "acted"

    def _step(self, turn: int, calls: list[ToolCall], content: str | None) -> Step:
        step = self.ctx.session.step(
            calls,
            content=content,
            tools=self.extra_tools,
            timeout=self.cfg.command_timeout,
        )
        self.transcript.append(
            {
                "event": "step",
                "turn": turn,
                "step": step.index,
                "calls": [
                    {"id": o.call_id, "name": o.name, "ok": o.ok, "error": o.error}
                    for o in step.observations
                ],
                "diff": step.diff.name_status,
            }
        )
        return step

    def _say(self, content: str) -> None:
        message = {"role": "assistant", "content": content}
        self.view.append(
            {"role": "assistant", "content": _cap(content, self.cfg.observation_chars)}
        )
        self.shrinkable.add(len(self.view) - 1)  # text-only replies can be shortened too
        self.ctx.session.add_message(message)

    def _tell(self, text: str) -> None:
        message = {"role": "user", "content": text}
        self.view.append(message)
        self.ctx.session.add_message(message)

    def _run_tests_tool(self, env: ToolEnv, args: Mapping[str, Any]) -> ToolOutcome:
        assert self.ctx.run_tests is not None
        text = self.ctx.run_tests()
        return ToolOutcome(render(self.cfg.prompts.feedback, {"feedback": text}))

    # --- the context budget -----------------------------------------------------------------------

    def _estimate(self) -> int:
        chars = len(canonical_json(self.view))
        if self.cfg.mode == "tools":
            chars += len(canonical_json(self.tools))
        return int(chars * self.tokens_per_char)

    def _shorten_after_overflow(self, turn: int, error: str) -> bool:
        """Shorten messages, oldest first (the latest turn last), until the estimate is half
        what the refused request was; lower the budget for later turns. False when nothing
        could be shortened."""
        before = self._estimate()
        target = before // 2
        cut: list[dict[str, Any]] = []
        for i in sorted(self.shrinkable - self.shortened):
            old = len(canonical_json(self.view[i]))
            self.view[i] = _shorten_message(self.view[i])
            self.shortened.add(i)
            new = len(canonical_json(self.view[i]))
            if new < old:
                cut.append({"message": i, "role": self.view[i]["role"], "chars": old, "kept": new})
            if self._estimate() <= target:
                break
        after = self._estimate()
        self.context_tokens = max(1, min(self.context_tokens, after))
        self.transcript.append(
            {
                "event": "context_exceeded",
                "turn": turn,
                "error": error[:500],
                "cut": cut,
                "estimated_tokens_before": before,
                "estimated_tokens_after": after,
                "context_tokens_now": self.context_tokens,
            }
        )
        return bool(cut)

    def _fit_context(self, turn: int) -> None:
        before = self._estimate()
        if before <= self.context_tokens:
            return
        # The latest turns stay whole: the model is acting on them.
        assistants = [i for i, m in enumerate(self.view) if m["role"] == "assistant"]
        protect_from = assistants[-_KEEP_TURNS] if len(assistants) >= _KEEP_TURNS else 0
        changed = 0
        estimate = before
        for i in sorted(self.shrinkable - self.shortened):
            if i >= protect_from:
                break
            self.view[i] = _shorten_message(self.view[i])
            self.shortened.add(i)
            changed += 1
            estimate = self._estimate()
            if estimate <= self.context_tokens:
                break
        self.transcript.append(
            {
                "event": "context_shortened",
                "turn": turn,
                "messages": changed,
                "estimated_tokens_before": before,
                "estimated_tokens_after": estimate,
                "over_budget": estimate > self.context_tokens,
            }
        )


def _shorten_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """A copy with long text cut (tool-call arguments stay valid JSON)."""
    out = dict(message)
    if isinstance(out.get("content"), str):
        out["content"] = _shorten_text(out["content"])
    calls = out.get("tool_calls")
    if isinstance(calls, list):
        new_calls = []
        for call in calls:
            fn = dict(call.get("function", {}))
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except ValueError:
                args = None
            if isinstance(args, dict):
                args = {k: _shorten_text(v) if isinstance(v, str) else v for k, v in args.items()}
                fn["arguments"] = json.dumps(args)
            new_calls.append({**call, "function": fn})
        out["tool_calls"] = new_calls
    return out


def _finish_tool(env: ToolEnv, args: Mapping[str, Any]) -> str:
    summary = args.get("summary")
    return f"finished: {summary}" if isinstance(summary, str) and summary else "finished"


def _read_calls(raw_calls: list[Any], turn: int) -> list[ToolCall]:
    """The reply's tool calls as ``ToolCall`` values; what cannot be read becomes a call that
    carries its error (the session answers it with an error observation, never runs it)."""
    calls: list[ToolCall] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_calls, 1):
        fallback = f"call_{turn}_{i}"
        if not isinstance(raw, Mapping):
            calls.append(
                ToolCall(
                    fallback, "invalid", {}, error=f"the tool call is not an object: {raw!r:.200}"
                )
            )
            seen.add(fallback)
            continue
        cid = raw.get("id")
        if not isinstance(cid, str) or not cid or cid in seen:
            cid = fallback
        seen.add(cid)
        fn = raw.get("function")
        fn = fn if isinstance(fn, Mapping) else {}
        name = fn.get("name")
        if not isinstance(name, str) or not name.strip():
            calls.append(ToolCall(cid, "missing_name", {}, error="the tool call names no function"))
            continue
        name = name.strip().removeprefix("functions.")
        args = fn.get("arguments", "{}")
        if isinstance(args, Mapping):
            calls.append(ToolCall(cid, name, dict(args)))
            continue
        if args is None or (isinstance(args, str) and not args.strip()):
            calls.append(ToolCall(cid, name, {}))
            continue
        if not isinstance(args, str):
            calls.append(ToolCall(cid, name, {}, error="arguments must be a JSON object"))
            continue
        try:
            decoded = json.loads(args)
        except ValueError as exc:
            calls.append(
                ToolCall(
                    cid,
                    name,
                    {},
                    error=f"arguments are not valid JSON ({exc}); you sent: {args[:300]!r}",
                )
            )
            continue
        if not isinstance(decoded, dict):
            calls.append(
                ToolCall(
                    cid, name, {}, error=f"arguments must be a JSON object, got {args[:100]!r}"
                )
            )
            continue
        calls.append(ToolCall(cid, name, decoded))
    return calls
