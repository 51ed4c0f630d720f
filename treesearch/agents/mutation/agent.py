"""``MutationAgent``: one seeded, localisation-weighted program edit per expansion.

A run (one expansion of search node ``ctx.node``):

1. ranks the statement lines of the project by suspiciousness (``localize``: coverage spectrum
   of the search tests, cached per tree hash). A node this agent made inherits its parent's
   ranking, lines moved through the edit, as GenProg localises once for all variants (no test
   run); ``relocalize: true`` runs the tests under coverage on every expanded node instead;
2. takes the ``top_lines`` most suspicious lines that at least one operator applies to (plus
   lines tied with the last one) and lists every edit of the chosen ``operators`` on them;
3. samples an edit: a line in proportion to its score squared, then an operator family of the
   line in proportion to its prior (``family_weights``: 1, statement deletion and copying 0.5)
   times the square root of its edits' total weight, then an edit in proportion to its weight
   (likely slips, such as an operator for its inverse or a constant off by one, weigh more).
   The random stream is seeded from ``ctx.rng`` (one draw), ``ctx.attempt`` and the ``seed``
   field, so the same search seed gives the same edits and repeated expansions of one node
   differ;
4. skips edits that do not compile, change no AST node, or produce a program this node already
   produced (the per-node *tried* log, kept under ``ctx.cache_dir``);
5. applies the edit as one session step (``replace_in_file`` with the changed lines as context),
   so the step's diff is exactly the edit.

Steps per expansion: ``edits`` (default 1) edits, capped by ``ctx.max_steps``. One edit per
expansion is the recommended design: each child node is one mutation, the search tree combines
mutations along its paths, and every combination is scored. ``edits: k`` chains k edits inside
one expansion (a higher-order mutant scored only at the end).

The tried log: one JSON-lines file per node (``<cache_dir>/mutation/tried/<node>.jsonl``; on the
agent instance when there is no cache folder) of ``{tag, key}``, where ``tag`` identifies the
random stream of the expansion and ``key`` the program produced. An expansion whose tag is
already in the log (a resumed or repeated run with the same seed) avoids only the programs
logged before it, and so repeats its own choice exactly; a new tag avoids every program logged
for the node. Two searches with different seeds sharing one store therefore never test the same
mutant of a node twice. The program of an expansion's last edit is logged (claimed) as soon as
it is chosen, the choice made under a lock on the node's log (``<node>.lock`` beside it): two
workers of a parallel search expanding one node at once choose different edits, instead of
both choosing the best untried one and testing the same program twice. A claimed edit whose
step then fails stays logged (the node does not offer it again).

Ranked order with one edit per run chooses without the log: attempt ``a`` of a node takes the
``a``-th edit of the node's ranked list (``_by_attempt``; the same edit the best-untried rule
gives when attempts run one after another), so a parallel search may run attempts of one node at
once (``attempts_independent``) and still build the same graph. It logs its program for other
strategies of the node. It does not read the log, so a second search on the same store tries
the node's edits again from the first (its states' scores may come from the store's score
cache); the guarantee above (never the same mutant twice across searches) holds for the
sampled order and for chained edits. When no edit is left, a run gives up and says the node is
``exhausted`` (``AgentResult.exhausted``): the search does not choose the pair again.
"""

from __future__ import annotations

import hashlib
import math
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from treesearch import sandbox
from treesearch.agents import AgentContext, AgentCost, AgentResult, AgentStatus
from treesearch.agents.configs import MutationConfig, agent_error
from treesearch.agents.mutation._source import SourceFile
from treesearch.agents.mutation._tried import _context, _TriedLog
from treesearch.agents.mutation.localize import Localization, inherit, localize
from treesearch.agents.mutation.operators import FAMILIES, Edit, check
from treesearch.agents.mutation.ranking import (
    ALL_FAMILIES,
    RANKED_PRIORS,
    edits_at_all,
    rank_key,
)
from treesearch.errors import (
    SandboxError,
    ScoringError,
    SessionError,
)
from treesearch.scoring import TestSpec
from treesearch.session import SessionDeadlineError, ToolCall

