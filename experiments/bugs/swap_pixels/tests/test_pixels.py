from pixels import clamp, to_byte


def test_clamp_inside():
    assert clamp(5, 0, 10) == 5


def test_clamp_above():
    assert clamp(15, 0, 10) == 10


def test_to_byte_in_range():
    assert to_byte(100.4) == 100


def test_to_byte_below_range():
    assert to_byte(-5) == 0


def test_to_byte_above_range():
    assert to_byte(300) == 255
