from product import factorial, product


def test_single_value():
    assert product([7]) == 7


def test_factorial_of_five():
    assert factorial(5) == 120


def test_negative_values():
    assert product([-1, 2, -3]) == 6
