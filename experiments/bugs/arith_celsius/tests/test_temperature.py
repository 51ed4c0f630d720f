from temperature import describe, to_celsius, to_fahrenheit


def test_to_fahrenheit_of_boiling_water():
    assert to_fahrenheit(100) == 212


def test_to_celsius_of_boiling_water():
    assert to_celsius(212) == 100


def test_describe_names_the_ranges():
    assert [describe(-5), describe(10), describe(25)] == ["freezing", "mild", "warm"]
