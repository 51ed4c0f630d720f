from uniq import unique_sorted


def test_no_values():
    assert unique_sorted([]) == []


def test_one_value():
    assert unique_sorted([1]) == [1]


def test_duplicates_removed_and_sorted():
    assert unique_sorted([3, 1, 3, 2]) == [1, 2, 3]
