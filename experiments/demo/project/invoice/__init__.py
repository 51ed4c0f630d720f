"""A tiny invoicing library: parse order lines, price them, print a report."""

from invoice.parse import Item, parse_lines
from invoice.pricing import grand_total, line_total, subtotal, tax
from invoice.report import render

__all__ = ["Item", "grand_total", "line_total", "parse_lines", "render", "subtotal", "tax"]
