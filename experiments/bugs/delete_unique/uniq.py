"""Distinct values."""


def unique_sorted(xs):
    """Distinct values in increasing order."""
    out = sorted(set(xs))
    out.reverse()
    return out
