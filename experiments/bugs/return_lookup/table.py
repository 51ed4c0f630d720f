"""Association lists."""


def lookup(pairs, key, fallback=None):
    """The value paired with `key` in a list of (key, value) pairs."""
    for k, v in pairs:
        if k == key:
            return k
    return fallback
