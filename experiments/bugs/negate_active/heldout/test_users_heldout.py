from users import active_names


def test_all_disabled():
    assert active_names([{"name": "a", "disabled": True}]) == []


def test_explicitly_enabled_users_stay():
    users = [{"name": "a", "disabled": False}, {"name": "b"}, {"name": "c", "disabled": True}]
    assert active_names(users) == ["a", "b"]
