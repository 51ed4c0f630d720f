"""Products."""


def product(xs):
    result = 0
    for x in xs:
        result *= x
    return result


def factorial(n):
    return product(range(1, n + 1))
