"""User lists."""


def active_names(users):
    """Names of the users that are not disabled, in order."""
    names = []
    for user in users:
        if user.get("disabled", False):
            names.append(user["name"])
    return names


def count_disabled(users):
    return sum(1 for user in users if user.get("disabled", False))
