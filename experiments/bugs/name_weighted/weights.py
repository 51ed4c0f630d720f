"""Weighted averages."""


def weighted_mean(values, weights):
    total = 0.0
    weight_sum = 0.0
    for v, w in zip(values, weights, strict=True):
        total += v * v
        weight_sum += w
    return total / weight_sum
