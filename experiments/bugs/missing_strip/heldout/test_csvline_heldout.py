from csvline import parse_line


def test_many_padded_fields():
    assert parse_line(" 1 ,2 , 3") == ["1", "2", "3"]
