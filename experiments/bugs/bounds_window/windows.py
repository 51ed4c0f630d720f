"""Sliding windows."""


def window_sums(xs, k):
    """Sums of every run of k consecutive values."""
    return [sum(xs[i : i + k]) for i in range(len(xs) - k)]


def window_max(xs, k):
    return max(window_sums(xs, k), default=None)
