"""What Spark executors need to run epochgc's tasks, built on the driver's
machine (``epochgc spark package``, ``make spark-package``, and
``epochgc gc spark`` on a non-local master when the files are missing).

Two files, because they change at different speeds (and a third, the
job's entry script for ``spark-submit``, ``spark_gc.py``):

* ``epochgc.zip``: the ``epochgc`` package alone, for ``--py-files`` /
  ``SparkContext.addPyFile``. A zip and not a wheel: PySpark puts only
  ``.zip``, ``.egg`` and ``.jar`` files of ``--py-files`` on the executors'
  ``sys.path``; a ``.whl`` there is silently not importable. Rebuilt on every
  call (it takes milliseconds), so it always matches the driver's code.
* ``epochgc-env.tar.gz``: a virtualenv with boto3 and pyarrow at the
  driver's versions (not pyspark, which Spark puts on the workers' path
  itself, and not moto), packed by venv-pack, for ``--archives
  epochgc-env.tar.gz#environment`` with
  ``spark.pyspark.python=./environment/bin/python``. venv-pack does not
  copy the interpreter: ``bin/python`` links to the Python that built it,
  so workers need the same Python version at the same path (true of nodes
  built from one image; docs/spark.md gives the alternatives).

Building the environment takes 10-25 s and needs the package index, so it
is built once per set of pins (``environment_pins``: the Python version and
the pinned versions) into a cache shared by every package folder,
``$XDG_CACHE_HOME/epochgc/spark-environments/<key>/``, and each folder
gets a hard link to it (a copy across file systems), with
``epochgc-env.pins`` beside it. ``make spark-package`` into ``dist/spark``
and ``gc spark``'s own package folder then hold one file built once; a
change of pins builds one new archive for all. Builders of one key take a
lock, so concurrent ones build once; every file is written under a
temporary name and renamed, so no reader ever sees half an archive.

The names are stable so that a deployment recipe can name the files.

Why venv-pack: it is the packer PySpark's package-management guide gives
for pip/venv projects, its archive works unchanged with ``--archives`` on
standalone, YARN and Kubernetes, and it is pure Python (conda-pack needs a
conda environment; a PEX needs a Python and the pex tool on every worker's
launch path).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import venv
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import epochgc
from epochgc.errors import SparkPackageError
from epochgc.files import write_atomically
from epochgc.logging_setup import SHOWN

log = logging.getLogger(__name__)


def is_local_master(master: str) -> bool:
    """Whether ``master`` runs executors inside the driver's JVM."""
    return master == "local" or master.startswith("local[")


ENVIRONMENT_ALIAS = "environment"
"""The folder name executors unpack the environment archive into."""

EXECUTOR_PYTHON = f"./{ENVIRONMENT_ALIAS}/bin/python"
"""``spark.pyspark.python`` / ``PYSPARK_PYTHON`` for shipped executors
(relative to the executor's working directory, where archives unpack)."""

ENVIRONMENT_PACKAGES = ("boto3", "pyarrow")
"""What the tasks import besides epochgc (and pyspark, which Spark ships)."""


class EnvironmentStep(Enum):
    """What making a folder's environment archive up to date took (the
    value is how ``gc spark``'s time breakdown and ``spark package`` say it)."""

    KEPT = "up to date"
    """The folder already held the current archive."""
    LINKED = "reused from the cache"
    """Linked (or copied) from the shared cache: no build."""
    BUILT = "built"
    """Built into the shared cache (missing, new pins, or asked to)."""


