"""No environment variable weakens the rule ``M(p) = min_epoch_lower_bound -
1`` in a shipped command (issue 26, item 5).

``epochgc verify`` proves its power on a deliberately unsafe build that
publishes ``M(p) = max_applied_epoch - 1``. That build used to be switched
on by ``EPOCHGC_TEST_UNSAFE_REPORTS=max_applied`` in the environment, read
by the report writer of every process: one variable left over in a
deployment made every reconciler there publish an unsafe ``M(p)``, and the
collector delete live data. The unsafe rule is now chosen by verify's own
worker processes only (``epochgc/verify/worker.py``).
"""

from __future__ import annotations

import signal
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import PartitionId
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.partition.replica import PartitionReplica
from epochgc.watermarks.partition.state import PartitionState
from epochgc.watermarks.safe_epoch.reports import NodeReport, read_reports
from tests.support.cli import start_cli
from tests.support.config_files import write_server_config

ROOT = "epochgc"
OLD_SWITCH = {"EPOCHGC_TEST_UNSAFE_REPORTS": "max_applied"}


def test_a_reconciler_with_the_old_unsafe_switch_set_publishes_the_safe_m_of_p(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore
) -> None:
    controller = Controller(store, ROOT)
    topic = controller.create_topic("orders", 2)
    config = write_server_config(
        tmp_path / "node.toml",
        s3_server.endpoint_url,
        bucket,
        # No ticker: the test moves the epoch, so the partitions settle
        # between moves and their logs can be compared with the report.
        "[epoch]\nticker = false\n"
        "[reconciler]\nround_interval_seconds = 0.1\nidle_interval_seconds = 0.0\n"
        "[reports]\ninterval_seconds = 0.1\n",
    )
    command = ["reconciler", "--config", str(config), "--node-id", "recon-1", "--duration", "60"]
    proc = start_cli(*command, env=OLD_SWITCH)
    try:
        # Two epoch moves: after the second, each partition's log has
        # min_epoch_lower_bound = previous_applied_epoch = the first epoch,
        # and max_applied_epoch = the second, so the safe M(p) and the
        # unsafe max_applied_epoch - 1 differ.
        for _ in range(2):
            epoch = controller.tick()
            report, logged = _settled(store, proc, topic.partition_ids(), epoch)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
    assert len(report.partitions) == len(logged) == 2
    for entry in report.partitions:
        state = logged[entry.pid]
        assert state.min_epoch_lower_bound >= topic.revision + 1, "M(p) never moved"
        assert entry.max_applied_epoch - 1 > state.safe_epoch, "the two rules would agree"
        assert entry.safe_epoch == state.min_epoch_lower_bound - 1, (
            f"{entry.pid}: published M(p) {entry.safe_epoch}, the log's "
            f"min_epoch_lower_bound - 1 is {state.min_epoch_lower_bound - 1} "
            f"(max_applied_epoch - 1 is {entry.max_applied_epoch - 1})"
        )


def _settled(
    store: S3ObjectStore,
    proc: subprocess.Popen[str],
    pids: list[PartitionId],
    epoch: int,
) -> tuple[NodeReport, dict[PartitionId, PartitionState]]:
    """Wait until every partition's log has applied ``epoch`` and reconciled
    past it (nothing more will change it), then for a report of
    ``recon-1`` written after that moment; return the report and the logs'
    states. Nothing here looks at the published ``M(p)``."""
    deadline = time.monotonic() + 60
    settled_at: datetime | None = None
    logged: dict[PartitionId, PartitionState] = {}
    while True:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, f"the partitions never settled at epoch {epoch}"
        if settled_at is None:
            states = {pid: PartitionReplica(store, ROOT, pid).open() for pid in pids}
            if all(_is_settled(s, epoch) for s in states.values()):
                settled_at, logged = datetime.now(UTC), states
        else:
            reports, _ = read_reports(store, ROOT)
            for report in reports:
                if report.node == "recon-1" and report.generated_at > settled_at:
                    return report, logged
        time.sleep(0.1)


def _is_settled(state: PartitionState, epoch: int) -> bool:
    return state.max_applied_epoch == epoch and (
        state.min_epoch_lower_bound == state.previous_applied_epoch
    )
