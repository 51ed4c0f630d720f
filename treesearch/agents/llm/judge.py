"""A value judge (``scoring.judge``): a model rates how close a state is to resolving the task.

SWE-Search scores each state with a *value agent* beside the tests; where the tests that decide
are held out, or many states pass the same tests, the judgement separates them. The judge is
given the task text, the diff from the root and the state's test results, and answers with a
value in [0, 1] and a one-line reason (JSON). The search's score then combines it with the
tests' score as the config states (``combine``):

- ``tie_break`` (the default): the tests first; the judge only orders states whose tests score
  the same (it moves a score below 1 by at most ``TIE_STEP`` x its value; a score of 1 stays 1);
- ``weight``: ``(1 - weight) x tests + weight x judge``.

Every verdict is kept per tree hash (a state is judged once per search, like its test run),
every request and answer goes through the same response cache as the ``llm`` agent (``cache``;
``replay: true`` answers from it with the server off), the tokens count against the search's
``tokens`` budget, and their cost (``input_price``/``output_price``) goes into ``summary.json``
and an eval row's ``usd``. A judge that fails (the server down, a replay miss, an answer that is not a
value and a reason) gives a ``Verdict`` with an ``error``: the node shows it, the search summary
counts it, the state keeps its tests' score; it is never a silent 0.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from treesearch.agents.llm.client import ChatClient, parse_reply
from treesearch.agents.llm.prompts import cut_middle
from treesearch.agents.llm.replay import ResponseCache, request_key
from treesearch.errors import AgentError

__all__ = ["TIE_STEP", "JudgeConfig", "ValueJudge", "Verdict", "combine"]

TIE_STEP = 1e-4
"""Largest change ``tie_break`` makes to a score below 1 (below any difference of two pass
fractions of up to 10,000 tests)."""

SYSTEM = (
    "You judge states of a code repository during a search for a fix. Given the task, the "
    "changes made so far (a diff from the original code) and the test results, rate how close "
    "the state is to correctly resolving the task, from 0 (not at all, or worse) to 1 (it "
    'resolves it). Answer with JSON only: {"value": <number from 0 to 1>, "reason": "<one '
    'line>"}.'
)


class JudgeConfig(BaseModel):
    """``scoring.judge``: the model that judges states and how its value joins the score."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    """The model name the server knows."""
    base_url: str = "http://localhost:11434/v1"
    api_key_env: str | None = "OPENAI_API_KEY"
    """Name of the variable that holds the API key (``null``: no key)."""
    cache: str | None = None
    """Folder of recorded requests and answers (shared with ``llm`` strategies if you like)."""
    replay: bool = False
    """Answer from ``cache`` only: no request leaves the machine (a miss is a judge error)."""
    combine: Literal["tie_break", "weight"] = "tie_break"
    weight: float = Field(0.2, gt=0, le=1, allow_inf_nan=False)
    """The judge's share of the score with ``combine: weight``."""
    temperature: float = Field(0.0, ge=0, allow_inf_nan=False)
    max_diff_chars: int = Field(20_000, ge=200)
    """The diff is cut in the middle to this many characters."""
    instructions: str = ""
    """Added to the judge's system message (what matters in this project)."""
    input_price: float = Field(0.0, ge=0, allow_inf_nan=False)
    """USD per million prompt tokens (for ``summary.json`` and eval rows' ``usd``)."""
    output_price: float = Field(0.0, ge=0, allow_inf_nan=False)
    """USD per million completion tokens."""
    request_timeout: float = Field(120.0, gt=0, allow_inf_nan=False)
    retries: int = Field(2, ge=0, le=20)
    retry_backoff: float = Field(1.0, ge=0, allow_inf_nan=False)


@dataclass(frozen=True)
class Verdict:
    """What the judge said of one state."""

    value: float | None
    """In [0, 1]; ``None`` when the judge failed (``error``)."""
    reason: str = ""
    error: str | None = None
    tokens: int = 0
    """Tokens this verdict cost now (0 when it came from the per-tree memory)."""
    usd: float = 0.0
    """What they cost at the configured prices."""

    def to_dict(self) -> dict[str, Any]:
        if self.error is not None:
            return {"error": self.error}
        return {"value": self.value, "reason": self.reason}


def combine(score: float, verdict: Verdict, cfg: JudgeConfig) -> float:
    """The search's score of a state whose tests score ``score`` (see the module docstring)."""
    if verdict.value is None:
        return score
    if cfg.combine == "weight":
        return (1.0 - cfg.weight) * score + cfg.weight * verdict.value
    return score if score >= 1.0 else score + TIE_STEP * verdict.value


_JSON = re.compile(r"\{.*\}", re.DOTALL)


