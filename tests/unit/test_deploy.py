"""The worked deployment under deploy/ names real commands, keys and ports.

Nothing here needs systemd or a cluster: the unit files and manifests are
parsed, every ``epochgc`` command line they run goes through the real
argument parser, every ``EPOCHGC_*`` variable and config file through the
real ``load_config``, and the ports the probes and scrape jobs use are
compared with the ``metrics.listen`` each process ends up with. A renamed
flag, subcommand or key, or a port changed in one place only, fails here.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from epochgc.cli.main import build_parser
from epochgc.config import Config, load_config
from epochgc.metrics.server import parse_listen_address
from epochgc.storage.keys import is_valid_node_id

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
SYSTEMD = DEPLOY / "systemd"
K8S = DEPLOY / "kubernetes"

# The scrape job each long-running process kind is scraped under.
JOB_OF = {"daemon": "epochgc-daemon", "reconciler": "epochgc-reconciler"}
ENV_NAME = re.compile(r"\bEPOCHGC_[A-Z0-9_]+")
SECRET_PATTERNS = (
    re.compile(r"AKIA[0-9A-Z]{16}"),
    re.compile(r"(?i)secret_access_key|access_key_id"),
    re.compile(r"AWS_(SECRET_)?ACCESS_KEY"),
    re.compile(r"AWS_SESSION_TOKEN"),
)


# --- parsing -----------------------------------------------------------------


def parse_unit(path: Path) -> dict[str, list[tuple[str, str]]]:
    """A systemd unit file: section -> [(key, value)], repeated keys kept
    in order (Environment= and EnvironmentFile= repeat; configparser would
    keep only the last)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
            continue
        key, sep, value = line.partition("=")
        assert sep and current is not None, f"{path.name}:{number}: not a key=value line"
        assert not value.endswith("\\"), f"{path.name}:{number}: continuation lines unsupported"
        current.append((key.strip(), value.strip()))
    return sections


def unit_values(unit: dict[str, list[tuple[str, str]]], section: str, key: str) -> list[str]:
    return [v for k, v in unit.get(section, []) if k == key]


def unit_value(unit: dict[str, list[tuple[str, str]]], section: str, key: str) -> str:
    values = unit_values(unit, section, key)
    assert len(values) == 1, f"[{section}] {key}: expected one value, got {values}"
    return values[0]