__all__ = ["MutationAgent"]

_SHARPNESS = 2.0  # line weight = score ** _SHARPNESS
# GenProg's statement-level edits are where plausible-but-wrong patches mostly come from (Qi et al.,
# ISSTA 2015: most of GenProg's plausible patches amount to deleting functionality), and single-
# statement bugs are mostly expression slips: statement deletion and copying start at half weight.
DEFAULT_FAMILY_WEIGHTS: Mapping[str, float] = {"delete": 0.5, "insert": 0.5}
_RANKED: dict[tuple[Any, ...], _Ranked] = {}
"""``_by_attempt``'s lists, per node, lines and settings, oldest first (this process)."""
_RANKED_NODES = 256
PRIORS_MAX = 256
"""Most attempts of a node whose prior a ranked run reports (``AgentResult.priors``)."""


_Ranked = tuple[
    list["_Candidate"],
    list[tuple["_Candidate", float]],
    list[tuple["_Candidate", float]],
    list[int],
]
"""A node's edits, in ranked order with their shares, the usable ones found so far, and how
many of the ranked ones were checked (``_by_attempt``)."""


@dataclass(frozen=True)
class _Candidate:
    edit: Edit
    score: float
    """Suspiciousness of the edit's line."""
    key: str
    """Identity of the program the edit produces (with the run's earlier edits)."""