@dataclass(frozen=True)
class SparkPackage:
    """The two files executors need.

    Example::

        package = ensure_package(default_package_dir())
        spark-submit --py-files {package.code_zip} --archives {package.archives_entry}
    """

    code_zip: Path
    environment: Path
    entry_script: Path
    """``spark_gc.py``: what ``spark-submit`` runs (``epochgc gc spark``'s
    options after it)."""
    environment_step: EnvironmentStep | None = None
    """How ``environment`` came to be up to date (``None``: not said)."""

    @property
    def archives_entry(self) -> str:
        """The ``--archives`` / ``spark.archives`` value."""
        return f"{self.environment}#{ENVIRONMENT_ALIAS}"

    def submit_command(self, master: str, driver_python: str, config: str) -> list[str]:
        """The ``spark-submit`` command line that runs the job with these
        files in client mode. A local master unpacks no ``--archives``
        (its workers would look for ``./environment/bin/python`` and fail):
        its workers run ``driver_python``, which has epochgc and what the
        tasks need, so nothing is shipped."""
        flags = (
            ["--conf", f"spark.pyspark.python={driver_python}",
             "--conf", f"spark.pyspark.driver.python={driver_python}"]
            if is_local_master(master)
            else self.submit_flags(driver_python)
        )  # fmt: skip
        return [
            "spark-submit",
            "--master",
            master,
            *flags,
            str(self.entry_script),
            "--config",
            config,
        ]

    def submit_flags(self, driver_python: str) -> list[str]:
        """The options that ship these files: executors use the shipped
        environment, the driver ``driver_python`` (a Python with
        ``epochgc[spark]``; without it Spark would start the driver with the
        executors' relative path)."""
        return [
            "--py-files",
            str(self.code_zip),
            "--archives",
            self.archives_entry,
            "--conf",
            f"spark.pyspark.python={EXECUTOR_PYTHON}",
            "--conf",
            f"spark.pyspark.driver.python={driver_python}",
        ]


def _cache_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache"))


def default_package_dir() -> Path:
    """``$XDG_CACHE_HOME/epochgc/spark`` (``~/.cache/epochgc/spark``)."""
    return _cache_home() / "epochgc" / "spark"


def environment_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/epochgc/spark-environments``: the environment
    archives every package folder links to, one folder per set of pins."""
    return _cache_home() / "epochgc" / "spark-environments"


NOT_SHIPPED = (
    "lib/python*/site-packages/pip/*",
    "lib/python*/site-packages/pip-*",
    "lib/python*/site-packages/setuptools/*",
    "lib/python*/site-packages/setuptools-*",
    "lib/python*/site-packages/pkg_resources/*",
    "lib/python*/site-packages/_distutils_hack/*",
    "lib/python*/site-packages/distutils-precedence.pth",
    "lib/python*/site-packages/pyarrow/tests/*",
    "lib/python*/site-packages/pyarrow/include/*",
    "lib/python*/site-packages/pyarrow/*flight*",
)
"""Left out of the environment archive (about a third of it): installers,
pyarrow's tests and C++ headers, and Arrow Flight (RPC; the tasks only read
CSV/Parquet and compute). Every executor fetches and unpacks the archive at
each job's start, so its size is start-up time."""

CODE_ZIP = "epochgc.zip"
ENVIRONMENT_ARCHIVE = "epochgc-env.tar.gz"
ENVIRONMENT_PINS = "epochgc-env.pins"


def environment_pins() -> str:
    """What the environment archive holds: the Python version and the
    pinned package versions (a change of any of them builds a new one)."""
    python = f"python{sys.version_info.major}.{sys.version_info.minor}"
    pins = " ".join(f"{name}=={_installed_version(name)}" for name in ENVIRONMENT_PACKAGES)
    return f"{python} {pins} (without {len(NOT_SHIPPED)} excluded paths)"


def ensure_package(out_dir: Path, *, rebuild_environment: bool = False) -> SparkPackage:
    """Build the code zip (always) into ``out_dir`` and make its
    environment archive the current one (``ensure_environment``).

    Raises:
        SparkPackageError: pip or venv-pack failed, or ``out_dir`` or the
            cache is not writable.
    """
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise SparkPackageError(f"cannot create {out_dir}: {err.strerror}") from err
    code = build_code_zip(out_dir)
    step = ensure_environment(out_dir, rebuild=rebuild_environment)
    return SparkPackage(
        code, out_dir / ENVIRONMENT_ARCHIVE, write_entry_script(out_dir), environment_step=step
    )


def environment_key(pins: str) -> str:
    """The cache folder name of an environment with these pins. Pure."""
    return hashlib.sha256(pins.encode()).hexdigest()[:16]


