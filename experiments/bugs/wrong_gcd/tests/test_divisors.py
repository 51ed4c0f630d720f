from divisors import gcd


def test_divisor():
    assert gcd(4, 8) == 4


def test_coprime():
    assert gcd(7, 3) == 1


def test_common_factor():
    assert gcd(12, 18) == 6


def test_common_factor_two():
    assert gcd(10, 4) == 2
