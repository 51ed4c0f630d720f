"""``ScorerConfig``: the ``scoring`` section of a config, one pydantic model validated once;
``Scorer.from_config`` builds the scorer from it."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationInfo,
    field_validator,
)

from treesearch.errors import ConfigError
from treesearch.scoring.envkey import check_cache_inputs
from treesearch.scoring.grading import make_score
from treesearch.scoring.probe import unsupported
from treesearch.scoring.spec import TestSpec
from treesearch.validation import MAX_SECONDS, shown

__all__ = ["ScoreConfig", "ScorerConfig", "WarmMode"]

WarmMode = Literal["auto", "on", "off"]
"""``scoring.warm``: ``auto`` (warm where safe, the first run checked against a cold one),
``on`` (warm where safe, unchecked), ``off`` (always cold): ``scoring.warm.WarmRunner``."""


def _score(value: Any) -> Any:
    """A score's config form, checked by ``make_score`` (its error without a location: pydantic
    gives the key path)."""
    if value is not None:
        try:
            make_score(value, source="", where="")
        except ConfigError as exc:
            raise ValueError(str(exc).removeprefix(": ").removeprefix(".")) from None
    return value


def _per_test_timeout(value: Any) -> str | float:
    if isinstance(value, str) and value in ("auto", "off"):
        return value
    if type(value) in (int, float) and 0 < value <= MAX_SECONDS:  # NaN fails both
        return float(value)
    raise ValueError(
        f"must be auto, off or a number of seconds in (0, {MAX_SECONDS}], got {shown(value)}"
    )


ScoreConfig = Annotated[str | dict[str, Any], BeforeValidator(_score)]
"""A score function's registry name or a ``{kind: name, ...params}`` mapping (checked)."""


class ScorerConfig(BaseModel):
    """The ``scoring`` section as a ``Scorer`` is built from it (``Scorer.from_config``); the
    config's ``treesearch.config.ScoringConfig`` types its ``judge``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    search_tests: TestSpec = TestSpec()
    """The tests that steer the search."""
    grade_tests: TestSpec | None = None
    """Held-out tests that grade the final states (never seen by the search)."""
    score: ScoreConfig = "pass_fraction"
    """Score function: a name or a ``{kind: name, ...params}`` mapping."""
    grade_score: ScoreConfig | None = None
    """Score function of grade runs (default: ``score``)."""
    cache_inputs: list[str] = Field(default_factory=list)
    """Globs (relative to the workspace) of files whose content is part of the cache key."""
    grade_files: dict[str, str] | None = None
    """Held-out files laid over the grading copy: a path in the copy -> a file or folder outside
    the workspace (read by ``scoring.heldout.check_grade_files``, not by ``Scorer``)."""
    warm: WarmMode = "auto"
    """pytest runs forked from a warm server (``scoring.warm``)."""
    order: Literal["auto", "failing_first", "progress_first", "all"] = "auto"
    """``failing_first``: a candidate first runs the tests its parent failed and stops at the
    first still failing (a partial node), the rest only if they all pass; ``progress_first``:
    all of them, the rest if any passes now; ``all``: full runs;
    ``auto``: progress_first in a repair search (the root fails tests), else all
    (``treesearch.scoring.order``)."""
    per_test_timeout: Annotated[str | float, PlainValidator(_per_test_timeout)] = "auto"
    """Limit of each test's call phase: ``auto`` (max(2 s, 20 x its duration in the parent's
    run)), ``off``, or seconds for every test (pytest only)."""
    judge: dict[str, Any] | BaseModel | None = None
    """The value judge (read by the search, ``agents.llm.judge``, not by ``Scorer``; the config's
    ``ScoringConfig`` checks it): a whole ``scoring`` section is accepted."""

    @field_validator("search_tests", mode="before")
    @classmethod
    def _default_tests(cls, value: Any) -> Any:
        return {} if value is None else value  # `search_tests:` with nothing: the defaults

    @field_validator("warm", mode="before")
    @classmethod
    def _warm(cls, value: Any) -> Any:
        # YAML 1.1 reads a bare `on`/`off` as true/false.
        return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value

    @field_validator("cache_inputs", mode="before")
    @classmethod
    def _inputs(cls, value: Any) -> Any:
        try:
            return list(check_cache_inputs(value, "\0"))
        except ConfigError as exc:
            raise ValueError(str(exc).removeprefix("\0: ")) from None

    @field_validator("order", "per_test_timeout")
    @classmethod
    def _supported(cls, value: Any, info: ValidationInfo) -> Any:
        spec = info.data.get("search_tests")
        why = unsupported(spec) if spec is not None else None
        if why and value in ("failing_first", "progress_first"):
            raise ValueError(f"{value}: {why} (use auto or all)")
        if why and info.field_name == "per_test_timeout" and value not in ("auto", "off"):
            raise ValueError(f"{why} (use auto or off)")
        return value
