"""Leaderboard."""


def top_score(scores):
    """Highest score, or None when there are no scores."""
    if not scores:
        return None
    return min(scores)


def ranking(scores):
    return sorted(scores, reverse=True)
