"""``epochgc docs``: where the documentation of this installation is.

The guides ship inside the package (``epochgc/docs``, the repository's
``docs/``), so that a host with only the wheel installed has the pages its
CLI and its units point at; this command prints their paths.
"""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path

from epochgc.cli.arguments import add_command
from epochgc.cli.output import EXIT_OK, SubParsers
from epochgc.config import Config
from epochgc.errors import InvalidArgumentError


def docs_folder() -> Path:
    """The installed documentation (a real folder: the package is installed
    as files, never zipped)."""
    return Path(str(resources.files("epochgc") / "docs"))


def pages(folder: Path) -> dict[str, Path]:
    """Page name (``operating``) -> its file, every guide of ``folder``."""
    return {path.stem: path for path in sorted(folder.glob("*.md"))}


def _title(path: Path) -> str:
    """The page's first heading, for the listing."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem


def register(sub: SubParsers) -> None:
    """``docs``."""
    command = add_command(
        sub,
        "docs",
        _cmd_docs,
        argparse.ArgumentParser(add_help=False),  # reads no configuration
        "where this installation's documentation is (a page's path with PAGE)",
    )
    command.add_argument("page", nargs="?", metavar="PAGE", help="e.g. operating, spark")


def _cmd_docs(_config: Config, args: argparse.Namespace) -> int:
    folder = docs_folder()
    found = pages(folder)
    if args.page is None:
        width = max(len(name) for name in found)
        print(f"epochgc's documentation: {folder}")
        for name, path in found.items():
            print(f"  {name:{width}}  {_title(path)}")
        return EXIT_OK
    name = args.page.removesuffix(".md")
    if name not in found:
        raise InvalidArgumentError(f"no page {args.page!r}; pages: {', '.join(found)}")
    print(found[name])
    return EXIT_OK
