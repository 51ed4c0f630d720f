from weights import weighted_mean


def test_zero_values():
    assert weighted_mean([0, 0], [1, 2]) == 0


def test_single_unit_value():
    assert weighted_mean([1], [1]) == 1


def test_two_values():
    assert weighted_mean([1, 3], [3, 1]) == 1.5
