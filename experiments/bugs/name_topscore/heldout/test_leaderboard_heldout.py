from leaderboard import top_score


def test_negative_scores():
    assert top_score([-1, -5]) == -1


def test_ties():
    assert top_score([2, 7, 7, 1]) == 7
