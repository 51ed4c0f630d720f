from roman import to_roman


def test_three():
    assert to_roman(3) == "III"


def test_eight():
    assert to_roman(8) == "VIII"


def test_four():
    assert to_roman(4) == "IV"


def test_year():
    assert to_roman(1994) == "MCMXCIV"
