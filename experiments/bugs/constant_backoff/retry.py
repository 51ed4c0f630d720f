"""Retry back-off."""


def delays(attempts, base=0.5):
    """Exponential back-off: base, 2 * base, 4 * base, ..."""
    return [base * 3**i for i in range(attempts)]


def total_wait(attempts, base=0.5):
    return sum(delays(attempts, base))
