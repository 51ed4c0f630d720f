from product import factorial, product


def test_product_with_a_zero():
    assert product([0, 5]) == 0


def test_product_of_two_numbers():
    assert product([2, 3]) == 6


def test_empty_product_is_one():
    assert product([]) == 1


def test_factorial_of_zero():
    assert factorial(0) == 1
