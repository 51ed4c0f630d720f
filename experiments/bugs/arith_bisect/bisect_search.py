"""Binary search over a sorted list."""


def bisect_left(xs, target):
    lo, hi = 0, len(xs)
    while lo < hi:
        mid = (lo + hi) / 2
        if xs[mid] < target:
            lo = mid + 1
        else:
            hi = mid
    return lo


def contains(xs, target):
    i = bisect_left(xs, target)
    return i < len(xs) and xs[i] == target