class MutationAgent:
    """Search-based program repair: fault localisation plus one sampled mutation per step (see
    the module docstring)."""

    kind = "mutation"

    def __init__(self, config: MutationConfig | None = None, **fields: Any) -> None:
        """``config``: the validated fields (``build_agent`` reads a strategy's mapping); or
        the fields as keyword arguments, validated by ``MutationConfig`` (``AgentError`` names
        a bad one)."""
        if config is None:
            try:
                config = MutationConfig.model_validate(fields)
            except ValidationError as exc:
                raise agent_error("mutation", exc, MutationConfig) from None
        elif fields:
            raise TypeError("MutationAgent takes a config or keyword fields, not both")
        order = config.order
        operators = config.operators or (FAMILIES if order == "sampled" else ALL_FAMILIES)
        self.order = order
        """``sampled`` (a seeded draw per expansion) or ``ranked`` (the best untried edit)."""
        self.operators: tuple[str, ...] = tuple(f for f in ALL_FAMILIES if f in operators)
        """Operator families in use."""
        self.formula = config.formula
        """Spectrum formula (``ochiai``, ``tarantula``, ``dstar``)."""
        self.top_lines = config.top_lines
        """How many suspicious lines to mutate."""
        self.edits = config.edits
        """Edits per expansion (capped by ``ctx.max_steps``)."""
        self.seed = config.seed
        """Mixed into the random stream with ``ctx.rng`` and ``ctx.attempt``."""
        self.coverage = config.coverage
        """Localise with coverage (else with tracebacks only)."""
        self.relocalize = config.relocalize
        """Localise every node anew instead of letting the node an edit made inherit its
        parent's ranking."""
        self.traceback_boost = config.traceback_boost
        """Added to a line's score per share of failing tests whose traceback shows it."""
        weights = dict(DEFAULT_FAMILY_WEIGHTS if order == "sampled" else RANKED_PRIORS)
        weights.update(config.family_weights or {})
        self.family_weights: dict[str, float] = weights
        """Prior weight of each operator family when sampling an edit of a line."""
        self.exclude = tuple(config.exclude)
        """Path globs never mutated."""
        self.tests = config.tests
        """Test spec used when the context gives none."""
        self._tried: dict[str, list[dict[str, str]]] = {}

    @staticmethod
    def attempts_independent(config: Mapping[str, Any]) -> bool:
        """Whether runs of the agent ``config`` (a strategy's mapping) on one node choose by
        node and attempt number alone (``order: ranked``, one edit per run: ``_by_attempt``),
        so that a parallel search may run them at once."""
        return config.get("order") == "ranked" and config.get("edits", 1) == 1

    # --- a run ------------------------------------------------------------------------------------

    def run(self, ctx: AgentContext) -> AgentResult:
        """Localise, then apply ``min(edits, ctx.max_steps)`` sampled edits as session steps."""
        t0 = time.monotonic()
        transcript: list[dict[str, Any]] = []

        priors: tuple[float, ...] | None = None

        def done(status: AgentStatus, reason: str | None, steps: int = 0) -> AgentResult:
            return AgentResult(
                status, steps, AgentCost(time.monotonic() - t0), transcript, reason, priors=priors
            )

        spec = self.tests if self.tests is not None else ctx.test_spec
        if not isinstance(spec, TestSpec):
            return done(
                AgentStatus.FAILED,
                "the mutation agent needs the search tests (ctx.test_spec) or a 'tests' field",
            )
        node = str(ctx.node or ctx.session.tree)
        cache = Path(ctx.cache_dir) / "mutation" if ctx.cache_dir is not None else None
        try:
            loc = self._localize(ctx, spec, node, cache)
        except ScoringError as exc:
            return done(AgentStatus.FAILED, f"fault localisation could not run the tests: {exc}")
        transcript.append({"event": "localize", **loc.to_json()})
        note = loc.note if loc.method != "coverage" else None
        if not loc.lines:
            result = done(AgentStatus.GAVE_UP, loc.note or "no line is suspicious")
            # Every test passes here (an OK run): no later run of this strategy on the node
            # finds a line to edit either.
            result.exhausted = loc.failing == 0 and loc.run_status == "ok"
            return result

        sources = _Sources(ctx.workspace)
        lines = self._lines(loc, sources)
        if not lines:
            return done(
                AgentStatus.GAVE_UP,
                f"no operator of {', '.join(self.operators)} applies to the suspicious lines",
            )
        draw = ctx.rng.getrandbits(64)
        tag = hashlib.sha256(f"{draw}:{ctx.attempt}:{self.seed}".encode()).hexdigest()[:20]
        stream = random.Random(tag)
        tried = _TriedLog(cache / "tried" if cache is not None else None, node, self._tried)
        avoid = tried.avoid(tag)
        count = min(self.edits, ctx.max_steps)
        if count < 1:
            return done(
                AgentStatus.GAVE_UP, f"max_steps={ctx.max_steps} leaves no room for an edit"
            )
        applied = 0
        produced: str | None = None
        applied_edits: list[tuple[Edit, SourceFile]] = []
        original = {path: sources.get(path) for path in {p for p, _, _ in lines}}
        priors = self._priors(node, lines, sources, original, count)
        for n in range(count):
            last = n == count - 1
            pool, avoid, picked = self._next_edit(
                ctx, tried, tag, last, avoid, lines, sources, original, stream, node, n == 0
            )
            transcript.append(
                {
                    "event": "candidates",
                    "lines": len(lines),
                    "edits": len(pool),
                    "avoid": len(avoid),
                }
            )
            if picked is None:
                if applied == 0:
                    # Ranked single edits: the attempts of a node may run at once, so how many
                    # programs the log holds now is timing, not a fact of the node (it would
                    # make a parallel search's graph differ from run to run).
                    logged = (
                        ""
                        if self.order == "ranked" and count == 1
                        else f", {len(avoid)} programs already produced"
                    )
                    result = done(
                        AgentStatus.GAVE_UP,
                        f"every edit of the {len(lines)} most suspicious lines was tried at this "
                        f"node ({len(pool)} candidates{logged})",
                    )
                    # The first edit found nothing: every edit of the lines was produced
                    # before or does not compile. The node's ranking and lines are fixed and
                    # its log only grows, so no later run of this strategy here finds one.
                    result.exhausted = True
                    return result
                break
            cand, weight = picked
            src = sources.file(cand.edit.path)
            assert src is not None
            description = cand.edit.describe(src.source)
            try:
                step_index = self._apply(ctx, src, cand.edit, description, n)
            except _StepFailed as exc:
                return done(AgentStatus.FAILED, str(exc), applied)
            except SessionDeadlineError:
                return done(AgentStatus.FAILED, f"timed out after {ctx.timeout:g} s", applied)
            applied += 1
            transcript.append(
                {
                    "event": "edit",
                    "step": step_index,
                    "description": description,
                    "score": round(cand.score, 4),
                    "probability": round(weight, 6),
                    **cand.edit.to_json(),
                }
            )
            lines = _shift(lines, cand.edit, src)
            applied_edits.append((cand.edit, src))
            sources.update(cand.edit.path, cand.edit.apply(src.source))
            produced = cand.key  # the whole program so far, earlier edits of the run included
        if produced is not None:
            tried.record(tag, produced)
        if applied < count:
            note = (note + "; " if note else "") + f"only {applied} of {count} edits were possible"
        if not self.relocalize and applied_edits:
            self._pass_ranking(ctx, spec, node, cache, applied_edits)
        return done(AgentStatus.FINISHED, note, applied)

    def _localize(
        self, ctx: AgentContext, spec: TestSpec, node: str, cache: Path | None
    ) -> Localization:
        """The ranking of ``node`` (cached per tree hash; inherited unless ``relocalize``)."""
        return localize(
            ctx.workspace,
            spec,
            tree=node,
            formula=self.formula,
            use_coverage=self.coverage,
            traceback_boost=self.traceback_boost,
            exclude=self.exclude,
            cache_dir=cache / "localize" if cache is not None else None,
            timeout=_remaining(ctx),
            accept_inherited=not self.relocalize,
            warm=ctx.warm,
        )

    def _next_edit(
        self,
        ctx: AgentContext,
        tried: _TriedLog,
        tag: str,
        last: bool,
        avoid: set[str],
        lines: list[tuple[str, int, float]],
        sources: _Sources,
        original: Mapping[str, bytes | None],
        stream: random.Random,
        node: str,
        first: bool,
    ) -> tuple[list[_Candidate], set[str], tuple[_Candidate, float] | None]:
        """The pool of the next edit, the programs it avoids and the choice. The last edit of a
        run is chosen under the node's lock and logged before it is applied (see the module
        docstring); an earlier one avoids nothing (the program is not finished). The one edit
        of a ranked run is the attempt's own (``_by_attempt``), logged for other strategies."""
        if last and first and self.order == "ranked":
            pool, picked = self._by_attempt(node, ctx.attempt, lines, sources, original)
            if picked is not None:
                tried.record(tag, picked[0].key)
            return pool, avoid, picked
        if not last:
            pool = self._pool(lines, sources, original, set())
            return pool, avoid, self._choose(pool, stream, sources)
        with tried.claiming(time.monotonic() + _remaining(ctx)):
            avoid = tried.avoid(tag)  # read under the lock: a concurrent run may have claimed
            pool = self._pool(lines, sources, original, avoid)
            picked = self._choose(pool, stream, sources)
            if picked is not None:
                tried.record(tag, picked[0].key)
        return pool, avoid, picked

    def _priors(
        self,
        node: str,
        lines: list[tuple[str, int, float]],
        sources: _Sources,
        original: Mapping[str, bytes | None],
        count: int,
    ) -> tuple[float, ...] | None:
        """The prior of each attempt of ``node`` (``AgentResult.priors``) when attempt ``a``
        takes the ``a``-th ranked edit (``order: ranked``, one edit per run; else ``None``):
        the shares of the ranked list (``_ranked_order``), at most ``PRIORS_MAX``, to three
        significant digits. A function of the node alone (edits found not to compile later are
        not known yet)."""
        if self.order != "ranked" or count != 1:
            return None
        order = self._memo(node, lines, sources, original)[1]
        return tuple(float(f"{share:.3g}") for _, share in order[:PRIORS_MAX])

    def _memo(
        self,
        node: str,
        lines: list[tuple[str, int, float]],
        sources: _Sources,
        original: Mapping[str, bytes | None],
    ) -> _Ranked:
        key = (node, tuple(lines), self.operators, tuple(sorted(self.family_weights.items())))
        memo = _RANKED.get(key)
        if memo is None:
            pool = self._pool(lines, sources, original, set())
            memo = (pool, _ranked_order(pool, self.family_weights), [], [0])  # none checked yet
            _RANKED[key] = memo
            while len(_RANKED) > _RANKED_NODES:
                _RANKED.pop(next(iter(_RANKED)))
        return memo

    def _by_attempt(
        self,
        node: str,
        attempt: int,
        lines: list[tuple[str, int, float]],
        sources: _Sources,
        original: Mapping[str, bytes | None],
    ) -> tuple[list[_Candidate], tuple[_Candidate, float] | None]:
        """Ranked order, one edit per run: attempt ``a`` of ``node`` takes the ``a``-th edit of
        the node's ranked list that compiles and changes the AST (equal programs counted once).
        What attempts ``0 .. a-1`` took follows from the node alone, so attempts of one node may
        run at once, in any order, and still choose as they would one after another (the
        choices of a parallel search do not depend on timing). The list is worked out as far as
        needed and kept per node in this process (a search builds an agent per expansion): the
        attempts of a node check each edit once. ``None``: no edit is left."""
        pool, order, valid, scanned = self._memo(node, lines, sources, original)
        while len(valid) <= attempt and scanned[0] < len(order):
            cand, weight = order[scanned[0]]
            scanned[0] += 1
            src = sources.file(cand.edit.path)
            if src is not None and check(src, cand.edit) is None:
                valid.append((cand, weight))
        return pool, (valid[attempt] if attempt < len(valid) else None)

    def _choose(
        self, pool: list[_Candidate], stream: random.Random, sources: _Sources
    ) -> tuple[_Candidate, float] | None:
        """The next edit of ``pool``: the best untried (ranked) or a seeded draw (sampled)."""
        if self.order == "ranked":
            return _first_ranked(pool, sources, self.family_weights)
        return _pick(pool, stream, sources, self.family_weights)

    def _pass_ranking(
        self,
        ctx: AgentContext,
        spec: TestSpec,
        node: str,
        cache: Path | None,
        applied_edits: list[tuple[Edit, SourceFile]],
    ) -> None:
        """Give the new state ``node``'s ranking, lines moved through the applied edits."""

        def moves(path: str, line: int) -> int | None:
            moved: int | None = line
            for edit, before in applied_edits:
                if moved is None:
                    break
                moved = _move(path, moved, edit, before)
            return moved

        inherit(
            node,
            str(ctx.session.tree),
            spec,
            moves,
            use_coverage=self.coverage,
            exclude=self.exclude,
            cache_dir=cache / "localize" if cache is not None else None,
        )

    def _lines(self, loc: Localization, sources: _Sources) -> list[tuple[str, int, float]]:
        """The ``top_lines`` most suspicious lines with at least one edit (plus ties)."""
        out: list[tuple[str, int, float]] = []
        cutoff: float | None = None
        for s in loc.lines:
            if cutoff is not None and (s.score < cutoff or len(out) >= 3 * self.top_lines):
                break
            src = sources.file(s.path)  # localize already left out tests and ``exclude``
            if src is None:
                continue
            if not edits_at_all(src, s.line, self.operators, typed=self.order == "ranked"):
                continue
            out.append((s.path, s.line, s.score))
            if len(out) == self.top_lines:
                cutoff = s.score
        return out

    def _pool(
        self,
        lines: list[tuple[str, int, float]],
        sources: _Sources,
        original: Mapping[str, bytes | None],
        avoid: set[str],
    ) -> list[_Candidate]:
        """Every edit of the lines whose program is not in ``avoid`` (first of equal ones)."""
        pool: list[_Candidate] = []
        seen: set[str] = set(avoid)
        for path, line, score in lines:
            src = sources.file(path)
            if src is None:
                continue
            for edit in edits_at_all(src, line, self.operators, typed=self.order == "ranked"):
                key = _program_key(sources, edit, src, original)
                if key not in seen:
                    seen.add(key)
                    pool.append(_Candidate(edit, score, key))
        return pool

    def _apply(
        self, ctx: AgentContext, src: SourceFile, edit: Edit, description: str, n: int
    ) -> int:
        expected = edit.apply(src.source)
        old, new = _context(src.source, edit)
        if old:
            call = ToolCall(
                f"mutation-{n + 1}", "replace_in_file", {"path": edit.path, "old": old, "new": new}
            )
        else:
            call = ToolCall(
                f"mutation-{n + 1}",
                "write_file",
                {"path": edit.path, "content": expected.decode("utf-8")},
            )
        try:
            step = ctx.session.step(
                [call], content=f"mutation: {description}", rollback_on_error=True
            )
        except SessionDeadlineError:
            raise
        except SessionError as exc:
            raise _StepFailed(f"the edit could not be recorded: {exc}") from exc
        obs = step.observations[0]
        if not obs.ok:
            raise _StepFailed(
                f"the edit failed: {obs.content.splitlines()[0] if obs.content else obs.error}"
            )
        try:
            written = sandbox.resolve_in_workspace(ctx.workspace, edit.path).read_bytes()
        except OSError as exc:
            raise _StepFailed(f"cannot read back {edit.path}: {exc}") from exc
        if written != expected:
            raise _StepFailed(f"{edit.path} does not hold the expected text after the edit")
        return step.index


