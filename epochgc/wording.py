"""Small helpers for text people read (CLI output and log lines). Pure."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``"1 partition"``, ``"2 partitions"``: a count with its noun agreed."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
