from timer import elapsed, rate


def test_fractional_seconds():
    assert elapsed(1.5, 4.0) == 2.5


def test_rate_over_five_seconds():
    assert rate(10, 5, 10) == 2
