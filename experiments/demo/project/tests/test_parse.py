import pytest

from invoice.parse import Item, parse_line, parse_lines

ORDER = """widget, 2, 3.50
# a comment line
gadget, 10, 1.00

gizmo, 1, 12.00
"""


def test_parse_line_strips_spaces():
    assert parse_line(" bolt , 4 , 0.25 ") == Item("bolt", 4, 0.25)


def test_parse_line_rejects_missing_name():
    with pytest.raises(ValueError):
        parse_line(" , 1, 2.0")


def test_parse_lines_keeps_every_item():
    assert [i.name for i in parse_lines(ORDER)] == ["widget", "gadget", "gizmo"]


def test_parse_lines_of_a_single_line():
    assert parse_lines("nut, 3, 0.10") == [Item("nut", 3, 0.10)]
