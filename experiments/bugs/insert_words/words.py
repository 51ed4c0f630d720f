"""Word statistics."""


def word_lengths(text):
    """Length of each space-separated word."""
    lengths = []
    word = ""
    for ch in text:
        if ch == " ":
            if word:
                lengths.append(len(word))
            word = ""
        else:
            word += ch
    return lengths
