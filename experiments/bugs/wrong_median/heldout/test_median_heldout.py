from median import median


def test_unsorted_even_count():
    assert median([9, 1, 5, 3]) == 4


def test_single_value():
    assert median([7]) == 7
