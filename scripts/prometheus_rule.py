"""Writes deploy/kubernetes/prometheus-operator/prometheusrule.yaml from
dashboards/alerts.yml: the same rule groups, word for word, inside a
PrometheusRule for the Prometheus Operator. Run it after changing
alerts.yml (tests/unit/test_deploy_images.py fails until then):

    python scripts/prometheus_rule.py
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ALERTS = REPO / "dashboards" / "alerts.yml"
RULE = REPO / "deploy" / "kubernetes" / "prometheus-operator" / "prometheusrule.yaml"

HEADER = """\
# Written by scripts/prometheus_rule.py from dashboards/alerts.yml: the same
# rule groups, for a Prometheus run by the Prometheus Operator (its
# ruleSelector must match the labels below; `release: prometheus` is what
# the common Operator charts select by default). Do not edit the groups
# here: change alerts.yml and run the script again.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: epochgc
  namespace: epochgc
  labels:
    app.kubernetes.io/name: epochgc
    release: prometheus
spec:
"""


def render(alerts: str) -> str:
    """The PrometheusRule: alerts.yml from its ``groups:`` line on,
    indented under ``spec:`` (comments and quoting kept as written)."""
    lines = alerts.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("groups:"))
    body = "".join(f"  {line}\n" if line else "\n" for line in lines[start:])
    return HEADER + body


def main() -> None:
    RULE.write_text(render(ALERTS.read_text()))
    print(f"wrote {RULE.relative_to(REPO)}")


if __name__ == "__main__":
    main()
