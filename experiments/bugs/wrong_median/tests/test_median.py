from median import median


def test_sorted_odd_list():
    assert median([1, 2, 3]) == 2


def test_unsorted_list():
    assert median([3, 1, 2]) == 2


def test_even_count():
    assert median([1, 2, 3, 4]) == 2.5
