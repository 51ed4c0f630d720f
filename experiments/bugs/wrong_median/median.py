"""Medians."""


def median(xs):
    """Middle value (mean of the two middle values for an even count)."""
    return xs[len(xs) // 2]
