import pytest
from brackets import balanced


@pytest.mark.parametrize(
    ("text", "expected"),
    [("([]{})", True), ("(]", False), ("())", False), ("a(b)c", True), ("[(])", False)],
)
def test_balanced(text, expected):
    assert balanced(text) is expected
