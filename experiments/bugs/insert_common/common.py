"""Sorted-list intersection."""


def count_common(a, b):
    """How many values two sorted lists share, counting repeats."""
    i = j = count = 0
    while i < len(a) and j < len(b):
        if a[i] == b[j]:
            count += 1
            i += 1
        elif a[i] < b[j]:
            i += 1
        else:
            j += 1
    return count
