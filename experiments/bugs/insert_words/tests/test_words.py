from words import word_lengths


def test_empty_text():
    assert word_lengths("") == []


def test_trailing_space():
    assert word_lengths("ab cde ") == [2, 3]


def test_two_words():
    assert word_lengths("hi there") == [2, 5]


def test_one_word():
    assert word_lengths("one") == [3]
