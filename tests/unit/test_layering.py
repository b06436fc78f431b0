"""The package's layers stay true: every ``epochgc`` import, read with
``ast`` from the source (imports inside functions and under
``TYPE_CHECKING`` count), goes down the layers below, no two packages
import each other through any chain, and no two modules share a file name.

Layers, lowest first::

    foundations   epochgc (the package), errors, extras, wording, periodic,
                  progress, logging_setup, config_examples, files, runtime,
                  events: each other only
    storage       foundations
    leases        storage
    ownership     leases, storage
    watermarks    ownership, leases, storage
    metrics       storage (today it needs no more: request accounting)
    ingest, reconciler, gc
                  metrics, watermarks, ownership, leases, storage; never each other
    config        foundations and the pure rule modules of any layer below
                  (modules that themselves import only foundations: key
                  syntax, stored times, Spark setting names), so that a
                  value is checked by the rule its component owns
    wiring        every layer listed above it
    cli, demo, verify, simulate
                  anything; nothing but cli itself imports cli

Each layer may also import the foundations and its own package.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "epochgc"

FOUNDATIONS = frozenset(
    f"epochgc.{name}"
    for name in (
        "errors",
        "extras",
        "wording",
        "periodic",
        "progress",
        "logging_setup",
        "config_examples",
        "files",
        "runtime",
        "events",
    )
) | {"epochgc"}
SUBSYSTEMS = ("ingest", "reconciler", "gc")
TOPS = ("cli", "demo", "verify", "simulate")

ALLOWED: dict[str, frozenset[str]] = {
    "foundations": frozenset(),
    "storage": frozenset(),
    "leases": frozenset({"storage"}),
    "ownership": frozenset({"leases", "storage"}),
    "watermarks": frozenset({"ownership", "leases", "storage"}),
    "metrics": frozenset({"storage"}),
    **{
        name: frozenset({"metrics", "watermarks", "ownership", "leases", "storage"})
        for name in SUBSYSTEMS
    },
    "config": frozenset({"pure helper"}),
    "wiring": frozenset(
        {"config", *SUBSYSTEMS, "metrics", "watermarks", "ownership", "leases", "storage"}
    ),
    **{name: frozenset({"*"}) for name in TOPS},
}
"""Layer -> the layers it may import besides its own and the foundations."""


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def resolve(name: str) -> str:
    """The module ``name`` refers to: itself, or the module it is an
    attribute of (``epochgc.errors.ConfigError`` -> ``epochgc.errors``)."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def imports_of(module: str) -> Iterator[str]:
    """Every epochgc module ``module`` imports, wherever the import stands."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name == "epochgc" or name.startswith("epochgc."):
                target = resolve(name)
                if target != module:
                    yield target


GRAPH = {module: set(imports_of(module)) for module in MODULES}


def layer(module: str) -> str:
    if module in FOUNDATIONS:
        return "foundations"
    return module.split(".")[1]


def is_pure_helper(module: str) -> bool:
    """A module below ``config`` that imports only the foundations."""
    below_config = (*SUBSYSTEMS, "metrics", "watermarks", "ownership", "leases", "storage")
    return layer(module) in below_config and all(t in FOUNDATIONS for t in GRAPH[module])


def breach(module: str, target: str) -> str | None:
    """Why ``module`` may not import ``target``, or ``None`` if it may."""
    own, theirs = layer(module), layer(target)
    if theirs == "cli" and own != "cli":
        return "nothing imports cli"
    if theirs in ("foundations", own):
        return None
    allowed = ALLOWED[own]
    if "*" in allowed or theirs in allowed:
        return None
    if "pure helper" in allowed and is_pure_helper(target):
        return None
    if own == "config":
        return "config may import only foundations and pure helpers"
    may = "".join(f", {name}" for name in sorted(allowed))
    return f"{own} may import only foundations{may}"


def test_every_import_goes_down_the_layers() -> None:
    found = {
        f"{module} -> {target} ({why})"
        for module, targets in GRAPH.items()
        for target in targets
        if (why := breach(module, target)) is not None
    }
    assert not found, "imports that break the layering:\n" + "\n".join(sorted(found))


def test_every_module_has_a_layer() -> None:
    assert {layer(m) for m in MODULES} == set(ALLOWED)


def package_of(module: str) -> str:
    """The package a module belongs to; a top-level module (``config``,
    ``errors``) stands for itself."""
    if MODULES[module].name == "__init__.py" or module.count(".") == 1:
        return module
    return module.rsplit(".", 1)[0]


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of nodes that reach each other through some chain of
    edges (Tarjan's algorithm), the groups of one node left out."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while (member := stack.pop()) != node:
                group.append(member)
            if group:
                found.append(sorted([node, *group]))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def cycles(depth: int | None) -> dict[str, list[str]]:
    """Each group of packages that import each other -> the imports that
    close the loops; ``depth`` cuts package names to their first segments
    (2: ``epochgc.gc``), ``None`` keeps every subpackage apart."""

    def cut(module: str) -> str:
        package = package_of(module)
        return package if depth is None else ".".join(package.split(".")[:depth])

    graph: dict[str, set[str]] = defaultdict(set)
    for module, targets in GRAPH.items():
        graph[cut(module)] |= {cut(t) for t in targets} - {cut(module)}
    return {
        " <-> ".join(group): sorted(
            f"{module} -> {target}"
            for module, targets in GRAPH.items()
            for target in targets
            if cut(module) in group and cut(target) in group and cut(module) != cut(target)
        )
        for group in strongly_connected(graph)
    }


def test_no_import_cycle_between_top_level_packages() -> None:
    found = cycles(2)
    assert not found, "packages that import each other:\n" + "\n".join(
        f"{group}:\n  " + "\n  ".join(edges) for group, edges in found.items()
    )


def test_no_import_cycle_between_subpackages() -> None:
    """A subpackage and the package around it are two places: ``gc`` ->
    ``gc.daemon`` -> ``gc`` is a loop too."""
    found = cycles(None)
    assert not found, "subpackages that import each other:\n" + "\n".join(
        f"{group}:\n  " + "\n  ".join(edges) for group, edges in found.items()
    )


def test_no_two_modules_share_a_file_name() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in MODULES.values():
        if path.name not in ("__init__.py", "__main__.py"):
            by_name[path.name].append(str(path.relative_to(REPO)))
    found = {
        f"{name}: {', '.join(sorted(paths))}" for name, paths in by_name.items() if len(paths) > 1
    }
    assert not found, "modules that share a file name:\n" + "\n".join(sorted(found))


def test_the_checker_sees_lazy_imports_and_attributes() -> None:
    """The rules rest on the graph and on ``breach``: check they find what
    they must."""
    assert "epochgc.gc.spark.conf" in GRAPH["epochgc.config"]
    assert resolve("epochgc.errors.ConfigError") == "epochgc.errors"
    lazy = [m for m, path in MODULES.items() if "    from epochgc." in path.read_text()]
    assert lazy and all(GRAPH[m] for m in lazy)
    assert breach("epochgc.reconciler.node", "epochgc.ingest.producer") == (
        "reconciler may import only foundations, leases, metrics, ownership, storage, watermarks"
    )
    assert breach("epochgc.storage.s3", "epochgc.leases.holder_codec") == (
        "storage may import only foundations"
    )
    assert breach("epochgc.verify.run", "epochgc.cli.main") == "nothing imports cli"
    assert breach("epochgc.config", "epochgc.storage.keys") is None
    assert breach("epochgc.config", "epochgc.storage.s3") is not None
    assert breach("epochgc.gc.collector", "epochgc.metrics.instruments") is None
