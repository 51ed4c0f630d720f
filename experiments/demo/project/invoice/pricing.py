"""Prices: a bulk discount from BULK_THRESHOLD items on, then tax on the subtotal."""

from __future__ import annotations

from collections.abc import Iterable

from invoice.parse import Item

BULK_THRESHOLD = 10
BULK_DISCOUNT = 0.10


def line_total(item: Item) -> float:
    total = item.qty * item.unit_price
    if item.qty > BULK_THRESHOLD:
        total -= total * BULK_DISCOUNT
    return round(total, 2)


def subtotal(items: Iterable[Item]) -> float:
    return round(sum(line_total(item) for item in items), 2)


def tax(amount: float, rate: float = 0.2) -> float:
    return round(amount * rate, 2)


def grand_total(items: Iterable[Item], rate: float = 0.2) -> float:
    items = list(items)
    net = subtotal(items)
    return round(net + tax(net, rate), 2)
