"""Protocol code reaches clocks, sleeping, locks, threads, executors and
randomness only through ``epochgc.runtime.Runtime``, so that ``epochgc
simulate`` can run it on virtual time from one seed.

Read with ``ast`` from the source, like the layering test. ``PROTOCOL``
lists the packages and modules already moved onto the runtime: every one
the simulation runs. The rest of the protocol code (the node's supervisor,
the daemon's jobs, the producer) joins it as the simulation
grows to cover it (issue 39), and this list with it. The thin shells that
may touch the real things are named in ``SHELLS``; ``LEAF_LOCKS`` names
the modules whose only use of ``threading`` is a ``threading.Lock`` held
for a few assignments, never across a request, a sleep or a callback that
might wait (so a simulated task never switches while holding it).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PROTOCOL = (
    "epochgc/leases",
    "epochgc/ownership",
    "epochgc/simulate",
    "epochgc/watermarks/partition",
    "epochgc/watermarks/controller.py",
    "epochgc/watermarks/controller_codec.py",
    "epochgc/watermarks/layout.py",
    "epochgc/watermarks/safe_epoch/aggregate.py",
    "epochgc/watermarks/safe_epoch/compute.py",
    "epochgc/watermarks/safe_epoch/reports.py",
    "epochgc/storage/cas_log.py",
    "epochgc/reconciler/reconcile.py",
    "epochgc/reconciler/fetch.py",
    "epochgc/reconciler/watchdog.py",
    "epochgc/reconciler/leading_rules.py",
    "epochgc/ingest/upload.py",
    "epochgc/gc/planner.py",
    "epochgc/gc/eligibility.py",
    "epochgc/gc/sweeper.py",
    "epochgc/gc/rate.py",
    "epochgc/gc/pause.py",
    "epochgc/gc/control.py",
    "epochgc/gc/round_protocol.py",
    "epochgc/gc/collection_round.py",
    "epochgc/gc/run_report.py",
    "epochgc/gc/deletion_record.py",
    "epochgc/gc/future_times.py",
    "epochgc/gc/janitor.py",
    "epochgc/gc/listing",
    "epochgc/progress.py",
    "epochgc/periodic.py",
    "epochgc/watermarks/ticker.py",
    "epochgc/events.py",
    "epochgc/gc/plan_file.py",
    "epochgc/storage/request_stats.py",
)
"""Packages and modules that must go through the runtime."""

SHELLS = {
    "epochgc/simulate/seeds.py": "runs seeds in worker processes and times them for the "
    "progress line (real time, outside any simulated run)",
    "epochgc/simulate/memory_store.py": "its lock makes each request atomic for the tests and "
    "benchmarks that call it from real threads; it is never held while a simulated task waits",
    "epochgc/watermarks/partition/fence.py": "production's asyncio driver of the epoch window "
    "in front of ``TermWriter.submit``; the durable guard it fronts (the apply-time check) "
    "runs in the simulation",
    "epochgc/watermarks/partition/leader.py": "production's asyncio service that queues "
    "fenced requests into ``TermWriter.submit``, which the simulation calls directly",
    "epochgc/watermarks/partition/directory.py": "production's asyncio registry of the leader "
    "services; the simulation finds a partition's leader from its processes",
}
"""Modules of those packages allowed to touch real time, and why."""

LEAF_LOCKS = {
    "epochgc/gc/rate.py": "the token bucket's state, updated in reserve and on_throttle",
    "epochgc/gc/pause.py": "the set of held jobs; on_change is called after it is released",
    "epochgc/gc/future_times.py": "the writers already warned about",
    "epochgc/progress.py": "the counts, and the log line written from them",
    "epochgc/events.py": "the tuple of subscriptions (publishing reads it without the lock)",
    "epochgc/gc/plan_file.py": "the Parquet writer of a plan or record (a local file)",
    "epochgc/storage/request_stats.py": "the request counters",
    "epochgc/reconciler/watchdog.py": "the watched loops and the latched verdict (rounds "
    "reported from the event loop, checked from the heartbeat and /healthz threads)",
}
"""Modules that may take a ``threading.Lock`` (and nothing else of
``threading``), and what it guards."""

FORBIDDEN_MODULES = {"time", "uuid", "random", "threading", "concurrent.futures", "asyncio"}
FORBIDDEN_CALLS = {("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today")}
RANDOM_TYPES = {"random"}
"""``random.Random`` as a type (a seeded stream handed in) is allowed in the
simulation; drawing from the module's global generator is not."""


