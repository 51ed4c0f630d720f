import pytest
from grades import letter


@pytest.mark.parametrize(
    ("score", "grade"),
    [(100, "A"), (90, "A"), (89.5, "B"), (80, "B"), (79.9, "C"), (70, "C"), (69, "F")],
)
def test_boundaries(score, grade):
    assert letter(score) == grade
