"""Chunking."""


def chunks(xs, size):
    """Split xs into consecutive pieces of at most `size` items."""
    out = []
    for start in range(0, len(xs), size):
        out.append(xs[start : start + size - 1])
    return out


def count_chunks(xs, size):
    return -(-len(xs) // size)
