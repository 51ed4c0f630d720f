from invoice.parse import Item
from invoice.pricing import grand_total, line_total, subtotal, tax


def test_line_total_small_order():
    assert line_total(Item("a", 3, 2.0)) == 6.0


def test_bulk_discount_starts_at_threshold():
    assert line_total(Item("a", 10, 1.0)) == 9.0


def test_bulk_discount_above_threshold():
    assert line_total(Item("a", 20, 1.0)) == 18.0


def test_tax_and_grand_total():
    items = [Item("a", 1, 10.0), Item("b", 10, 1.0)]
    assert subtotal(items) == 19.0
    assert tax(19.0) == 3.8
    assert grand_total(items) == 22.8