class _StepFailed(Exception):
    pass


def _remaining(ctx: AgentContext) -> float:
    deadline = ctx.session.deadline
    if deadline is None:
        return ctx.timeout
    return max(0.001, deadline - time.monotonic())


class _Sources:
    """Project files as the run sees them (parsed once; updated after each edit)."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self._files: dict[str, SourceFile | None] = {}

    def file(self, path: str) -> SourceFile | None:
        if path not in self._files:
            try:
                data = sandbox.resolve_in_workspace(self.workspace, path).read_bytes()
                self._files[path] = SourceFile(path, data)
            except (OSError, SyntaxError, ValueError, SandboxError):
                self._files[path] = None
        return self._files[path]

    def get(self, path: str) -> bytes | None:
        src = self.file(path)
        return src.source if src is not None else None

    def update(self, path: str, data: bytes) -> None:
        try:
            self._files[path] = SourceFile(path, data)
        except (SyntaxError, ValueError):
            self._files[path] = None


def _shares(pool: Sequence[_Candidate], family_weights: Mapping[str, float]) -> list[float]:
    """Sampling weights, computed over the candidates still in ``pool``.

    A line in proportion to its score squared; then an operator family of the line in
    proportion to its prior weight times the square root of its edits' total weight (between
    "every family alike", which would spend the first draws on one-edit families, and "every
    edit alike", which would drown the line in copies and variable swaps); then an edit of the
    family in proportion to its own weight (``Edit.weight``).
    """
    mass: dict[tuple[str, int], dict[str, float]] = {}
    line_score: dict[tuple[str, int], float] = {}
    for c in pool:
        where = (c.edit.path, c.edit.line)
        families = mass.setdefault(where, {})
        families[c.edit.family] = families.get(c.edit.family, 0.0) + c.edit.weight
        line_score[where] = c.score
    line_weight = {k: line_score[k] ** _SHARPNESS for k in mass}
    total_lines = sum(line_weight.values())
    family_share = {
        where: {f: family_weights.get(f, 1.0) * math.sqrt(m) for f, m in families.items()}
        for where, families in mass.items()
    }
    out = []
    for c in pool:
        where = (c.edit.path, c.edit.line)
        shares = family_share[where]
        total_families = sum(shares.values())
        p_line = line_weight[where] / total_lines if total_lines > 0 else 0.0
        p_family = shares[c.edit.family] / total_families if total_families > 0 else 0.0
        out.append(p_line * p_family * c.edit.weight / mass[where][c.edit.family])
    return out


def _pick(
    pool: list[_Candidate],
    stream: random.Random,
    sources: _Sources,
    family_weights: Mapping[str, float],
) -> tuple[_Candidate, float] | None:
    """Sample (without replacement) until an edit compiles and changes the AST; returns it with
    the probability it was drawn with."""
    remaining = list(pool)
    while remaining:
        weights = _shares(remaining, family_weights)
        total = sum(weights)
        if total <= 0:
            return None
        target = stream.random() * total
        index = len(remaining) - 1
        acc = 0.0
        for i, w in enumerate(weights):
            acc += w
            if target < acc:
                index = i
                break
        cand = remaining.pop(index)
        src = sources.file(cand.edit.path)
        if src is not None and check(src, cand.edit) is None:
            return cand, weights[index] / total
    return None


def _first_ranked(
    pool: list[_Candidate], sources: _Sources, family_weights: Mapping[str, float]
) -> tuple[_Candidate, float] | None:
    """The first edit in the ranked order (``ranking.rank_key``) that compiles and changes the
    AST; returns it with its share of the pool's total weight."""
    for cand, share in _ranked_order(pool, family_weights):
        src = sources.file(cand.edit.path)
        if src is not None and check(src, cand.edit) is None:
            return cand, share
    return None


