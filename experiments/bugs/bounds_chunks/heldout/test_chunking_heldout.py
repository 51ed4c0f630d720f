from chunking import chunks


def test_last_chunk_is_short():
    assert chunks([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]


def test_chunk_larger_than_list():
    assert chunks([1, 2], 5) == [[1, 2]]
