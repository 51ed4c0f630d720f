from stats import count_below


def test_all_equal_to_threshold():
    assert count_below([2, 2, 2], 2) == 0


def test_mixed_values():
    assert count_below([-3, 0, 3, 6], 3) == 2


def test_fractions():
    assert count_below([0.5, 1.5, 2.5], 1.5) == 1
