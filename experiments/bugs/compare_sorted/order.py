"""Order checks."""


def is_sorted(xs):
    """True when xs is in non-decreasing order."""
    for i in range(len(xs) - 1):
        if xs[i] >= xs[i + 1]:
            return False
    return True
