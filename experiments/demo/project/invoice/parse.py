"""Order lines look like ``name, quantity, unit price``; blank lines and ``#`` comments are skipped."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Item:
    name: str
    qty: int
    unit_price: float


def parse_line(line: str) -> Item:
    name, qty, price = [part.strip() for part in line.split(",")]
    if not name:
        raise ValueError(f"missing item name in {line!r}")
    return Item(name=name, qty=int(qty), unit_price=float(price))


def parse_lines(text: str) -> list[Item]:
    items = []
    for line in text.splitlines()[1:]:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        items.append(parse_line(line))
    return items