def _ranked_order(
    pool: list[_Candidate], family_weights: Mapping[str, float]
) -> list[tuple[_Candidate, float]]:
    """``pool`` in the ranked order (``ranking.rank_key``), each edit with its share of the
    pool's total weight."""
    keyed = sorted(
        (rank_key(c.score, c.edit, family_weights.get(c.edit.family, 1.0)), i, c)
        for i, c in enumerate(pool)
    )
    total = -sum(k[0][0] for k in keyed) or 1.0
    return [(c, -rank[0] / total) for rank, _, c in keyed]


def _program_key(
    sources: _Sources, edit: Edit, src: SourceFile, original: Mapping[str, bytes | None]
) -> str:
    """Identity of the program after ``edit``: the changed files and their new bytes."""
    digest = hashlib.sha256()
    for path in sorted(original):
        now = edit.apply(src.source) if path == edit.path else sources.get(path)
        if now != original[path] and now is not None:
            digest.update(path.encode("utf-8", "surrogateescape") + b"\0")
            digest.update(hashlib.sha256(now).digest())
    if edit.path not in original:
        digest.update(edit.path.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(hashlib.sha256(edit.apply(src.source)).digest())
    return digest.hexdigest()


def _move(path: str, line: int, edit: Edit, src: SourceFile) -> int | None:
    """Where ``line`` of ``path`` is after ``edit`` (``None``: the edit removed it)."""
    if path != edit.path:
        return line
    first = src.line_of(edit.start)
    last = src.line_of(max(edit.start, edit.end - 1))
    delta = edit.text.count("\n") - src.source[edit.start : edit.end].count(b"\n")
    if line > last or (edit.start == edit.end and line == last):
        return line + delta  # after the edit (or the line an insertion went in front of)
    if line >= first and line > last + delta:
        return None
    return line


def _shift(
    lines: list[tuple[str, int, float]], edit: Edit, src: SourceFile
) -> list[tuple[str, int, float]]:
    """Line numbers after ``edit`` (for chained edits)."""
    out = []
    for path, line, score in lines:
        moved = _move(path, line, edit, src)
        if moved is not None:
            out.append((path, moved, score))
    return out
