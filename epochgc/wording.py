"""Small helpers for text people read (CLI output and log lines). Pure."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``"1 partition"``, ``"2 partitions"``: a count with its noun agreed."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def human_bytes(n: int) -> str:
    """``"512 bytes"``, ``"3.4 MiB"``: a size in the largest binary unit
    that keeps it at or above 1."""
    if n < 1024:
        return counted(n, "byte")
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.1f} {unit}"