def environment_step(
    *, rebuild: bool, cache_current: bool, folder_current: bool, folder_is_cache: bool
) -> EnvironmentStep:
    """What making a folder's archive current takes. Pure.

    The cache is the one source: a folder whose archive is current but
    not the cache's file (built before the cache existed, or before a
    ``--rebuild-environment``) gets the cache's; a folder current with no
    cache entry is kept (and seeds the cache). ``rebuild`` always builds:
    the new archive replaces the cache's, and other folders get it the
    next time they are packaged or shipped.
    """
    if rebuild:
        return EnvironmentStep.BUILT
    if cache_current:
        if folder_current and folder_is_cache:
            return EnvironmentStep.KEPT
        return EnvironmentStep.LINKED
    return EnvironmentStep.KEPT if folder_current else EnvironmentStep.BUILT


def ensure_environment(out_dir: Path, *, rebuild: bool = False) -> EnvironmentStep:
    """Make ``out_dir/epochgc-env.tar.gz`` (and its pins) the current
    environment archive, building it only when the shared cache has none
    for the current pins (or ``rebuild``): see ``environment_step``.

    Raises:
        SparkPackageError: building failed, or a folder is not writable.
    """
    pins = environment_pins()
    cache = environment_cache_dir() / environment_key(pins)
    step = environment_step(
        rebuild=rebuild,
        cache_current=_is_current(cache, pins),
        folder_current=_is_current(out_dir, pins),
        folder_is_cache=_same_file(out_dir / ENVIRONMENT_ARCHIVE, cache / ENVIRONMENT_ARCHIVE),
    )
    if step is EnvironmentStep.KEPT:
        if not _is_current(cache, pins):
            _publish(out_dir, cache)  # seed the cache: the next folder links it
        return step
    if step is EnvironmentStep.BUILT:
        step = _build_into_cache(cache, pins, rebuild=rebuild)
    if not _same_file(out_dir / ENVIRONMENT_ARCHIVE, cache / ENVIRONMENT_ARCHIVE):
        _publish(cache, out_dir)
    log.info("executors' environment %s: %s (%s)", out_dir / ENVIRONMENT_ARCHIVE, step.value, cache)
    return step


def _build_into_cache(cache: Path, pins: str, *, rebuild: bool) -> EnvironmentStep:
    """Build the archive into ``cache`` under the key's lock; a builder
    that waited for another finds it built and does not build again
    (unless asked to rebuild)."""
    with _lock(cache.with_suffix(".lock")):
        if not rebuild and _is_current(cache, pins):
            return EnvironmentStep.LINKED
        try:
            cache.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise SparkPackageError(f"cannot create {cache}: {err.strerror}") from err
        build_environment(cache / ENVIRONMENT_ARCHIVE)
        _write_atomically(cache / ENVIRONMENT_PINS, pins + "\n")
    return EnvironmentStep.BUILT


def _is_current(folder: Path, pins: str) -> bool:
    """``folder`` holds an archive whose pins file says ``pins``."""
    stamp = folder / ENVIRONMENT_PINS
    try:
        return (folder / ENVIRONMENT_ARCHIVE).is_file() and stamp.read_text().strip() == pins
    except OSError:
        return False


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False


