"""The container images and the Prometheus Operator objects under deploy/
agree with the rest of the deployment.

Nothing here builds or runs an image (``make test-image`` does): the
Containerfiles are read as text, the manifests and alerts as YAML. The
PrometheusRule must carry exactly the rule groups of dashboards/alerts.yml
(scripts/prometheus_rule.py writes it), the ServiceMonitor must select the
Services the alerts' scrape jobs are named after, and the images the
manifests name must be the ones the Containerfiles build: the same user,
port and entrypoint, the version of this package.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from epochgc import __version__
from tests.unit.test_deploy import JOB_OF, K8S, REPO, objects, one, pod_spec

CONTAINERS = REPO / "deploy" / "containers"
OPERATOR = K8S / "prometheus-operator"
ALERTS = REPO / "dashboards" / "alerts.yml"
IMAGE_OF = {
    "Deployment/epochgc-daemon": "epochgc",
    "StatefulSet/epochgc-reconciler": "epochgc",
    "CronJob/epochgc-gc-spark": "epochgc-spark",
}
CONTAINERFILE_OF = {"epochgc": "Containerfile", "epochgc-spark": "Containerfile.spark"}


def operator_object(kind: str) -> dict[str, Any]:
    found = [
        doc
        for path in sorted(OPERATOR.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc and doc.get("kind") == kind
    ]
    assert len(found) == 1, f"expected one {kind} under {OPERATOR.relative_to(REPO)}"
    return found[0]


def instructions(name: str) -> list[tuple[str, str]]:
    """A Containerfile's instructions, (KEYWORD, arguments), continuation
    lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", (CONTAINERS / name).read_text())
    found = []
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), " ".join(rest.split())))
    return found


def workloads() -> list[dict[str, Any]]:
    return [*objects("Deployment"), *objects("StatefulSet"), *objects("CronJob")]


def test_the_prometheus_rule_is_exactly_the_alerts_file() -> None:
    rule = operator_object("PrometheusRule")
    alerts = yaml.safe_load(ALERTS.read_text())
    assert rule["spec"]["groups"] == alerts["groups"], (
        "the PrometheusRule differs from dashboards/alerts.yml: "
        "run `python scripts/prometheus_rule.py`"
    )
    assert rule["metadata"]["namespace"] == "epochgc"


def test_the_service_monitor_scrapes_the_jobs_the_alerts_expect() -> None:
    monitor = operator_object("ServiceMonitor")
    spec = monitor["spec"]
    assert spec["namespaceSelector"]["matchNames"] == ["epochgc"]
    (selector,) = spec["selector"]["matchExpressions"]
    assert selector["operator"] == "In"
    selected = {
        s["metadata"]["name"]
        for s in objects("Service")
        if s["metadata"]["labels"].get(selector["key"]) in selector["values"]
    }
    # The Operator names the job after the Service: these are the alerts' jobs.
    assert selected == set(JOB_OF.values())
    alerts = ALERTS.read_text()
    assert set(re.findall(r'job="([^"]+)"', alerts)) == selected
    (endpoint,) = spec["endpoints"]
    for name in selected:
        (port,) = one("Service", name)["spec"]["ports"]
        assert endpoint["port"] == port["name"] == "metrics", name
    assert endpoint["path"] == "/metrics"
    assert "jobLabel" not in spec  # a jobLabel would rename the jobs


def test_the_operator_objects_are_an_optional_component() -> None:
    """The base must apply on a cluster without the Operator's CRDs."""
    base = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert "prometheus-operator" not in base.get("components", [])
    component = yaml.safe_load((OPERATOR / "kustomization.yaml").read_text())
    assert component["kind"] == "Component"
    names = {p.name for p in OPERATOR.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(component["resources"]) == names


def test_the_containerfiles_take_the_base_image_as_an_argument() -> None:
    for name in CONTAINERFILE_OF.values():
        steps = instructions(name)
        assert steps[0][0] == "ARG" and steps[0][1].startswith("BASE_IMAGE"), name
        froms = [args for keyword, args in steps if keyword == "FROM"]
        assert froms and all(f.split()[0] == "${BASE_IMAGE}" for f in froms), name
        # Wheels from the build context only: no package index in the build.
        installs = [a for k, a in steps if k == "RUN" and "pip install" in a]
        assert installs and all("--no-index" in a for a in installs), name


def test_the_images_run_as_the_pods_user_with_the_manifests_entrypoint() -> None:
    for where, image in IMAGE_OF.items():
        kind, name = where.split("/")
        pod = pod_spec(one(kind, name))["spec"]
        steps = dict(instructions(CONTAINERFILE_OF[image]))
        context = pod["securityContext"]
        assert steps["USER"] == f"{context['runAsUser']}:{context['runAsGroup']}", where
        (container,) = pod["containers"]
        assert steps["ENTRYPOINT"] == '["epochgc"]'
        assert container["command"] == ["epochgc"], where
        for port in container.get("ports", []):
            assert steps.get("EXPOSE") == str(port["containerPort"]), where
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        assert "/etc/epochgc" in mounts, where
        assert "/etc/epochgc/config.toml" in (CONTAINERS / CONTAINERFILE_OF[image]).read_text()


def test_the_manifests_name_the_images_at_this_version() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    overrides = {i["name"]: i for i in kustomization["images"]}
    named = set()
    for workload in workloads():
        where = f"{workload['kind']}/{workload['metadata']['name']}"
        (container,) = pod_spec(workload)["spec"]["containers"]
        repository, _, tag = container["image"].rpartition(":")
        assert repository.rsplit("/", 1)[-1] == IMAGE_OF[where], where
        assert tag == __version__, f"{where}: tag {tag}, version {__version__}"
        assert overrides[repository]["newTag"] == __version__, repository
        named.add(repository)
    assert set(overrides) == named
    for text in (p.read_text() for p in K8S.rglob("*.yaml")):
        assert ":latest" not in text
