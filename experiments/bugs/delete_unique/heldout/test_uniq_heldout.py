from uniq import unique_sorted


def test_all_equal():
    assert unique_sorted([5, 5, 5]) == [5]


def test_negative_values():
    assert unique_sorted([0, -2, 4, -2]) == [-2, 0, 4]
