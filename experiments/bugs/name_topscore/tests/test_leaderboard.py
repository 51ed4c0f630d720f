from leaderboard import ranking, top_score


def test_no_scores():
    assert top_score([]) is None


def test_one_score():
    assert top_score([5]) == 5


def test_highest_score_wins():
    assert top_score([3, 9, 4]) == 9


def test_ranking():
    assert ranking([3, 9, 4]) == [9, 4, 3]
