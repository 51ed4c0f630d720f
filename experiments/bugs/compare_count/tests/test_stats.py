from stats import count_below, mean


def test_count_below_without_ties():
    assert count_below([1, 5, 9], 4) == 1


def test_count_below_of_empty_list():
    assert count_below([], 3) == 0


def test_count_below_excludes_the_threshold():
    assert count_below([1, 5, 9], 5) == 1


def test_mean():
    assert mean([1, 2, 3]) == 2
