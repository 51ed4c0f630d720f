from shapes import Rectangle


def test_wide_rectangle():
    assert Rectangle(4, 1).area() == 4


def test_flat_rectangle():
    assert Rectangle(0, 7).area() == 0


def test_tall_rectangle():
    assert Rectangle(1, 6).area() == 6
