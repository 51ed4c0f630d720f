import pytest
from temperature import to_celsius, to_fahrenheit


@pytest.mark.parametrize(("f", "c"), [(32, 0), (-40, -40), (50, 10), (98.6, 37.0)])
def test_to_celsius(f, c):
    assert to_celsius(f) == pytest.approx(c)


def test_round_trip():
    assert to_celsius(to_fahrenheit(21.5)) == pytest.approx(21.5)
