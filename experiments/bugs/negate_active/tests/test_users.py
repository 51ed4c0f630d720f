from users import active_names, count_disabled


def test_no_users():
    assert active_names([]) == []


def test_disabled_users_are_left_out():
    users = [{"name": "ann"}, {"name": "bob", "disabled": True}]
    assert active_names(users) == ["ann"]


def test_count_disabled():
    assert count_disabled([{"name": "a", "disabled": True}, {"name": "b"}]) == 1
