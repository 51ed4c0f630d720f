from primes import is_prime, primes_below


def test_small_numbers():
    assert [is_prime(n) for n in (-3, 0, 1, 2, 3, 4)] == [False, False, False, True, True, False]


def test_primes_below_twenty():
    assert primes_below(20) == [2, 3, 5, 7, 11, 13, 17, 19]
