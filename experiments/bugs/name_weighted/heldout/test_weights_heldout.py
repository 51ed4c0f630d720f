import pytest
from weights import weighted_mean


def test_uneven_weights():
    assert weighted_mean([10, 20], [1, 3]) == 17.5


def test_zero_weights_ignore_values():
    assert weighted_mean([2, 4, 6], [0, 0, 1]) == 6


def test_fractions():
    assert weighted_mean([0.5, 1.5], [1, 1]) == pytest.approx(1.0)
