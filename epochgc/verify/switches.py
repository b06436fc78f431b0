"""The ``stall-{id}`` switch by which ``epochgc verify``'s driver asks one
worker process to stall a loop (``worker.stall_of`` says what each spec
means). It carries text, unlike the other switches, whose existence is the
message: a switch seen before its text was written was read as empty once,
in ``make soak``, and the watcher thread died on it, so it is written under
another name and renamed, and one without text is looked at again later.
"""

from __future__ import annotations

from pathlib import Path

from epochgc.files import write_atomically


def stall_switch(folder: Path, ident: str) -> Path:
    """Where the driver asks process ``ident`` to stall one of its loops."""
    return folder / f"stall-{ident}"


def set_stall_switch(folder: Path, ident: str, spec: str) -> None:
    """Ask for a stall (``"MODE LOOP"``, see ``stall_of``): the switch is
    written under another name and renamed, so it appears with its text."""
    write_atomically(stall_switch(folder, ident), spec)


def take_stall_switch(folder: Path, ident: str) -> str | None:
    """The stall asked for, removing the switch so it is taken once (the
    process restarted after the stall runs clean); ``None`` when there is
    none, or when it holds no text yet (a writer between creating and
    writing it: looked at again next time)."""
    switch = stall_switch(folder, ident)
    try:
        spec = switch.read_text().strip()
    except FileNotFoundError:
        return None
    if not spec:
        return None
    switch.unlink(missing_ok=True)
    return spec
