from timer import elapsed, rate


def test_no_time_passed():
    assert elapsed(5, 5) == 0


def test_elapsed():
    assert elapsed(10, 25) == 15


def test_rate():
    assert rate(30, 0, 10) == 3
