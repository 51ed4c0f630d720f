"""Small statistics helpers."""


def count_below(xs, threshold):
    """How many values are strictly below the threshold."""
    return sum(1 for x in xs if x <= threshold)


def mean(xs):
    return sum(xs) / len(xs)