def offences(
    source: str,
    name: str = "<source>",
    *,
    allow_random_type: bool = False,
    allow_leaf_lock: bool = False,
) -> list[str]:
    """Every import of a forbidden module and every forbidden call in
    ``source``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                allowed = (allow_random_type and alias.name in RANDOM_TYPES) or (
                    allow_leaf_lock and alias.name == "threading"
                )
                if alias.name in FORBIDDEN_MODULES and not allowed:
                    found.append(f"{name}:{node.lineno}: import {alias.name}")
        elif (
            allow_leaf_lock
            and isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "threading"
            and node.attr != "Lock"
        ):
            found.append(f"{name}:{node.lineno}: threading.{node.attr} (only Lock is a leaf lock)")
        elif isinstance(node, ast.ImportFrom) and node.module in FORBIDDEN_MODULES:
            found.append(f"{name}:{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if isinstance(owner, ast.Name) and (owner.id, node.func.attr) in FORBIDDEN_CALLS:
                found.append(f"{name}:{node.lineno}: {owner.id}.{node.func.attr}()")
            if (
                isinstance(owner, ast.Name)
                and owner.id == "random"
                and node.func.attr not in ("Random",)
            ):
                found.append(f"{name}:{node.lineno}: random.{node.func.attr}() (global stream)")
    return found


def protocol_files() -> list[Path]:
    paths = [REPO / entry for entry in PROTOCOL]
    missing = [str(p.relative_to(REPO)) for p in paths if not p.exists()]
    assert not missing, f"PROTOCOL names what does not exist: {missing}"
    return sorted({f for p in paths for f in ([p] if p.suffix == ".py" else p.rglob("*.py"))})


@pytest.mark.parametrize("path", protocol_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_protocol_code_goes_through_the_runtime(path: Path) -> None:
    relative = str(path.relative_to(REPO))
    if relative in SHELLS:
        return
    simulation = relative.startswith("epochgc/simulate/")
    assert (
        offences(
            path.read_text(),
            relative,
            allow_random_type=simulation,
            allow_leaf_lock=relative in LEAF_LOCKS,
        )
        == []
    )


def test_every_leaf_lock_module_is_protocol_code() -> None:
    listed = {str(p.relative_to(REPO)) for p in protocol_files()}
    assert set(LEAF_LOCKS) <= listed


@pytest.mark.parametrize(
    "line",
    [
        "import threading\nlock = threading.RLock()",
        "import threading\nthreading.Thread(target=f).start()",
        "import threading\nstop = threading.Event()",
        "import threading\nslots = threading.Semaphore(4)",
    ],
)
def test_a_leaf_lock_module_may_take_only_a_lock(line: str) -> None:
    assert offences(line, allow_leaf_lock=True)
    assert not offences("import threading\nlock = threading.Lock()", allow_leaf_lock=True)


@pytest.mark.parametrize(
    "line",
    [
        "import time\nx = time.monotonic()",
        "from datetime import datetime\nx = datetime.now()",
        "import threading\nlock = threading.RLock()",
        "from concurrent.futures import ThreadPoolExecutor",
        "import uuid\nx = uuid.uuid4()",
        "import random\nx = random.random()",
        "import asyncio",
    ],
)
def test_the_check_finds_each_kind_of_escape(line: str) -> None:
    assert offences(line, allow_random_type=True) or "import random" not in line
    assert offences(line)


def test_a_seeded_stream_handed_in_is_allowed_in_the_simulation() -> None:
    assert offences("import random\nrng = random.Random(7)", allow_random_type=True) == []


def _epochgc_imports(path: Path) -> set[Path]:
    """The files of the ``epochgc`` modules ``path`` imports."""
    found: set[Path] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            if not name.startswith("epochgc"):
                continue
            base = REPO / name.replace(".", "/")
            for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                if candidate.is_file():
                    found.add(candidate)
    return found


def test_what_protocol_code_imports_keeps_to_the_runtime_too() -> None:
    """A protocol module that calls into an ``epochgc`` module outside the
    list would reach real threads or clocks through it (the role leases'
    heartbeat did, through ``periodic.py``): every module protocol code
    imports is protocol code, a shell, or free of the forbidden calls."""
    protocol = set(protocol_files())
    escapes: list[str] = []
    for path in sorted(protocol):
        for imported in sorted(_epochgc_imports(path) - protocol):
            relative = str(imported.relative_to(REPO))
            if relative == "epochgc/runtime.py":
                continue
            found = offences(imported.read_text(), relative)
            if found:
                escapes.append(f"{path.relative_to(REPO)} imports {relative}: {found[0]}")
    assert escapes == []
