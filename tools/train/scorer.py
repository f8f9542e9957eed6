"""Exact-match scoring of recall answers.

An answer counts when the model's reply, normalised, equals the expected text normalised:
surrounding whitespace and one trailing period dropped, inner whitespace squeezed, case kept
(codes and names are case-sensitive facts). Nothing else is forgiven: "4821." matches "4821",
"48 21" does not.
"""


def normalise(text):
    t = " ".join(text.split())
    if t.endswith("."):
        t = t[:-1].rstrip()
    return t


def exact_match(predicted, expected):
    return normalise(predicted) == normalise(expected)


def score(pairs):
    """pairs: iterable of (predicted, expected) -> (correct, total, accuracy)."""
    pairs = list(pairs)
    correct = sum(exact_match(p, e) for p, e in pairs)
    return correct, len(pairs), (correct / len(pairs) if pairs else 0.0)