def unit_environment(unit: dict[str, list[tuple[str, str]]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for assignment in unit_values(unit, "Service", "Environment"):
        for word in shlex.split(assignment):
            name, _, value = word.partition("=")
            env[name] = value
    return env


def parse_env_file(path: Path, commented: bool = False) -> dict[str, str]:
    """KEY=VALUE lines (systemd EnvironmentFile=); with ``commented``, the
    commented-out examples too (a documented override must be a real key)."""
    env: dict[str, str] = {}
    for line in path.read_text().splitlines():
        text = line.lstrip("# ").strip() if commented else line.strip()
        match = re.fullmatch(r"(EPOCHGC_[A-Z0-9_]+)=(\S*)", text)
        if match:
            env[match[1]] = match[2]
    return env


def units() -> dict[str, dict[str, list[tuple[str, str]]]]:
    return {
        p.name: parse_unit(p)
        for p in sorted(SYSTEMD.iterdir())
        if p.suffix in (".service", ".timer")
    }


def manifests() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                assert isinstance(doc, dict), f"{path.name}: a document is not a mapping"
                docs.append(doc)
    return docs


def objects(kind: str) -> list[dict[str, Any]]:
    return [d for d in manifests() if d.get("kind") == kind]


def one(kind: str, name: str) -> dict[str, Any]:
    found = [d for d in objects(kind) if d["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    spec = workload["spec"]
    if workload["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    template: dict[str, Any] = spec["template"]
    return template


def configmap_toml(tmp_path: Path) -> Path:
    data = one("ConfigMap", "epochgc-config")["data"]["config.toml"]
    path = tmp_path / "config.toml"
    path.write_text(data)
    return path


# --- the processes, from both kinds of deployment -----------------------------


@dataclass(frozen=True)
class Process:
    """One command line a deployment runs, with what it runs under."""

    where: str
    argv: list[str]
    env: dict[str, str]
    """EPOCHGC_* variables, plus the pod's own (POD_NAME)."""
    config: Path
    ports: dict[str, int]
    """Named container ports (Kubernetes) or {} (systemd)."""
    pod_env_sources: dict[str, str]
    """Variable -> downward API fieldPath, for Kubernetes."""

    @property
    def kind(self) -> str:
        return " ".join(self.argv[:2]) if self.argv[0] == "gc" else self.argv[0]

    def effective_config(self) -> Config:
        env = {k: v for k, v in self.env.items() if k.startswith("EPOCHGC_")}
        return load_config(self.config, env=env)


def systemd_processes() -> Iterator[Process]:
    fleet = parse_env_file(SYSTEMD / "epochgc.env.example")
    for name, unit in units().items():
        if not name.endswith(".service"):
            continue
        words = shlex.split(unit_value(unit, "Service", "ExecStart"))
        assert Path(words[0]).name == "epochgc", f"{name}: runs {words[0]}, not epochgc"
        # Every unit reads the fleet's file; the unit's own Environment= comes first and the
        # file wins (systemd's order), so the file must not set what the unit decides.
        files = unit_values(unit, "Service", "EnvironmentFile")
        assert "/etc/epochgc/epochgc.env" in files, f"{name}: does not read the fleet's env file"
        env = unit_environment(unit)
        assert not set(env) & set(fleet), (
            f"{name}: the env file would override {set(env) & set(fleet)}"
        )
        argv = words[1:]
        assert argv[argv.index("--config") + 1] == "/etc/epochgc/config.toml"
        yield Process(name, argv, {**env, **fleet}, SYSTEMD / "config.toml.example", {}, {})


def k8s_processes(config: Path) -> Iterator[Process]:
    for workload in [*objects("Deployment"), *objects("StatefulSet"), *objects("CronJob")]:
        for container in pod_spec(workload)["spec"]["containers"]:
            assert container["command"] == ["epochgc"], workload["metadata"]["name"]
            env, sources = {}, {}
            for var in container.get("env", []):
                if "value" in var:
                    env[var["name"]] = var["value"]
                else:
                    sources[var["name"]] = var["valueFrom"]["fieldRef"]["fieldPath"]
            argv = [_expand(a, sources) for a in container["args"]]
            assert argv[argv.index("--config") + 1] == "/etc/epochgc/config.toml"
            mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}
            volumes = {v["name"]: v for v in pod_spec(workload)["spec"]["volumes"]}
            config_volume = next(n for n, p in mounts.items() if p == "/etc/epochgc")
            assert volumes[config_volume]["configMap"]["name"] == "epochgc-config"
            ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
            yield Process(
                f"{workload['kind']}/{workload['metadata']['name']}",
                argv,
                env,
                config,
                ports,
                sources,
            )


def _expand(arg: str, sources: dict[str, str]) -> str:
    """Kubernetes' $(VAR) in args; a variable not defined is an error here
    (Kubernetes would pass the text through unchanged)."""

    def sub(match: re.Match[str]) -> str:
        assert match[1] in sources, f"$({match[1]}) is not defined in the container's env"
        return "{" + sources[match[1]] + "}"

    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", sub, arg)


def all_processes(tmp_path: Path) -> list[Process]:
    return [*systemd_processes(), *k8s_processes(configmap_toml(tmp_path))]


def node_id_arg(process: Process) -> str:
    assert "--node-id" in process.argv, f"{process.where}: no --node-id (default: host name)"
    return process.argv[process.argv.index("--node-id") + 1]


# --- the checks ----------------------------------------------------------------


def test_every_file_under_deploy_is_one_this_test_reads() -> None:
    known = {".service", ".timer", ".yaml", ".yml", ".example"}
    # The Containerfiles and the Prometheus Operator component are checked
    # in tests/unit/test_deploy_images.py.
    containerfiles = {
        DEPLOY / "containers" / "Containerfile",
        DEPLOY / "containers" / "Containerfile.spark",
    }
    for path in DEPLOY.rglob("*"):
        if path.is_file() and path not in containerfiles:
            assert path.suffix in known, f"{path.relative_to(REPO)} is not validated here"
    names = {p.name for p in K8S.glob("*.yaml")}
    listed = set(yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"])
    assert listed == names - {"kustomization.yaml"}


def test_every_command_line_parses_with_the_real_cli(tmp_path: Path) -> None:
    processes = all_processes(tmp_path)
    for process in processes:
        argv = [a.replace("%i", "node-1").replace("{metadata.name}", "pod-0") for a in process.argv]
        try:
            build_parser().parse_args(argv)
        except SystemExit:
            pytest.fail(f"{process.where}: `epochgc {' '.join(argv)}` does not parse")
    kinds = {(p.where.split("/")[0] if "/" in p.where else "systemd", p.kind) for p in processes}
    for deployment in ("systemd", "Deployment", "StatefulSet", "CronJob"):
        assert any(where == deployment for where, _ in kinds), deployment
    for kind in ("daemon", "reconciler", "gc spark"):
        assert ("systemd", kind) in kinds, f"systemd runs no {kind}"
        assert any(w != "systemd" and k == kind for w, k in kinds), f"Kubernetes runs no {kind}"


def test_every_environment_variable_and_config_file_loads(tmp_path: Path) -> None:
    names: set[str] = set()
    for path in DEPLOY.rglob("*"):
        if path.is_file():
            names |= set(ENV_NAME.findall(path.read_text()))
    assert names, "no EPOCHGC_* variable found"
    for name in sorted(names):
        # Each name on its own with a value its key accepts (ConfigError otherwise).
        values = parse_env_file(SYSTEMD / "epochgc.env.example", commented=True)
        for process in all_processes(tmp_path):
            values.update({k: v for k, v in process.env.items() if k.startswith("EPOCHGC_")})
        assert name in values, f"{name} appears without a value to check"
        load_config(None, env={name: values[name]})
    load_config(SYSTEMD / "config.toml.example", env={})
    load_config(configmap_toml(tmp_path), env={})
    for process in all_processes(tmp_path):
        process.effective_config()


def test_metrics_ports_probes_and_scrape_targets_agree(tmp_path: Path) -> None:
    services = {s["metadata"]["name"]: s for s in objects("Service")}
    for process in k8s_processes(configmap_toml(tmp_path)):
        if process.kind not in JOB_OF:
            continue
        _, port = parse_listen_address(process.effective_config().metrics.listen)
        assert process.ports == {"metrics": port}, process.where
        name = process.where.split("/")[1]
        workload = next(
            w
            for w in [*objects("Deployment"), *objects("StatefulSet")]
            if w["metadata"]["name"] == name
        )
        template = pod_spec(workload)
        (container,) = template["spec"]["containers"]
        ready = container["readinessProbe"]["httpGet"]
        assert ready["path"] == "/healthz", process.where
        assert process.ports.get(ready["port"], ready["port"]) == port, process.where
        # docs/operating.md, "Health": /healthz is for readiness, not for restarts.
        live = container["livenessProbe"]
        assert "httpGet" not in live or live["httpGet"]["path"] != "/healthz", process.where
        live_port = live["tcpSocket"]["port"]
        assert process.ports.get(live_port, live_port) == port, process.where
        assert template["metadata"]["annotations"]["prometheus.io/port"] == str(port)
        service = services[JOB_OF[process.kind]]
        assert service["spec"]["selector"] == template["metadata"]["labels"], process.where
        assert service["metadata"]["annotations"]["prometheus.io/port"] == str(port)
        (service_port,) = service["spec"]["ports"]
        assert service_port["port"] == port and service_port["name"] == "metrics"
        assert service_port["targetPort"] in ("metrics", port)

    scrape = yaml.safe_load((SYSTEMD / "prometheus-scrape.yml").read_text())
    targets = {
        job["job_name"]: [t for c in job["static_configs"] for t in c["targets"]]
        for job in scrape["scrape_configs"]
    }
    for process in systemd_processes():
        if process.kind not in JOB_OF:
            continue
        _, port = parse_listen_address(process.effective_config().metrics.listen)
        for target in targets[JOB_OF[process.kind]]:
            assert target.rpartition(":")[2] == str(port), f"{process.where}: {target}"


def test_scrape_job_names_are_the_ones_the_alerts_expect() -> None:
    alerts = (REPO / "dashboards" / "alerts.yml").read_text()
    expected = set(re.findall(r'job="([^"]+)"', alerts))
    assert expected == set(JOB_OF.values())
    systemd = yaml.safe_load((SYSTEMD / "prometheus-scrape.yml").read_text())
    assert {j["job_name"] for j in systemd["scrape_configs"]} == expected
    data = one("ConfigMap", "epochgc-prometheus-scrape")["data"]["scrape.yml"]
    jobs = yaml.safe_load(data)["scrape_configs"]
    assert {j["job_name"] for j in jobs} == expected
    for job in jobs:
        keep = next(r for r in job["relabel_configs"] if r["action"] == "keep")
        assert keep["regex"] == f"{job['job_name']};metrics", job["job_name"]
    services = {s["metadata"]["name"] for s in objects("Service")}
    assert expected <= services


def test_node_ids_are_stable_names_not_random(tmp_path: Path) -> None:
    for process in all_processes(tmp_path):
        if process.kind not in JOB_OF:
            continue
        node_id = node_id_arg(process)
        if process.where.endswith(".service"):
            assert process.where.endswith("@.service"), process.where
            assert node_id == "%i", f"{process.where}: --node-id {node_id}, not the instance"
            sample = "gc-a"
        else:
            assert node_id == "{metadata.name}", f"{process.where}: --node-id {node_id}"
            sample = "epochgc-reconciler-0"
        assert is_valid_node_id(sample)
        section = (
            "EPOCHGC_DAEMON__NODE_ID"
            if process.kind == "daemon"
            else ("EPOCHGC_RECONCILER__NODE_ID")
        )
        load_config(None, env={section: sample})
        if process.kind == "reconciler" and not process.where.endswith(".service"):
            # The id names the node's report: pod names must survive restarts.
            assert process.where.startswith("StatefulSet/"), process.where
    for text in (p.read_text() for p in DEPLOY.rglob("*") if p.is_file()):
        assert not re.search(r"RANDOM|uuidgen|%r\b|/proc/sys/kernel/random", text)


def test_two_daemons_n_reconcilers_and_the_spark_job_on_a_schedule(tmp_path: Path) -> None:
    daemons = one("Deployment", "epochgc-daemon")
    assert daemons["spec"]["replicas"] == 2
    pdb = one("PodDisruptionBudget", "epochgc-daemon")
    assert pdb["spec"]["selector"]["matchLabels"] == daemons["spec"]["selector"]["matchLabels"]
    assert pdb["spec"]["maxUnavailable"] == 1
    reconcilers = one("StatefulSet", "epochgc-reconciler")
    assert reconcilers["spec"]["replicas"] >= 2
    assert reconcilers["spec"]["serviceName"] == "epochgc-reconciler"
    cron = one("CronJob", "epochgc-gc-spark")
    assert len(cron["spec"]["schedule"].split()) == 5
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"

    timer = units()["epochgc-gc-spark.timer"]
    assert unit_value(timer, "Timer", "OnCalendar")
    assert unit_value(timer, "Timer", "Unit") in units()
    spark = units()[unit_value(timer, "Timer", "Unit")]
    assert unit_value(spark, "Service", "Type") == "oneshot"
    assert "gc spark" in unit_value(spark, "Service", "ExecStart")

    # The epoch must tick somewhere: the daemons hold the ticker here.
    for process in all_processes(tmp_path):
        if process.kind == "daemon":
            assert process.effective_config().epoch.ticker, process.where


def test_processes_stop_gracefully_and_run_unprivileged(tmp_path: Path) -> None:
    for process in all_processes(tmp_path):
        config = process.effective_config()
        # A delete batch or append in flight (one S3 attempt) plus a lease release.
        needed = config.store.read_timeout_seconds + config.lease.ttl_seconds
        if process.where.endswith(".service"):
            unit = units()[process.where]
            assert float(unit_value(unit, "Service", "TimeoutStopSec")) > needed
            assert unit_value(unit, "Service", "KillSignal") == "SIGTERM"
            assert unit_value(unit, "Service", "User") not in ("", "root")
            assert unit_value(unit, "Service", "NoNewPrivileges") == "true"
            assert unit_value(unit, "Service", "ProtectSystem") == "strict"
            if process.kind != "gc spark":
                assert unit_value(unit, "Service", "Restart") == "on-failure"
        else:
            kind, name = process.where.split("/")
            spec = pod_spec(one(kind, name))["spec"]
            assert spec["terminationGracePeriodSeconds"] > needed, process.where
            assert spec["securityContext"]["runAsNonRoot"] is True, process.where
            assert spec["serviceAccountName"] in {
                s["metadata"]["name"] for s in objects("ServiceAccount")
            }


def test_one_service_account_per_process_kind_with_its_own_role() -> None:
    accounts = {s["metadata"]["name"]: s for s in objects("ServiceAccount")}
    used = {}
    for kind, workload in (
        ("daemon", one("Deployment", "epochgc-daemon")),
        ("reconciler", one("StatefulSet", "epochgc-reconciler")),
        ("gc spark", one("CronJob", "epochgc-gc-spark")),
    ):
        used[kind] = pod_spec(workload)["spec"]["serviceAccountName"]
    assert len(set(used.values())) == 3, used
    roles = [
        accounts[a]["metadata"]["annotations"]["eks.amazonaws.com/role-arn"] for a in used.values()
    ]
    assert len(set(roles)) == 3, roles


def test_no_secret_values_anywhere(tmp_path: Path) -> None:
    assert not objects("Secret")
    for path in DEPLOY.rglob("*"):
        if path.is_file():
            text = path.read_text()
            for pattern in SECRET_PATTERNS:
                assert not pattern.search(text), f"{path.relative_to(REPO)}: {pattern.pattern}"
    for process in all_processes(tmp_path):
        store = process.effective_config().store
        assert (store.access_key_id, store.secret_access_key) == ("", ""), process.where


def test_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    """systemd's own reading: an unknown directive or a bad value is only a
    warning to systemd (the unit still starts, without it), so any output
    fails. The binary path is pointed at this venv's epochgc, which exists."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian package systemd)")
    epochgc = Path(sys.executable).parent / "epochgc"
    assert epochgc.exists()
    paths = []
    for name in units():
        text = (SYSTEMD / name).read_text().replace("/opt/epochgc/venv/bin/epochgc", str(epochgc))
        path = tmp_path / name.replace("@.", "@node-1.")
        path.write_text(text)
        paths.append(str(path))
    done = subprocess.run(
        [analyze, "verify", "--man=no", *paths],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


def test_the_hosts_scrape_config_passes_promtool() -> None:
    """Debian's promtool is built without Kubernetes service discovery
    (``field kubernetes_sd_configs not found``), so only the hosts' static
    config is checked here; the Kubernetes snippet's jobs and keep rules
    are checked above."""
    promtool = shutil.which("promtool")
    assert promtool is not None, "promtool is not installed: run `make servers`"
    path = SYSTEMD / "prometheus-scrape.yml"
    done = subprocess.run(
        [promtool, "check", "config", str(path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
