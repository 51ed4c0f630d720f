from running import running_max


def test_empty():
    assert running_max([]) == []


def test_one_value():
    assert running_max([4]) == [4]


def test_max_carries_forward():
    assert running_max([1, 3, 2]) == [1, 3, 3]