def parse_verdict(text: str) -> tuple[float, str]:
    """``(value, reason)`` from the judge's answer; ``ValueError`` says what is wrong."""
    found = _JSON.search(text or "")
    if found is None:
        raise ValueError(f"the answer holds no JSON object: {text[:200]!r}")
    try:
        data = json.loads(found.group(0))
    except ValueError:
        raise ValueError(f"the answer's JSON does not parse: {found.group(0)[:200]!r}") from None
    value = data.get("value") if isinstance(data, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"'value' must be a number from 0 to 1, got {value!r}")
    reason = data.get("reason", "")
    if not isinstance(reason, str):
        raise ValueError(f"'reason' must be text, got {type(reason).__name__}")
    return float(value), " ".join(reason.split())[:300]


class ValueJudge:
    """Rates states with a model (see the module docstring); one per search."""

    def __init__(
        self, cfg: JudgeConfig, *, base_dir: Path, client: ChatClient | None = None
    ) -> None:
        self.cfg = cfg
        self.client = client or ChatClient(
            base_url=cfg.base_url,
            api_key_env=cfg.api_key_env,
            request_timeout=cfg.request_timeout,
            retries=cfg.retries,
            retry_backoff=cfg.retry_backoff,
            retry_max_wait=30.0,
        )
        folder = Path(cfg.cache).expanduser() if cfg.cache else None
        if folder is not None and not folder.is_absolute():
            folder = base_dir / folder
        self.cache = ResponseCache(folder) if folder is not None else None
        if cfg.replay and self.cache is None:
            raise AgentError("scoring.judge: replay: true needs a cache folder (set 'cache')")
        self.known: dict[str, Verdict] = {}
        self.calls = 0
        self.usd = 0.0
        self.errors: dict[str, int] = {}

    def close(self) -> None:
        self.client.close()

    def request(self, task: str, diff: str, tests: str) -> dict[str, Any]:
        system = SYSTEM + (f"\n\n{self.cfg.instructions}" if self.cfg.instructions else "")
        user = (
            f"Task:\n{task}\n\nChanges from the original code:\n```diff\n"
            f"{cut_middle(diff, self.cfg.max_diff_chars) or '(none: the original code)'}\n```\n\n"
            f"Test results:\n{tests}\n"
        )
        return {
            "model": self.cfg.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "temperature": self.cfg.temperature,
        }

    def rate(
        self,
        tree: str,
        task: str,
        diff: Callable[[], str],
        tests: str,
        *,
        volatile: tuple[str, ...] = (),
    ) -> Verdict:
        """The verdict on state ``tree`` (once per tree; ``diff`` is called only when asked)."""
        known = self.known.get(tree)
        if known is not None:
            return Verdict(known.value, known.reason, known.error, 0)
        verdict = self._ask(self.request(task, diff(), tests), volatile)
        self.known[tree] = verdict
        self.calls += 1
        self.usd += verdict.usd
        if verdict.error is not None:
            key = verdict.error.split(":", 1)[0]
            self.errors[key] = self.errors.get(key, 0) + 1
        return verdict

    def _ask(self, request: dict[str, Any], volatile: tuple[str, ...]) -> Verdict:
        key = request_key(request, sample={"judge": 1}, volatile_paths=volatile)
        cached = self.cache.get(key) if self.cache is not None else None
        if cached is not None:
            response = cached
        elif self.cfg.replay:
            return Verdict(None, error=f"replay: no recorded answer for judge request {key[:16]}")
        else:
            try:
                response, _attempts = self.client.complete(request)
            except AgentError as exc:
                return Verdict(None, error=f"the judge's model failed: {exc}")
            if self.cache is not None:
                self.cache.put(key, request, response)
        try:
            reply = parse_reply(response, len(json.dumps(request)))
        except AgentError as exc:
            return Verdict(None, error=f"the judge's answer is malformed: {exc}")
        tokens = reply.tokens_in + reply.tokens_out
        usd = reply.tokens_in * self.cfg.input_price + reply.tokens_out * self.cfg.output_price
        usd /= 1e6
        try:
            value, reason = parse_verdict(reply.content or "")
        except ValueError as exc:
            why = f"the judge's answer is not a verdict: {exc}"
            return Verdict(None, error=why, tokens=tokens, usd=usd)
        return Verdict(value, reason, None, tokens, usd)

    def combine(self, score: float, verdict: Verdict) -> float:
        """The search's score of a state whose tests score ``score`` (``combine``)."""
        return combine(score, verdict, self.cfg)

    def describe(self) -> dict[str, Any]:
        """For summary.json: the model, how it combines, calls and errors by kind."""
        return {
            "model": self.cfg.model,
            "combine": self.cfg.combine,
            **({"weight": self.cfg.weight} if self.cfg.combine == "weight" else {}),
            "calls": self.calls,
            "usd": round(self.usd, 6),
            "errors": sum(self.errors.values()),
            "errors_by_kind": dict(sorted(self.errors.items())),
        }
