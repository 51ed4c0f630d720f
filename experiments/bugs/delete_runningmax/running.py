"""Running aggregates."""


def running_max(xs):
    """Largest value seen so far, at each position."""
    out = []
    best = None
    for x in xs:
        best = None
        if best is None or x > best:
            best = x
        out.append(best)
    return out
