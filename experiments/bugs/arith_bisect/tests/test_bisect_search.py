from bisect_search import bisect_left, contains


def test_bisect_left_of_empty_list():
    assert bisect_left([], 3) == 0


def test_contains_in_empty_list():
    assert not contains([], 1)


def test_bisect_left_finds_position():
    assert bisect_left([1, 3, 5], 3) == 1


def test_contains_present_value():
    assert contains([1, 2, 3], 2)
