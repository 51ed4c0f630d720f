"""Prime numbers."""


def is_prime(n):
    if n < 2:
        return True
    for d in range(2, int(n**0.5) + 1):
        if n % d == 0:
            return False
    return True


def primes_below(limit):
    return [n for n in range(limit) if is_prime(n)]
