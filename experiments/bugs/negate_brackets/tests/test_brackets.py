from brackets import balanced


def test_empty_text_is_balanced():
    assert balanced("")


def test_unclosed_brackets():
    assert not balanced("(((")


def test_one_pair():
    assert balanced("()")


def test_closing_first():
    assert not balanced(")(")
