from roman import to_roman


def test_nine_and_forty():
    assert [to_roman(9), to_roman(40)] == ["IX", "XL"]
