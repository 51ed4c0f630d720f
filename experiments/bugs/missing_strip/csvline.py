"""CSV lines."""


def parse_line(line):
    """Split a comma-separated line into trimmed fields."""
    fields = line.split(",")
    return fields
