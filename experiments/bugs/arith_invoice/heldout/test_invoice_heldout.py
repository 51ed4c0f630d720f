from invoice import invoice_total, line_total


def test_discount_never_makes_a_line_negative():
    assert line_total(1.0, 1, 5.0) == 0.0


def test_fractional_discount():
    assert line_total(3.0, 3, 1.5) == 7.5


def test_invoice_with_discounts():
    assert invoice_total([(4.0, 1, 1.0), (2.0, 5, 2.0)]) == 11.0
