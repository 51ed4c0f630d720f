import pytest
from weather import should_alert


@pytest.mark.parametrize(
    ("t", "h", "expected"), [(31, 0, True), (30, 80, False), (0, 81, True), (-5, 10, False)]
)
def test_should_alert(t, h, expected):
    assert should_alert(t, h) is expected
