"""The example configurations shipped inside the package (``epochgc/examples``),
so that an installed epochgc has them wherever it runs: ``epochgc demo``
without ``--config`` uses ``local.toml``, and ``epochgc config example``
writes them all into a folder. The repository's ``config/`` files are links
to these: one copy of each.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from epochgc.errors import InvalidArgumentError

EXAMPLES = {
    "local.toml": "the embedded S3 in this process, demo timings (epochgc demo)",
    "local-server.toml": "a local `epochgc embedded-s3 --port 9000`, demo timings (the quickstart)",
    "aws.example.toml": "a real S3 bucket, production timings: fill in the bucket and region",
    "default.toml": "every setting with its default and what it does",
}
"""File name -> what it is for."""

DEMO = "local.toml"


def example_path(name: str) -> Path:
    """Where the shipped example ``name`` is (a real file: the package is
    installed as files, never zipped)."""
    if name not in EXAMPLES:
        raise InvalidArgumentError(f"no example configuration {name!r}: {sorted(EXAMPLES)}")
    return Path(str(resources.files("epochgc") / "examples" / name))


def write_examples(out_dir: Path, *, overwrite: bool = False) -> list[Path]:
    """Copy every example into ``out_dir`` (created); refuse to replace a
    file that is there unless ``overwrite``.

    Raises:
        InvalidArgumentError: a file is there already, or ``out_dir`` cannot
            be written.
    """
    targets = [out_dir / name for name in EXAMPLES]
    existing = [str(t) for t in targets if t.exists()]
    if existing and not overwrite:
        raise InvalidArgumentError(
            f"{', '.join(existing)} already there: pass --force to replace, or another folder"
        )
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for target in targets:
            target.write_text(example_path(target.name).read_text(encoding="utf-8"))
    except OSError as err:
        raise InvalidArgumentError(f"cannot write into {out_dir}: {err.strerror}") from err
    return targets
