import bisect

import pytest
from bisect_search import bisect_left, contains


@pytest.mark.parametrize("target", [0, 1, 2, 3, 4, 5, 6, 7])
def test_matches_the_standard_library(target):
    xs = [1, 1, 2, 4, 4, 4, 6]
    assert bisect_left(xs, target) == bisect.bisect_left(xs, target)


def test_contains_absent_value():
    assert not contains([1, 3, 5], 4)
