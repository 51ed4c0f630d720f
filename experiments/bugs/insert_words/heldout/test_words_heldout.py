from words import word_lengths


def test_extra_spaces():
    assert word_lengths("  a  bb ") == [1, 2]


def test_three_words():
    assert word_lengths("x y zz") == [1, 1, 2]
