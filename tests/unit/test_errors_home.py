"""Every domain error lives in ``epochgc/errors.py``: a caller catches any
of them without importing the module that raises it (which may sit in a
layer it must not import), and the error tree reads in one place.

Read with ``ast`` from the source, like the layering test: a class defined
in any other module of ``epochgc`` whose bases reach ``EpochGCError``
(directly, through a class of ``errors.py``, or through another class so
found) is a stray. Private helpers (a name starting with ``_``) and classes
that do not derive from ``EpochGCError`` (the simulation's ``Violation``,
config's ``_FieldError``) are not counted.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "epochgc"
ERRORS = PACKAGE / "errors.py"


def base_names(node: ast.ClassDef) -> set[str]:
    """The names a class derives from: ``StorageError`` for both
    ``StorageError`` and ``errors.StorageError``."""
    names = set()
    for written in node.bases:
        base = written.value if isinstance(written, ast.Subscript) else written
        if isinstance(base, ast.Name):
            names.add(base.id)
        elif isinstance(base, ast.Attribute):
            names.add(base.attr)
    return names


def classes(source: str) -> list[ast.ClassDef]:
    return [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef)]


def error_names(source: str) -> set[str]:
    """The classes of ``source`` (errors.py) that derive from ``EpochGCError``,
    with ``EpochGCError`` itself."""
    found = {"EpochGCError"}
    defined = classes(source)
    while True:
        more = {c.name for c in defined if base_names(c) & found} - found
        if not more:
            return found
        found |= more


def strays(sources: Mapping[str, str], known: set[str]) -> list[str]:
    """``module: Class`` for each public class of ``sources`` (module name ->
    text) that derives from one of ``known`` or from another stray."""
    defined = {module: classes(text) for module, text in sources.items()}
    errors = set(known)
    found: set[tuple[str, str]] = set()
    while True:
        more = {
            (module, c.name)
            for module, nodes in defined.items()
            for c in nodes
            if base_names(c) & errors
        } - found
        if not more:
            break
        found |= more
        errors |= {name for _, name in more}
    return sorted(f"{module}: {name}" for module, name in found if not name.startswith("_"))


def package_sources() -> dict[str, str]:
    return {
        str(path.relative_to(REPO)): path.read_text()
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != ERRORS
    }


def test_every_domain_error_is_defined_in_errors_py() -> None:
    found = strays(package_sources(), error_names(ERRORS.read_text()))
    assert not found, (
        "subclasses of EpochGCError defined outside epochgc/errors.py (move them there "
        "and import them from epochgc.errors):\n" + "\n".join(found)
    )


def test_the_scan_finds_what_it_must() -> None:
    """The rule rests on ``error_names`` and ``strays``: check them on
    errors.py itself and on made-up modules."""
    known = error_names(ERRORS.read_text())
    assert {"StorageError", "RetriesExhaustedError", "StoreUnreachableError"} <= known
    assert "DeleteResult" not in known, "a Protocol in errors.py is not an error"
    sources = {
        "a.py": "class Direct(EpochGCError): ...\nclass _Private(EpochGCError): ...\n",
        "b.py": "class Deep(errors.RetriesExhaustedError): ...\nclass Sub(Direct): ...\n",
        "c.py": "class Violation(Exception): ...\nclass Killed(BaseException): ...\n",
        "d.py": "def f() -> None:\n    class Local(StorageError): ...\n",
    }
    assert strays(sources, known) == ["a.py: Direct", "b.py: Deep", "b.py: Sub", "d.py: Local"]
