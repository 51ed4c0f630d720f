from eligibility import can_rent_car, can_vote


def test_adult_citizen_can_vote():
    assert can_vote(30, True)


def test_child_cannot_vote():
    assert not can_vote(12, True)


def test_foreigner_cannot_vote():
    assert not can_vote(40, False)


def test_car_rental_rules():
    assert can_rent_car(25, True) and not can_rent_car(19, True)
