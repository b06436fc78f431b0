"""Writing a local file so that a reader never sees half of it.

Several processes hand each other small files: ``epochgc verify``'s driver
asks a worker for a stall, a worker publishes the faults it injected, ``spark
package`` writes the pins beside an archive another run may be reading. A
reader that opens such a file between its creation and its text reads it
empty (seen in ``make soak``: a watcher thread died on it). Writing under a
temporary name in the same folder and renaming over the target is atomic on
POSIX: a reader sees the old file or the new one.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_atomically(target: Path, text: str, *, mode: int | None = None) -> None:
    """Put ``text`` at ``target``, all at once (``mode``: its permissions,
    set before it appears).

    Raises:
        OSError: the folder is not writable (the temporary file is removed).
    """
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text)
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, target)
    except OSError:
        temporary.unlink(missing_ok=True)
        raise
