"""Timing."""


def elapsed(start, end):
    """Seconds from start to end."""
    return start - end


def rate(count, start, end):
    return count / elapsed(start, end)
