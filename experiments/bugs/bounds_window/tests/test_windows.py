from windows import window_sums


def test_empty_list():
    assert window_sums([], 1) == []


def test_window_longer_than_list():
    assert window_sums([5], 2) == []


def test_windows_of_two():
    assert window_sums([1, 2, 3], 2) == [3, 5]


def test_one_window():
    assert window_sums([1, 2, 3], 3) == [6]
