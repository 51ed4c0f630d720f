from safe import safe_div


def test_plain_division():
    assert safe_div(6, 3) == 2


def test_zero_divisor_gives_zero_by_default():
    assert safe_div(1, 0) == 0.0


def test_zero_divisor_gives_the_default():
    assert safe_div(1, 0, default=-1) == -1
