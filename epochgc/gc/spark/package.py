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
  ``spark.pyspark.python=./environment/bin/python``. Built when missing or
  when ``epochgc-env.pins`` (the Python version and the pinned versions)
  no longer matches the driver's (about ten seconds; needs the package
  index). venv-pack does not copy the interpreter: ``bin/python`` links to
  the Python that built it, so workers need the same Python version at the
  same path (true of nodes built from one image; docs/spark.md gives the
  alternatives).

The names are stable so that a deployment recipe can name the files.

Why venv-pack: it is the packer PySpark's package-management guide gives
for pip/venv projects, its archive works unchanged with ``--archives`` on
standalone, YARN and Kubernetes, and it is pure Python (conda-pack needs a
conda environment; a PEX needs a Python and the pex tool on every worker's
launch path).
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import subprocess
import sys
import tempfile
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path

import epochgc
from epochgc.errors import EpochGCError

log = logging.getLogger("epochgc.gc.spark.package")

ENVIRONMENT_ALIAS = "environment"
"""The folder name executors unpack the environment archive into."""

EXECUTOR_PYTHON = f"./{ENVIRONMENT_ALIAS}/bin/python"
"""``spark.pyspark.python`` / ``PYSPARK_PYTHON`` for shipped executors
(relative to the executor's working directory, where archives unpack)."""

ENVIRONMENT_PACKAGES = ("boto3", "pyarrow")
"""What the tasks import besides epochgc (and pyspark, which Spark ships)."""


class SparkPackageError(EpochGCError):
    """The executors' package could not be built (pip, venv-pack, disk)."""


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

    @property
    def archives_entry(self) -> str:
        """The ``--archives`` / ``spark.archives`` value."""
        return f"{self.environment}#{ENVIRONMENT_ALIAS}"

    def submit_command(self, master: str, driver_python: str, config: str) -> list[str]:
        """The ``spark-submit`` command line that runs the job with these
        files in client mode."""
        return [
            "spark-submit",
            "--master",
            master,
            *self.submit_flags(driver_python),
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


def default_package_dir() -> Path:
    """``$XDG_CACHE_HOME/epochgc/spark`` (``~/.cache/epochgc/spark``)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "epochgc" / "spark"


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
    """Build the code zip (always) and the environment (when missing, out
    of date, or asked to) into ``out_dir``.

    Raises:
        SparkPackageError: pip or venv-pack failed, or ``out_dir`` is not
            writable.
    """
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise SparkPackageError(f"cannot create {out_dir}: {err.strerror}") from err
    code = build_code_zip(out_dir)
    environment = out_dir / ENVIRONMENT_ARCHIVE
    stamp = out_dir / ENVIRONMENT_PINS
    pins = environment_pins()
    current = stamp.read_text().strip() if stamp.exists() else ""
    if rebuild_environment or not environment.exists() or current != pins:
        build_environment(environment)
        stamp.write_text(pins + "\n")
    return SparkPackage(code, environment, write_entry_script(out_dir))


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
    log.info("building the executors' environment %s (%s)", target.name, ", ".join(pins))
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
