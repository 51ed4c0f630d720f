from chunking import chunks, count_chunks


def test_no_items():
    assert chunks([], 2) == []


def test_pairs():
    assert chunks([1, 2, 3, 4], 2) == [[1, 2], [3, 4]]


def test_singletons():
    assert chunks([1, 2, 3], 1) == [[1], [2], [3]]


def test_count_chunks():
    assert count_chunks([1, 2, 3], 2) == 2
