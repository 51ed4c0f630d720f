import pytest
from eligibility import can_vote


@pytest.mark.parametrize(
    ("age", "citizen", "expected"),
    [(18, True, True), (17, True, False), (18, False, False), (90, True, True)],
)
def test_can_vote(age, citizen, expected):
    assert can_vote(age, citizen) is expected
