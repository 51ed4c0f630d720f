from order import is_sorted


def test_increasing_list_is_sorted():
    assert is_sorted([1, 2, 3])


def test_decreasing_pair_is_not_sorted():
    assert not is_sorted([3, 1])


def test_empty_list_is_sorted():
    assert is_sorted([])


def test_equal_neighbours_are_sorted():
    assert is_sorted([1, 1, 2])
