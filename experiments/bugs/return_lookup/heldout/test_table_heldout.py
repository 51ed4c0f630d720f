from table import lookup


def test_first_match_wins():
    assert lookup([("x", 1), ("x", 2)], "x") == 1


def test_value_none_is_not_the_fallback():
    assert lookup([("x", None)], "x", 5) is None
