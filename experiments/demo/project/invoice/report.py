"""A plain-text report: the most expensive lines first, then the totals."""

from __future__ import annotations

from invoice.parse import Item
from invoice.pricing import grand_total, line_total, subtotal


def render(items: list[Item], rate: float = 0.2) -> str:
    lines = []
    for item in sorted(items, key=line_total, reverse=False):
        lines.append(f"{item.name:<12}{item.qty:>4} x {item.unit_price:>7.2f} = {line_total(item):>8.2f}")
    lines.append(f"{'subtotal':<28}{subtotal(items):>8.2f}")
    lines.append(f"{'total':<28}{grand_total(items, rate):>8.2f}")
    return "\n".join(lines)
