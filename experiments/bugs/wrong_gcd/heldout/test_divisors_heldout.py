from divisors import gcd


def test_larger_numbers():
    assert gcd(270, 192) == 6


def test_equal_numbers():
    assert gcd(9, 9) == 9
