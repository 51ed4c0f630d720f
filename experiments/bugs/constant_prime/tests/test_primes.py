from primes import is_prime, primes_below


def test_seven_is_prime():
    assert is_prime(7)


def test_nine_is_not_prime():
    assert not is_prime(9)


def test_one_is_not_prime():
    assert not is_prime(1)


def test_primes_below_ten():
    assert primes_below(10) == [2, 3, 5, 7]
