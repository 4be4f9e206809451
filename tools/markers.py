"""The generated parts of a document: the text between a pair of marker lines
(docs/reference.md's settings table, the README's demo sample)."""

from __future__ import annotations


def between(text: str, begin: str, end: str) -> str:
    """The text between the markers, without the blank lines around it."""
    start = text.index(begin) + len(begin)
    return text[start : text.index(end, start)].strip("\n")


def replace_between(text: str, begin: str, end: str, body: str) -> str:
    """`text` with `body` between the markers instead of what was there."""
    start = text.index(begin) + len(begin)
    return text[:start] + "\n" + body + "\n" + text[text.index(end, start) :]
