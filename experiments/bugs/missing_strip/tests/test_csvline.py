from csvline import parse_line


def test_plain_fields():
    assert parse_line("a,b") == ["a", "b"]


def test_spaces_after_commas():
    assert parse_line("a, b") == ["a", "b"]


def test_padded_field():
    assert parse_line(" x ") == ["x"]
