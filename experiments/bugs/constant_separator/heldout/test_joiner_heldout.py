from joiner import concat, initials


def test_initials():
    assert initials(["grace", "brewster", "hopper"]) == "GBH"


def test_three_words():
    assert concat(["x", "y", "z"]) == "xyz"
