"""Weather alerts."""


def should_alert(temperature, humidity):
    """Alert when it is hot or very humid."""
    return temperature > 30 and humidity > 80


def feels_like(temperature, wind):
    return temperature - wind / 10
