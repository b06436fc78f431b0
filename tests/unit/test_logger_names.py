"""Every module logs under its own name, but for the short list of names
kept for operators (``logging_setup.OPERATOR_LOGGERS``), each logged by
exactly the module the list names and each named in the documentation.

Read with ``ast`` from the source, like the layering test: a logger name
typed by hand drifts from the module when code moves (before this test,
the ownership round logged as ``epochgc.watermarks.node_ownership`` from
``epochgc/leases/``), and an operator filtering by package then misses it.
"""

from __future__ import annotations

import ast
from pathlib import Path

from epochgc.logging_setup import OPERATOR_LOGGERS

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "epochgc"
PACKAGE_ROOT = "epochgc"
"""The package's root logger: asked for by name only to attach a handler
(a Spark task capturing its lines, a simulated run's trace), never to log."""


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def misnamed_loggers(source: str, module: str) -> list[str]:
    """Every ``logging.getLogger(...)`` in ``source`` whose name is neither
    ``__name__``, the package root, a library's name, nor an operator name
    kept for this very module."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, module)):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "getLogger"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "logging"
            and node.args
        ):
            continue
        arg = node.args[0]
        if isinstance(arg, ast.Name) and arg.id == "__name__":
            continue
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            name = arg.value
            if name == PACKAGE_ROOT or not name.startswith(f"{PACKAGE_ROOT}."):
                continue
            if OPERATOR_LOGGERS.get(name) == module:
                continue
            found.append(f"{module}:{node.lineno}: logs as {name!r}")
        elif isinstance(arg, ast.Name):
            continue  # a variable: the library names held at WARNING, say
        else:
            found.append(f"{module}:{node.lineno}: a logger name computed in place")
    return found


def test_every_module_logs_under_its_own_name_or_a_kept_one() -> None:
    found = [
        offence
        for path in sorted(PACKAGE.rglob("*.py"))
        for offence in misnamed_loggers(path.read_text(), module_name(path))
    ]
    assert not found, "log under __name__, or add the name to OPERATOR_LOGGERS:\n" + "\n".join(
        found
    )


def test_each_kept_name_is_logged_by_its_module_and_documented() -> None:
    docs = "\n".join(p.read_text() for p in sorted((REPO / "docs").glob("*.md")))
    for name, module in OPERATOR_LOGGERS.items():
        path = REPO / (module.replace(".", "/") + ".py")
        assert f'logging.getLogger("{name}")' in path.read_text(), (
            f"{module} does not log as {name}"
        )
        assert f"`{name}`" in docs, f"{name} is kept for operators but no doc names it"


def test_the_check_sees_hand_typed_names() -> None:
    source = (
        "import logging\n"
        "a = logging.getLogger(__name__)\n"
        'b = logging.getLogger("epochgc")\n'
        'c = logging.getLogger("werkzeug")\n'
        'd = logging.getLogger("epochgc.gc.daemon")\n'
        'e = logging.getLogger("epochgc.gc.clock")\n'
        'f = logging.getLogger("epochgc." + "x")\n'
    )
    assert misnamed_loggers(source, "epochgc.gc.daemon.rounds") == [
        "epochgc.gc.daemon.rounds:5: logs as 'epochgc.gc.daemon'",
        "epochgc.gc.daemon.rounds:6: logs as 'epochgc.gc.clock'",
        "epochgc.gc.daemon.rounds:7: a logger name computed in place",
    ]
    assert misnamed_loggers(source.splitlines()[5] + "\n", "epochgc.gc.future_times") == []
