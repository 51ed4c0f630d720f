import pytest
from order import is_sorted


@pytest.mark.parametrize(
    ("xs", "expected"),
    [([2, 2, 2], True), ([1, 3, 2], False), ([5], True), ([1, 2, 2, 1], False), ([0, 0], True)],
)
def test_is_sorted(xs, expected):
    assert is_sorted(xs) is expected
