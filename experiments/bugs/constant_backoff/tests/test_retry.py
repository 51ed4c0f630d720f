from retry import delays, total_wait


def test_no_attempts():
    assert delays(0) == []


def test_first_delay_is_the_base():
    assert delays(1) == [0.5]


def test_delays_double():
    assert delays(3) == [0.5, 1.0, 2.0]


def test_total_wait():
    assert total_wait(2, 1.0) == 3.0
