"""Number series."""


def triangle(n):
    """1 + 2 + ... + n."""
    return sum(range(n))


def squares(n):
    return [i * i for i in range(1, n + 1)]
