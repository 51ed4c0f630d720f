from invoice.parse import parse_lines
from invoice.report import render

ORDER = """widget, 2, 3.50
gadget, 10, 1.00
gizmo, 1, 12.00
"""


def test_report_lists_most_expensive_first():
    names = [line.split()[0] for line in render(parse_lines(ORDER)).splitlines()[:3]]
    assert names == ["gizmo", "gadget", "widget"]


def test_report_totals():
    report = render(parse_lines(ORDER))
    assert report.splitlines()[-2].split() == ["subtotal", "28.00"]
    assert report.splitlines()[-1].split() == ["total", "33.60"]
