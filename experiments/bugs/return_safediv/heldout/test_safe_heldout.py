from safe import safe_div


def test_none_default():
    assert safe_div(5, 0, default=None) is None


def test_zero_over_zero():
    assert safe_div(0, 0, 7) == 7