def _publish(source: Path, folder: Path) -> None:
    """Put ``source``'s archive and pins into ``folder``: a hard link (no
    space, no time), else a copy (another file system); each under a
    temporary name, then renamed, the pins last, so a reader sees the old
    pair, or the new archive with the old pins (and rebuilds nothing that
    is not out of date), never half a file.

    Raises:
        SparkPackageError: ``folder`` is not writable.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name in (ENVIRONMENT_ARCHIVE, ENVIRONMENT_PINS):
            temporary = folder / f".{name}.{os.getpid()}.tmp"
            temporary.unlink(missing_ok=True)
            try:
                os.link(source / name, temporary)
            except OSError:
                shutil.copy2(source / name, temporary)
            os.replace(temporary, folder / name)
    except OSError as err:
        raise SparkPackageError(
            f"cannot put the environment archive into {folder}: {err.strerror or err}"
        ) from err


def _write_atomically(target: Path, text: str) -> None:
    try:
        write_atomically(target, text, mode=0o644)
    except OSError as err:
        raise SparkPackageError(f"cannot write {target}: {err.strerror}") from err


@contextmanager
def _lock(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (created), held for the block."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = path.open("a")
    except OSError as err:
        raise SparkPackageError(f"cannot create {path}: {err.strerror}") from err
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


ENTRY_SCRIPT = "spark_gc.py"
_ENTRY_SOURCE = '''"""spark-submit entry point of the epochgc deletion job (written by
``epochgc spark package``; docs/spark.md). Takes the options of ``epochgc gc
spark`` but ``--master`` and ``--conf``, which the submit decides."""

import sys

from epochgc.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["gc", "spark", *sys.argv[1:]]))
'''


def write_entry_script(out_dir: Path) -> Path:
    """``out_dir/spark_gc.py``, the script ``spark-submit`` runs.

    Raises:
        SparkPackageError: the file cannot be written.
    """
    target = out_dir / ENTRY_SCRIPT
    try:
        target.write_text(_ENTRY_SOURCE)
    except OSError as err:
        raise SparkPackageError(f"cannot write {target}: {err.strerror}") from err
    return target


def build_code_zip(out_dir: Path) -> Path:
    """``out_dir/epochgc.zip`` holding the ``epochgc`` package as
    this driver imports it (written to a temporary name, then renamed, so a
    concurrent reader never sees half a zip).

    Raises:
        SparkPackageError: the file cannot be written.
    """
    source = Path(epochgc.__file__).parent
    target = out_dir / CODE_ZIP
    try:
        with (
            tempfile.NamedTemporaryFile(dir=out_dir, suffix=".zip.tmp", delete=False) as tmp,
            zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive,
        ):
            for path in sorted(source.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    archive.write(path, Path("epochgc") / path.relative_to(source))
        os.chmod(tmp.name, 0o644)  # readable by whoever submits from a shared cache
        os.replace(tmp.name, target)
    except OSError as err:
        raise SparkPackageError(f"cannot write {target}: {err.strerror}") from err
    return target


def build_environment(target: Path) -> None:
    """Create a virtualenv with boto3 and pyarrow pinned to this driver's
    versions and pack it with venv-pack into ``target``.

    Raises:
        SparkPackageError: venv-pack is not installed, pip failed (the
            message carries pip's last line), or the archive cannot be
            written.
    """
    try:
        import venv_pack  # noqa: PLC0415 - only building an environment needs it
    except ImportError as err:
        raise SparkPackageError(
            "venv-pack is not installed: pip install 'epochgc[spark]' (or venv-pack)"
        ) from err
    pins = [f"{name}=={_installed_version(name)}" for name in ENVIRONMENT_PACKAGES]
    log.info(
        "building the executors' environment %s (%s; 10-25 s, once for these versions)",
        target,
        ", ".join(pins),
        extra=SHOWN,  # long work: shown by a one-shot command too
    )
    with tempfile.TemporaryDirectory(prefix="epochgc-env-", dir=target.parent) as work:
        prefix = Path(work) / "env"
        venv.EnvBuilder(with_pip=True, symlinks=True).create(prefix)
        done = subprocess.run(  # noqa: S603 - our own venv's pip, pinned names
            [str(prefix / "bin" / "python"), "-m", "pip", "install", "--quiet",
             "--disable-pip-version-check", *pins],
            capture_output=True,
            text=True,
            check=False,
        )  # fmt: skip
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise SparkPackageError(f"pip install {' '.join(pins)} failed: {last}")
        partial = Path(work) / target.name
        try:
            venv_pack.pack(
                prefix=str(prefix),
                output=str(partial),
                verbose=False,
                force=True,
                filters=[("exclude", pattern) for pattern in NOT_SHIPPED],
            )
            os.chmod(partial, 0o644)
            os.replace(partial, target)
        except (OSError, venv_pack.VenvPackException) as err:
            raise SparkPackageError(f"venv-pack could not write {target}: {err}") from err


def _installed_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError as err:
        raise SparkPackageError(
            f"{name} is not installed on the driver: pip install 'epochgc[spark]'"
        ) from err
