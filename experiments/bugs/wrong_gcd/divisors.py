"""Number theory."""


def gcd(a, b):
    """Greatest common divisor of two positive integers."""
    small, large = min(a, b), max(a, b)
    if large % small == 0:
        return small
    return 1
