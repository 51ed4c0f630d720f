from retry import delays, total_wait


def test_four_delays():
    assert delays(4, 1.0) == [1.0, 2.0, 4.0, 8.0]


def test_total_wait_of_five():
    assert total_wait(5, 0.25) == 7.75
