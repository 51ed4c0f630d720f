from table import lookup


def test_empty_table():
    assert lookup([], "a") is None


def test_missing_key_gives_the_fallback():
    assert lookup([("a", 1)], "b", 0) == 0


def test_found_key_gives_its_value():
    assert lookup([("a", 1), ("b", 2)], "b") == 2
