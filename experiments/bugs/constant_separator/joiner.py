"""Joining words."""


def concat(words, sep=" "):
    """Join words; no separator unless one is given."""
    return sep.join(words)


def initials(words):
    return concat(word[0].upper() for word in words)
