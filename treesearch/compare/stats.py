"""Statistics of a comparison, pure Python (no numpy): bootstrap intervals, exact paired tests.

The unit is the instance. With several seeds, each (contender, instance) is first reduced to
the fraction of its seeds that succeeded (``per_instance``); the bootstrap resamples instances,
and the paired test compares those per-instance fractions (a win for A when A's fraction is
higher, a loss when lower, a tie when equal). With one seed that is exactly McNemar's test on
the discordant instances; with several it is the sign test on the per-instance fractions.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from fractions import Fraction

__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "bootstrap_ci",
    "paired_counts",
    "sign_test_p",
]

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0


def bootstrap_ci(
    values: Sequence[float],
    *,
    level: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean of ``values`` (``None`` when there are none).

    ``resamples`` means of ``len(values)`` draws with replacement, from ``random.Random(seed)``:
    the same values give the same interval on every machine. The bounds are the sorted means at
    positions ``floor(a * B)`` and ``ceil((1 - a) * B) - 1`` with ``a = (1 - level) / 2``."""
    n = len(values)
    if n == 0:
        return None
    if resamples < 1 or not 0 < level < 1:
        raise ValueError("resamples must be >= 1 and level in (0, 1)")
    rng = random.Random(seed)
    pool = list(values)
    means = sorted(math.fsum(rng.choices(pool, k=n)) / n for _ in range(resamples))
    alpha = (1.0 - level) / 2.0
    lo = means[min(resamples - 1, math.floor(alpha * resamples))]
    hi = means[max(0, math.ceil((1.0 - alpha) * resamples) - 1)]
    return (round(lo, 6), round(hi, 6))


def sign_test_p(wins: int, losses: int) -> float:
    """Exact two-sided p-value of ``wins`` against ``losses`` under p = 1/2 (ties left out).

    This is the exact McNemar test when wins and losses are the discordant pairs:
    ``min(1, 2 * P(X <= min(wins, losses)))`` with ``X ~ Binomial(wins + losses, 1/2)``
    (computed in exact fractions; 1.0 when there is no discordant pair)."""
    if wins < 0 or losses < 0:
        raise ValueError("counts must be >= 0")
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = Fraction(sum(math.comb(n, i) for i in range(k + 1)), 2**n)
    return float(min(Fraction(1), 2 * tail))


def paired_counts(
    a: Mapping[str, float], b: Mapping[str, float], instances: Sequence[str]
) -> tuple[int, int, int]:
    """(wins, losses, ties) of A over B across ``instances`` present in both mappings (per-
    instance success fractions)."""
    wins = losses = ties = 0
    for iid in instances:
        if iid not in a or iid not in b:
            continue
        if a[iid] > b[iid]:
            wins += 1
        elif a[iid] < b[iid]:
            losses += 1
        else:
            ties += 1
    return wins, losses, ties
