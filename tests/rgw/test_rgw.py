"""epochgc on a real Ceph RADOS Gateway (Debian's, release 16): the store
answers 412 to ``If-Match`` with the quoted ETag it returned and honours
the bare one; ``check-store`` finds that, every probe passes, and the
README's walkthrough (topic, produce, reconcile, collect) runs there as
written and deletes every L0 object it made."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from botocore.exceptions import ClientError

from epochgc.storage.client import make_s3_client
from tests.integration.test_quickstart import quickstart_lines
from tests.rgw.conftest import Gateway
from tests.support.cli import run_cli

CONFIG = "config/local-server.toml"


def cli(rgw: Gateway, line: str) -> subprocess.CompletedProcess[str]:
    words = line.split()
    assert words[0] == "epochgc", line
    done = run_cli(*words[1:], env=rgw.env())
    assert done.returncode == 0, f"`{line}` exited {done.returncode}:\n{done.stderr}"
    assert "Traceback" not in done.stderr, line
    return done


def test_the_gateway_rejects_the_quoted_etag_and_honours_the_bare_one(rgw: Gateway) -> None:
    """What the detection is for, seen with plain boto3."""
    s3 = make_s3_client(rgw.settings)
    etag = s3.put_object(Bucket=rgw.bucket, Key="k", Body=b"v1")["ETag"]
    with pytest.raises(ClientError) as refused:
        s3.put_object(Bucket=rgw.bucket, Key="k", Body=b"v2", IfMatch=etag)
    assert refused.value.response["Error"]["Code"] == "PreconditionFailed"
    s3.put_object(Bucket=rgw.bucket, Key="k", Body=b"v2", IfMatch=etag.strip('"'))
    with pytest.raises(ClientError):
        s3.put_object(Bucket=rgw.bucket, Key="k", Body=b"v3", IfMatch=etag.strip('"'))
    assert s3.get_object(Bucket=rgw.bucket, Key="k")["Body"].read() == b"v2"


def test_check_store_passes_every_probe_in_the_bare_form(rgw: Gateway) -> None:
    table = cli(rgw, f"epochgc check-store --config {CONFIG}").stdout
    print(table)  # `make test-rgw` shows it (-rP)
    assert "store OK" in table and table.count("PASS") == 6
    assert "If-Match form: bare" in table
    done = cli(rgw, f"epochgc check-store --json --config {CONFIG}")
    report = json.loads(done.stdout)
    assert report["ok"] is True, report
    assert report["if_match_form"] == "bare"
    assert len(report["probes"]) == 6 and all(p["passed"] for p in report["probes"])


def test_the_quickstart_walkthrough_runs_on_the_gateway(rgw: Gateway) -> None:
    lines = quickstart_lines()[1:]  # no embedded S3: the gateway is the store
    outputs = {line.split(" --config")[0]: cli(rgw, line) for line in lines}
    runs = outputs["epochgc gc runs"].stdout
    assert "dry-run" in runs, runs
    deleted = [int(n) for n in re.findall(r"local\s+\d+\s+(\d+)", runs)]
    assert max(deleted) > 0, f"the walkthrough deleted nothing:\n{runs}"
    s3 = make_s3_client(rgw.settings)
    left = s3.list_objects_v2(Bucket=rgw.bucket, Prefix="epochgc/l0/").get("KeyCount", 0)
    assert left == 0, f"{left} L0 objects left after gc collect"
