from invoice import invoice_total, line_total


def test_line_total_without_discount():
    assert line_total(2.0, 3) == 6.0


def test_line_total_with_discount():
    assert line_total(10.0, 2, 5.0) == 15.0


def test_invoice_total_adds_lines():
    assert invoice_total([(1.0, 1), (2.0, 2)]) == 5.0
