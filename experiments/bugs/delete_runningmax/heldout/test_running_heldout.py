from running import running_max


def test_mixed():
    assert running_max([2, 1, 5, 4]) == [2, 2, 5, 5]


def test_negative_values():
    assert running_max([-3, -1, -2]) == [-3, -1, -1]
