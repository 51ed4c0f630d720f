from common import count_common


def test_empty_list():
    assert count_common([], [1]) == 0


def test_disjoint_lists():
    assert count_common([1, 2], [3, 4]) == 0


def test_overlap():
    assert count_common([1, 2, 3], [2, 3]) == 2


def test_repeat_in_first_list_only():
    assert count_common([1, 1], [1]) == 1


def test_repeats_in_both():
    assert count_common([2, 2], [2, 2]) == 2
