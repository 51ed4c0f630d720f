"""Invoice arithmetic."""


def line_total(price, quantity, discount=0.0):
    """Price times quantity, less a flat discount, never below zero."""
    total = price * quantity + discount
    return max(total, 0.0)


def invoice_total(lines):
    return sum(line_total(*line) for line in lines)
