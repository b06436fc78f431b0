"""The container images of deploy/containers/, built by ``make test-image``
(scripts/build_images.sh), run here the way docs/operating.md says to run
them: ``--version`` and ``demo`` in one container each; then the embedded
S3, a reconciler node and the GC daemon in three containers on one podman
network, with the configuration mounted at /etc/epochgc/config.toml, until
``gc status`` shows M advancing and the daemon has deleted the L0 objects;
then one more L0 object, which ``gc spark --mode listing`` from the Spark
image deletes from the same store.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from epochgc import __version__
from tests.image.conftest import Network, podman

# The README's quickstart configuration (config/local-server.toml: demo
# timings) pointed at the S3 container by name, with the metrics served on
# every interface as a container needs.
CONFIG = Path(__file__).resolve().parents[2] / "config" / "local-server.toml"
S3_PORT = 9000
METRICS_PORT = 9464


def container_config(s3_host: str) -> str:
    text = CONFIG.read_text()
    text = text.replace("http://127.0.0.1:9000", f"http://{s3_host}:{S3_PORT}")
    text = text.replace('listen = "127.0.0.1:0"', f'listen = "0.0.0.0:{METRICS_PORT}"')
    assert f"http://{s3_host}:" in text and "0.0.0.0" in text, "config/local-server.toml changed"
    return text


def inspect(image: str) -> dict[str, object]:
    (found,) = json.loads(podman("image", "inspect", image).stdout)
    config: dict[str, object] = found["Config"]
    return config


@pytest.mark.parametrize("which", ["image", "spark_image"])
def test_version_user_port_and_entrypoint(which: str, request: pytest.FixtureRequest) -> None:
    name = request.getfixturevalue(which)
    done = podman("run", "--rm", name, "--version")
    assert done.stdout.strip() == f"epochgc {__version__}"
    config = inspect(name)
    assert config["Entrypoint"] == ["epochgc"]
    assert config["User"] == "10001:10001"
    assert podman("run", "--rm", "--entrypoint", "id", name, "-u").stdout.strip() == "10001"
    if which == "image":
        assert "9464/tcp" in config.get("ExposedPorts", {})
    env = "\n".join(config.get("Env", []))
    assert not re.search(r"(?i)secret|access_key|AWS_", env), env


def test_demo_runs_in_the_base_image(image: str) -> None:
    done = podman("run", "--rm", image, "demo", "--duration", "8", timeout=240)
    print("\n".join(done.stdout.splitlines()[-5:]))
    assert "demo OK" in done.stdout


# About 90 s here; the default 300 s would be tight on a busy machine.
@pytest.mark.timeout(600)
def test_three_containers_collect_and_the_spark_image_sweeps(
    image: str, spark_image: str, network: Network
) -> None:
    s3_host = network.host("s3")
    (network.config_dir / "config.toml").write_text(container_config(s3_host))
    (network.config_dir / "config.toml").chmod(0o644)
    cfg = ["--config", network.config]

    s3 = network.start(
        "s3", image, ["embedded-s3", "--host", "0.0.0.0", "--port", str(S3_PORT), *cfg]
    )
    # The server answers a moment before its bucket exists; it prints this
    # line once it does (check-store --wait waits for an answer only).
    deadline = time.monotonic() + 60
    while "embedded S3 serving bucket" not in network.logs(s3):
        assert time.monotonic() < deadline, network.logs(s3)
        time.sleep(0.5)
    network.run(image, ["check-store", "--wait", "30", *cfg])
    network.run(image, ["topic", "create", "orders", "--partitions", "2", *cfg])
    for partition in ("0", "1"):
        done = network.run(image, ["produce", "orders", partition, "--count", "100", *cfg])
        assert "read back identically" in done.stdout, done.stdout
    reconciler = network.start(
        "reconciler",
        image,
        ["reconciler", "--node-id", "rec-1", *cfg],
        env=["EPOCHGC_EPOCH__TICKER=false"],
    )
    daemon = network.start("daemon", image, ["daemon", "--node-id", "gc-a", *cfg])

    def status() -> dict[str, object]:
        done = podman("exec", daemon, "epochgc", "gc", "status", "--json", *cfg, check=False)
        return json.loads(done.stdout) if done.returncode == 0 else {}

    def deleted() -> int:
        done = podman("exec", daemon, "epochgc", "gc", "runs", "--json", *cfg, check=False)
        if done.returncode != 0:
            return 0
        return sum(run["deleted"] for run in json.loads(done.stdout) if not run["dry_run"])

    seen_m: list[int] = []
    total = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        daemon_status = status().get("daemon") or {}
        assert isinstance(daemon_status, dict)
        if daemon_status.get("safe_epoch") is not None:
            m = int(daemon_status["safe_epoch"])
            if not seen_m or m != seen_m[-1]:
                seen_m.append(m)
        total = deleted()
        if len(seen_m) >= 3 and total >= 2:
            break
        time.sleep(2)
    print(f"M seen by gc status: {seen_m}; L0 objects deleted: {total}")
    if not (len(seen_m) >= 3 and total >= 2):
        pytest.fail(
            f"M {seen_m}, deleted {total}\n--- daemon\n{network.logs(daemon)[-3000:]}"
            f"\n--- reconciler\n{network.logs(reconciler)[-3000:]}"
        )
    assert seen_m == sorted(seen_m), f"M went back: {seen_m}"
    text = podman("exec", daemon, "epochgc", "gc", "status", *cfg).stdout
    print(text)
    assert re.search(r"^M:\s+\d+", text, re.MULTILINE), text

    # The daemon's /metrics from another container on the network: the
    # exposed port answers and counts the deletions.
    fetch = (
        "import urllib.request; "
        f"print(urllib.request.urlopen('http://{daemon}:{METRICS_PORT}/metrics').read().decode())"
    )
    metrics = podman(
        "run", "--rm", "--network", network.name, "--entrypoint", "python3", image, "-c", fetch
    ).stdout
    counted = [
        float(line.split()[-1])
        for line in metrics.splitlines()
        if line.startswith("epochgc_collector_objects_deleted_total")
    ]
    assert counted and sum(counted) >= 2, metrics[:2000]

    # The Spark image against the same store. The daemon has deleted what
    # was eligible, so first one more L0 object for the Spark job alone:
    # both processes stop (SIGTERM: they release their leases), one more
    # produce, the reconciler starts again, and the epoch ticks by hand (the
    # ticker was the daemon's) until M passes the new object.
    podman("stop", "--time", "60", daemon, timeout=120)
    podman("stop", "--time", "60", reconciler, timeout=120)
    network.run(image, ["produce", "orders", "0", "--count", "100", *cfg])
    written_by = json.loads(network.run(image, ["epoch", "show", "--json", *cfg]).stdout)
    podman("start", reconciler)
    deadline = time.monotonic() + 90
    while True:
        # In the reconciler's container: cheaper than a container each time.
        podman("exec", reconciler, "epochgc", "epoch", "tick", *cfg)
        info = json.loads(
            podman("exec", reconciler, "epochgc", "gc", "epoch-info", "--json", *cfg).stdout
        )
        if info["safe_epoch"] >= written_by["cluster_epoch"]:
            break
        assert time.monotonic() < deadline, (info, network.logs(reconciler)[-3000:])
        time.sleep(2)
    print(f"new L0 object written at epoch <= {written_by['cluster_epoch']}; M now {info}")
    # Spark in local mode, one core, little memory.
    done = network.run(
        spark_image,
        [
            "gc",
            "spark",
            "--mode",
            "listing",
            "--master",
            "local[1]",
            "--conf",
            "spark.driver.memory=512m",
            "--json",
            *cfg,
        ],
        timeout=300,
    )
    summary = json.loads(done.stdout)
    print(json.dumps(summary, indent=1))
    assert summary["success"] is True
    assert summary["engine"] == "spark-listing"
    assert summary["safe_epoch"] >= written_by["cluster_epoch"]
    assert (summary["deleted"], summary["errors"]) == (1, 0)
