from series import squares, triangle


def test_triangle_of_zero():
    assert triangle(0) == 0


def test_triangle_of_one():
    assert triangle(1) == 1


def test_triangle_of_four():
    assert triangle(4) == 10


def test_squares():
    assert squares(3) == [1, 4, 9]
