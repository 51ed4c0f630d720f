from windows import window_max, window_sums


def test_windows_of_one():
    assert window_sums([1, 1, 1, 1], 1) == [1, 1, 1, 1]


def test_windows_of_two_in_four():
    assert window_sums([1, 2, 3, 4], 2) == [3, 5, 7]


def test_window_max():
    assert window_max([4, 0, 0, 5], 2) == 5
