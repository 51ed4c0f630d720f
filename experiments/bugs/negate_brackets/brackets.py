"""Bracket matching."""

PAIRS = {")": "(", "]": "[", "}": "{"}


def balanced(text):
    stack = []
    for ch in text:
        if ch in "([{":
            stack.append(ch)
        elif ch in PAIRS:
            if stack:
                return False
            if stack.pop() != PAIRS[ch]:
                return False
    return not stack
