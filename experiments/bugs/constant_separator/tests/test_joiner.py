from joiner import concat


def test_concat_nothing():
    assert concat([]) == ""


def test_concat_with_a_separator():
    assert concat(["a", "b"], "-") == "a-b"


def test_concat_without_separator():
    assert concat(["ab", "c"]) == "abc"
