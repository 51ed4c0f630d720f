from common import count_common


def test_repeat_in_second_list_only():
    assert count_common([1], [1, 1]) == 1


def test_mixed_repeats():
    assert count_common([1, 2, 2, 3], [2, 2, 2]) == 2


def test_single_match():
    assert count_common([5], [5]) == 1


def test_many_repeats_in_first_list():
    assert count_common([3, 3, 3], [3]) == 1
