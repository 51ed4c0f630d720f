"""Pixel values."""


def clamp(value, low, high):
    return max(low, min(value, high))


def to_byte(value):
    """Round and clamp a channel value to 0..255."""
    return clamp(0, round(value), 255)
