from grades import letter


def test_high_score_is_an_a():
    assert letter(95) == "A"


def test_ninety_is_an_a():
    assert letter(90) == "A"


def test_eighty_five_is_a_b():
    assert letter(85) == "B"


def test_low_score_fails():
    assert letter(50) == "F"
