"""Line counts of a small change as ``git diff-tree --numstat`` gives them, without git.

A session records each step's insertions and deletions right after the step's capture; for a
capture written in the process (``_scan_edit.py``) they are counted here instead of by a
``diff-tree`` process. The count must be git's own, so this follows git's xdiff (2.39) where it
decides which lines change:

- binary when a side has a NUL in its first 8000 bytes (``buffer_is_binary``): ``-`` ``-``;
- lines are records that end after ``\\n`` (a last line without one is a record of its own);
- ``xdl_trim_ends``: the common first and last lines are unchanged;
- ``xdl_cleanup_records``: a line with no equal in the other file changes; a line with many
  equals (at least ``bogosqrt(lines)``, at most 1024) changes when it sits in a run of such
  lines and lines without equals (``xdl_clean_mmatch``);
- the rest is diffed by Myers' algorithm, which gives a minimal edit script while its cost
  stays under xdiff's heuristics' thresholds (256 per split): beyond a total cost of
  ``MAX_COST``, ``None`` (git is asked). Moving changed groups (``xdl_change_compact``) does not
  change the counts.

Anything else that could make git count differently is left to git by the caller: a
``.gitattributes`` on the path (a ``diff`` or ``binary`` attribute), a symlink or a type change,
big files. A test compares the counts with git's on random edits.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

FIRST_FEW_BYTES = 8000
MAX_BYTES = 1 << 20
"""Files above this size are counted by git."""
MAX_COST = 400
"""Edit scripts longer than this are counted by git (xdiff's heuristics start at 256 per
half: a total under 512 never reaches them)."""
_MAX_EQLIMIT = 1024
_SIMSCAN_WINDOW = 100
_KPDIS_RUN = 4


def is_binary(data: bytes) -> bool:
    return b"\0" in data[:FIRST_FEW_BYTES]


def records(data: bytes) -> list[bytes]:
    """The lines of ``data`` as xdiff's records (with their ``\\n``)."""
    if not data:
        return []
    parts = data.split(b"\n")
    out = [p + b"\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def numstat(old: bytes | None, new: bytes | None) -> tuple[int, int, bool] | None:
    """(added, deleted, binary) of ``old`` -> ``new`` (``None``: no such side), as git counts
    them; ``None``: leave it to git (too big, too many changes)."""
    for side in (old, new):
        if side is not None and len(side) > MAX_BYTES:
            return None
    a, b = old or b"", new or b""
    if is_binary(a) or is_binary(b):
        return 0, 0, True
    if a == b:
        return 0, 0, False
    changed = _changed_lines(records(a), records(b))
    if changed is None:
        return None
    return changed[1], changed[0], False


def _bogosqrt(n: int) -> int:
    i = 1
    while n > 0:
        i <<= 1
        n >>= 2
    return i


def _changed_lines(a: list[bytes], b: list[bytes]) -> tuple[int, int] | None:
    """Lines of ``a`` deleted and lines of ``b`` added, as xdiff decides (see the module)."""
    n1, n2 = len(a), len(b)
    start, lim = 0, min(n1, n2)
    while start < lim and a[start] == b[start]:
        start += 1
    tail, lim = 0, lim - start
    while tail < lim and a[n1 - 1 - tail] == b[n2 - 1 - tail]:
        tail += 1
    end1, end2 = n1 - tail - 1, n2 - tail - 1
    count1, count2 = Counter(a), Counter(b)
    kept1 = _kept(a, start, end1, count2, min(_bogosqrt(n1), _MAX_EQLIMIT))
    kept2 = _kept(b, start, end2, count1, min(_bogosqrt(n2), _MAX_EQLIMIT))
    cost = _myers_cost(kept1, kept2)
    if cost is None:
        return None
    common = (len(kept1) + len(kept2) - cost) // 2
    return end1 - start + 1 - common, end2 - start + 1 - common


def _kept(
    recs: Sequence[bytes], start: int, end: int, other: Counter[bytes], mlim: int
) -> list[bytes]:
    """The lines of ``recs[start:end + 1]`` that ``xdl_cleanup_records`` keeps for the diff."""
    dis = {}
    for i in range(start, end + 1):
        nm = other[recs[i]]
        dis[i] = 0 if nm == 0 else 2 if nm >= mlim else 1
    return [
        recs[i]
        for i in range(start, end + 1)
        if dis[i] == 1 or (dis[i] == 2 and not _clean_mmatch(dis, i, start, end))
    ]


def _clean_mmatch(dis: dict[int, int], i: int, s: int, e: int) -> bool:
    """``xdl_clean_mmatch``: is the many-equals line ``i`` in a run of discarded lines?"""
    s = max(s, i - _SIMSCAN_WINDOW)
    e = min(e, i + _SIMSCAN_WINDOW)
    rdis0, rpdis0 = 0, 1
    r = 1
    while i - r >= s:
        d = dis[i - r]
        if d == 0:
            rdis0 += 1
        elif d == 2:
            rpdis0 += 1
        else:
            break
        r += 1
    if rdis0 == 0:
        return False
    rdis1, rpdis1 = 0, 1
    r = 1
    while i + r <= e:
        d = dis[i + r]
        if d == 0:
            rdis1 += 1
        elif d == 2:
            rpdis1 += 1
        else:
            break
        r += 1
    if rdis1 == 0:
        return False
    rdis1 += rdis0
    rpdis1 += rpdis0
    return rpdis1 * _KPDIS_RUN < rpdis1 + rdis1


def _myers_cost(a: Sequence[bytes], b: Sequence[bytes]) -> int | None:
    """The length of a shortest edit script from ``a`` to ``b`` (Myers 1986); ``None`` above
    ``MAX_COST``."""
    n, m = len(a), len(b)
    if n == 0 or m == 0:
        return n + m if n + m <= MAX_COST else None
    offset = MAX_COST + 1
    v = [0] * (2 * MAX_COST + 3)
    for d in range(MAX_COST + 1):
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and v[offset + k - 1] < v[offset + k + 1]):
                x = v[offset + k + 1]
            else:
                x = v[offset + k - 1] + 1
            y = x - k
            while x < n and y < m and a[x] == b[y]:
                x += 1
                y += 1
            v[offset + k] = x
            if x >= n and y >= m:
                return d
    return None
