"""The Kubernetes manifests in deploy/kubernetes, rendered with example.env: valid against
the Kubernetes schemas (kubernetes-validate, strict: an unknown field fails) and the CRD
schemas of KEDA and the Prometheus Operator (tests/contracts/crds), consistent with each
other, and with a command line and environment that ``laneway run`` accepts."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from checkout import ROOT

from laneway.control.backlog import Backlog
from laneway.metrics import DEFINITIONS

MANIFESTS = ROOT / "deploy" / "kubernetes"
CRDS = Path(__file__).resolve().parent / "crds"
KUBERNETES_VERSIONS = ("1.30", kubernetes_validate.latest_version())
"""The oldest Kubernetes still commonly run that has every field used, and the newest."""
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_KUBELET_VARIABLE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
FILES = sorted(path.name for path in MANIFESTS.glob("*.yaml") if "-values" not in path.name)
"""The manifests (not the Helm values of prometheus-adapter-values.yaml)."""

CRD_SCHEMAS = {
    ("keda.sh/v1alpha1", "ScaledObject"): "keda.sh-v1alpha1-scaledobject-keda-v2.20.2.json",
    ("monitoring.coreos.com/v1", "PodMonitor"): (
        "monitoring.coreos.com-v1-podmonitor-prometheus-operator-v0.93.0.json"
    ),
}
SCALER_PARAMETERS = {
    # name: (required, optional), from the `keda:"name=..."` tags of KEDA v2.20.2's
    # pkg/scalers/metrics_api_scaler.go and prometheus_scaler.go (triggerMetadata only).
    "metrics-api": (
        {"url", "valueLocation"},
        {"targetValue", "activationTargetValue", "format", "unsafeSsl", "timeout",
         "aggregateFromKubeServiceEndpoints", "aggregationType", "authMode", "method",
         "keyParamName", "apiKey"},
    ),
    "prometheus": (
        {"serverAddress", "query", "threshold"},
        {"queryParameters", "activationThreshold", "namespace", "customHeaders",
         "ignoreNullValues", "unsafeSsl", "awsRegion", "timeout", "identityOwner", "authModes"},
    ),
}  # fmt: skip
NUMBERS = {"targetValue", "activationTargetValue", "threshold", "activationThreshold"}
BOOLEANS = {"aggregateFromKubeServiceEndpoints", "ignoreNullValues", "unsafeSsl"}
ENUMS = {"aggregationType": {"average", "sum", "max", "min"}, "format": {"json"}}


def example_values() -> dict[str, str]:
    values = {}
    for line in (MANIFESTS / "example.env").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, value = line.partition("=")
            values[name] = value
    return values


def render(text: str, values: dict[str, str]) -> str:
    """``${NAME}`` replaced as envsubst does, each name required to have a value."""

    def value(found: re.Match[str]) -> str:
        assert found.group(1) in values, f"${{{found.group(1)}}} has no value in example.env"
        return values[found.group(1)]

    return _VARIABLE.sub(value, text)


@cache
def documents(name: str) -> list[dict[str, Any]]:
    rendered = render((MANIFESTS / name).read_text(), example_values())
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


def every_document() -> list[tuple[str, dict[str, Any]]]:
    return [(name, doc) for name in FILES for doc in documents(name)]


def find(kind: str, name: str | None = None) -> dict[str, Any]:
    """The one manifest of ``kind`` (in the file ``name``, or in all of them)."""
    docs = documents(name) if name else [doc for _, doc in every_document()]
    found = [doc for doc in docs if doc["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind} manifests"
    return found[0]


def test_the_manifests_use_exactly_the_example_values() -> None:
    values = example_values()
    used = {v for name in FILES for v in _VARIABLE.findall((MANIFESTS / name).read_text())}
    assert used == set(values), (used - set(values), set(values) - used)
    for name in FILES:
        assert "${" not in render((MANIFESTS / name).read_text(), values)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("name", FILES)
def test_each_manifest_is_valid_against_its_schema(name: str, version: str) -> None:
    for doc in documents(name):
        crd = CRD_SCHEMAS.get((doc["apiVersion"], doc["kind"]))
        if crd is None:
            kubernetes_validate.validate(doc, version, strict=True)
        else:
            jsonschema.validate(doc, strict_schema(crd))


@cache
def strict_schema(name: str) -> dict[str, Any]:
    """A CRD's OpenAPI schema that refuses unknown fields, as ``kubectl apply
    --validate=strict`` does (the API server prunes them otherwise)."""
    schema = copy.deepcopy(json.loads((CRDS / name).read_text()))

    def close(node: Any) -> None:
        if isinstance(node, dict):
            preserved = node.get("x-kubernetes-preserve-unknown-fields")
            if "properties" in node and "additionalProperties" not in node and not preserved:
                node["additionalProperties"] = False
            for child in node.values():
                close(child)
        elif isinstance(node, list):
            for child in node:
                close(child)

    close(schema)
    # The CRD schema leaves apiVersion, kind and metadata to the API server.
    schema["properties"]["metadata"] = {"type": "object", "required": ["name", "namespace"]}
    return schema


def test_a_misspelt_field_fails_validation() -> None:
    deployment = copy.deepcopy(find("Deployment"))
    deployment["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSIONS[0], strict=True)
    scaled = copy.deepcopy(documents("keda-prometheus.yaml")[0])
    scaled["spec"]["maxReplicas"] = 3
    keda = strict_schema(CRD_SCHEMAS[("keda.sh/v1alpha1", "ScaledObject")])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(scaled, keda)


def container(workload: dict[str, Any]) -> dict[str, Any]:
    [only] = workload["spec"]["template"]["spec"]["containers"]
    return only


@pytest.mark.parametrize("name", ["deployment.yaml", "statefulset.yaml"])
def test_probes_ports_and_selectors_fit_together(name: str) -> None:
    workload = find(documents(name)[0]["kind"], name)
    labels = workload["spec"]["template"]["metadata"]["labels"]
    assert workload["spec"]["selector"]["matchLabels"].items() <= labels.items()
    worker = container(workload)
    ports = {port["name"]: port["containerPort"] for port in worker["ports"]}
    args = worker["args"]
    assert f"--health-port={ports['health']}" in args
    assert f"--metrics-port={ports['metrics']}" in args
    assert "--health-address=0.0.0.0" in args and "--metrics-address=0.0.0.0" in args
    assert worker["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "health"}
    assert worker["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    drain = next(e["value"] for e in worker["env"] if e["name"] == "LANEWAY_DRAIN_TIMEOUT")
    assert workload["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > float(drain)
    service = find("Service")
    assert service["spec"]["selector"].items() <= labels.items()
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= set(ports)
    assert service["spec"]["publishNotReadyAddresses"] is True
    monitor = find("PodMonitor")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert [e["port"] for e in monitor["spec"]["podMetricsEndpoints"]] == ["metrics"]


def check_trigger(trigger: dict[str, Any]) -> None:
    """What KEDA v2.20.2 checks of a trigger's metadata (the CRD leaves it a map of
    strings): known parameters, the required ones, numbers, booleans, choices."""
    required, optional = SCALER_PARAMETERS[trigger["type"]]
    metadata = trigger["metadata"]
    assert required <= set(metadata), required - set(metadata)
    assert set(metadata) <= required | optional, set(metadata) - required - optional
    for key, value in metadata.items():
        assert isinstance(value, str), f"{key}: KEDA takes strings only"
        if key in NUMBERS:
            assert float(value) >= 0
        if key in BOOLEANS:
            assert value in ("true", "false")
        if key in ENUMS:
            assert value in ENUMS[key]
    assert trigger["metricType"] in ("AverageValue", "Value")


@pytest.mark.parametrize("name", ["keda-prometheus.yaml", "keda-metrics-api.yaml"])
def test_the_scaled_objects_scale_the_workers_up_to_the_partition_count(name: str) -> None:
    [scaled] = documents(name)
    values = example_values()
    assert scaled["spec"]["scaleTargetRef"] == {"name": find("Deployment")["metadata"]["name"]}
    assert scaled["spec"]["maxReplicaCount"] == int(values["PARTITIONS"])
    [trigger] = scaled["spec"]["triggers"]
    check_trigger(trigger)


def test_the_metrics_api_trigger_reads_each_members_backlog() -> None:
    [trigger] = documents("keda-metrics-api.yaml")[0]["spec"]["triggers"]
    metadata = trigger["metadata"]
    service = find("Service")
    url = (
        f"http://{service['metadata']['name']}.{service['metadata']['namespace']}"
        f".svc.cluster.local:{container(find('Deployment'))['ports'][0]['containerPort']}"
        "/backlog"
    )
    assert metadata["url"] == url
    assert (metadata["aggregateFromKubeServiceEndpoints"], metadata["aggregationType"]) == (
        "true",
        "sum",
    )
    # valueLocation (a GJSON path) names a number in every /backlog of an offset group.
    assert isinstance(Backlog(3, 10, 1.0, 3.0).as_json()[metadata["valueLocation"]], int)


def test_the_prometheus_queries_select_defined_metrics_of_the_groups_members() -> None:
    name = example_values()["NAME"]
    [trigger] = documents("keda-prometheus.yaml")[0]["spec"]["triggers"]
    query = trigger["metadata"]["query"]
    values = yaml.safe_load((MANIFESTS / "prometheus-adapter-values.yaml").read_text())
    assert set(values) == {"rules"} and set(values["rules"]) == {"external"}, "merged, not all"
    [rule] = values["rules"]["external"]
    for text in (query, rule["seriesQuery"]):
        assert {m.value for m in DEFINITIONS} >= set(re.findall(r"laneway_[a-z_]+", text))
        assert "laneway_backlog_messages" in text and "app_kubernetes_io_name" in text
    assert f'app_kubernetes_io_name="{name}"' in query
    # The PodMonitor puts that label on the series; the HPA asks the adapter for it.
    assert find("PodMonitor")["spec"]["podTargetLabels"] == ["app.kubernetes.io/name"]
    hpa = find("HorizontalPodAutoscaler")
    [metric] = hpa["spec"]["metrics"]
    assert metric["external"]["metric"]["name"] == rule["name"]["as"]
    assert metric["external"]["metric"]["selector"]["matchLabels"] == {
        "app_kubernetes_io_name": name
    }
    assert set(rule) == {"seriesQuery", "resources", "name", "metricsQuery"}
    assert rule["resources"] == {"overrides": {"namespace": {"resource": "namespace"}}}
    for placeholder in ("<<.Series>>", "<<.LabelMatchers>>", "<<.GroupBy>>"):
        assert placeholder in rule["metricsQuery"]
    assert hpa["spec"]["scaleTargetRef"]["name"] == find("Deployment")["metadata"]["name"]


def kubelet_environment(worker: dict[str, Any], pod: str, files: Path) -> dict[str, str]:
    """The container's environment as the kubelet builds it: ``$(NAME)`` of a variable
    defined above, the pod name from the downward API; the Secret's files under
    ``files``."""
    environment: dict[str, str] = {}
    for entry in worker["env"]:
        if "valueFrom" in entry:
            assert entry["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
            environment[entry["name"]] = pod
            continue
        value = _KUBELET_VARIABLE.sub(lambda m: environment[m.group(1)], entry["value"])
        environment[entry["name"]] = value.replace("/etc/laneway/kafka", str(files))
    return environment


@pytest.mark.parametrize("name", ["deployment.yaml", "statefulset.yaml"])
def test_laneway_run_accepts_the_workers_command_line(name: str, tmp_path: Path) -> None:
    worker = container(documents(name)[0])
    (tmp_path / "password").write_text("s3cret-from-the-secret\n")
    (tmp_path / "ca.crt").write_text("")
    pod = f"{example_values()['NAME']}-0"
    environment = kubelet_environment(worker, pod, tmp_path)
    assert worker["command"] == ["laneway"]
    shown = subprocess.run(
        [sys.executable, "-m", "laneway", *worker["args"], "--print-config"],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **environment},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    settings = {}
    for line in shown.stdout.splitlines():  # name, value (repr), (origin)
        setting, value, origin = re.fullmatch(r"(\S+)\s+(.*?)\s+\((.+)\)", line).groups()
        settings[setting] = (value.strip("'"), origin)
    assert settings["health_address"] == settings["metrics_address"] == ("0.0.0.0", "flag")
    assert settings["kafka.sasl.password"] == ("***", "env file")
    assert settings["kafka.security.protocol"] == ("SASL_SSL", "env")
    assert "s3cret" not in shown.stdout
    if name == "statefulset.yaml":
        assert settings["kafka.group.instance.id"] == (pod, "env")
        group = example_values()["GROUP"]
        assert settings["transactional_id"] == (f"laneway-{group}-{pod}", "env")
        assert settings["exactly_once"] == ("True", "flag")


def test_the_deployment_leaves_its_replica_count_to_the_autoscalers() -> None:
    deployment = find("Deployment")
    assert "replicas" not in deployment["spec"]
    name = deployment["metadata"]["name"]
    for scaler in ("keda-prometheus.yaml", "keda-metrics-api.yaml", "hpa.yaml"):
        assert documents(scaler)[0]["spec"]["scaleTargetRef"]["name"] == name
