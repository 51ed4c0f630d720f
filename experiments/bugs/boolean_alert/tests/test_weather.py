from weather import feels_like, should_alert


def test_hot_and_humid_alerts():
    assert should_alert(35, 90)


def test_hot_and_dry_alerts():
    assert should_alert(35, 20)


def test_cool_and_humid_alerts():
    assert should_alert(20, 85)


def test_mild_day_does_not_alert():
    assert not should_alert(20, 20)


def test_feels_like():
    assert feels_like(10, 20) == 8
