from series import triangle


def test_triangle_of_ten():
    assert triangle(10) == 55


def test_triangle_of_hundred():
    assert triangle(100) == 5050
