import pytest
from pixels import to_byte


@pytest.mark.parametrize(("value", "byte"), [(255.6, 255), (254.6, 255), (12.2, 12), (1e9, 255)])
def test_to_byte(value, byte):
    assert to_byte(value) == byte
