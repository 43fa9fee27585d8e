"""The Helm chart, rendered by Helm's own engine (helm-python-sdk binds Helm's Go SDK).

Rendered for the default values and a non-default set (external Redis with an
auth Secret, GPU trainers, the ServiceMonitor, 4 feature shards); linted; every
manifest validated against the Kubernetes schemas (kubernetes-validate, strict:
unknown fields fail) for the oldest supported and the newest Kubernetes; the
ServiceMonitor, whose CRD schema kubernetes-validate lacks, checked by hand.
"""

from __future__ import annotations

import json

import helm_python as helm
import kubernetes_validate
import pytest

from tests.support.helm import (
    CHART,
    ROOT,
    arg_after,
    by_kind_name,
    container,
    env_of,
    manifests,
    render,
    workload,
)

KUBE_VERSIONS = ("1.27.0", "1.37.0")  # Chart.yaml's kubeVersion floor, and the newest schemas shipped

NON_DEFAULT = {
    "featureShards": {"replicas": 4},
    "redis": {"enabled": False,
              "external": {"url": "rediss://redis.example.internal:6380/2",
                           "auth": {"existingSecret": "pool-redis", "existingSecretKey": "pw"}}},
    "trainer": {"gpu": {"enabled": True, "count": 2}, "image": {"tag": "0.1.0-cuda"},
                "nodeSelector": {"accelerator": "nvidia-h100"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
    "samplers": {"workers": 8},
    "ray": {"workers": {"replicas": 2, "numCpus": 4}},
    "monitoring": {"serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}}},
    "nodeSelector": {"pool": "cpu"},
    "job": "products",
}


@pytest.fixture(scope="module")
def default_docs() -> list[dict]:
    return manifests()


@pytest.fixture(scope="module")
def custom_docs() -> list[dict]:
    return manifests(NON_DEFAULT)


def test_chart_lints_clean_for_default_and_non_default_values():
    for values in (None, NON_DEFAULT):
        report = helm.lint(str(CHART), values, strict=True)
        assert report["errors"] == [], report
        assert [m for m in report["messages"] if m["severity"] >= 2] == [], report


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("case", ["default", "non-default"])
def test_every_rendered_manifest_is_valid_kubernetes(case, kube_version, default_docs, custom_docs):
    docs = default_docs if case == "default" else custom_docs
    checked = 0
    for doc in docs:
        if doc["apiVersion"] == "monitoring.coreos.com/v1":
            continue  # a CRD: kubernetes-validate has no schema for it; see the ServiceMonitor test
        try:
            kubernetes_validate.validate(doc, kube_version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']} on Kubernetes {kube_version}: {exc}")
        checked += 1
    assert checked >= 10


def test_validation_has_teeth(default_docs):
    deployment = json.loads(json.dumps(next(d for d in default_docs if d["kind"] == "Deployment")))
    deployment["spec"]["template"]["spec"]["containers"][0]["resourcez"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBE_VERSIONS[-1], strict=True)


def test_default_release_has_every_component(default_docs):
    names = set(by_kind_name(default_docs))
    assert {
        ("Secret", "rel-saintpipe-auth"),
        ("StatefulSet", "rel-saintpipe-redis"), ("Service", "rel-saintpipe-redis"),
        ("StatefulSet", "rel-saintpipe-feature-shard"), ("Service", "rel-saintpipe-feature-shard"),
        ("Deployment", "rel-saintpipe-ray-head"), ("Service", "rel-saintpipe-ray-head"),
        ("Deployment", "rel-saintpipe-ray-worker"),
        ("Deployment", "rel-saintpipe-samplers"), ("Service", "rel-saintpipe-samplers"),
        ("Job", "rel-saintpipe-trainer"), ("Service", "rel-saintpipe-trainer"),
        ("ConfigMap", "rel-saintpipe-dashboard"),
    } <= names
    assert not any(kind == "ServiceMonitor" for kind, _ in names), "the ServiceMonitor is off by default"


def test_feature_shards_are_a_statefulset_behind_a_headless_service(custom_docs):
    docs = by_kind_name(custom_docs)
    sts = docs[("StatefulSet", "rel-saintpipe-feature-shard")]
    svc = docs[("Service", "rel-saintpipe-feature-shard")]
    assert sts["spec"]["replicas"] == 4 and sts["spec"]["serviceName"] == svc["metadata"]["name"]
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"].items() <= sts["spec"]["template"]["metadata"]["labels"].items()
    shard = container(sts, "feature-shard")
    assert '--shard "${HOSTNAME##*-}"' in shard["command"][-1], "the pod ordinal must select the shard"
    assert shard["readinessProbe"]["grpc"]["port"] == 50051
    # The demo dataset is generated with as many feature shards as there are shard pods.
    (init,) = sts["spec"]["template"]["spec"]["initContainers"]
    assert arg_after(init["command"], "--shards") == "4"
    # The trainer names every shard pod by its stable DNS name.
    trainer = container(docs[("Job", "rel-saintpipe-trainer")], "trainer")
    features = arg_after(trainer["args"], "--features").split(";")
    assert features == [f"rel-saintpipe-feature-shard-{k}.rel-saintpipe-feature-shard.ml.svc.cluster.local:50051"
                        for k in range(4)]


def test_in_chart_redis_password_comes_from_the_chart_secret(default_docs):
    docs = by_kind_name(default_docs)
    secret = docs[("Secret", "rel-saintpipe-auth")]
    assert set(secret["data"]) == {"redis-password", "ray-token"}
    redis = container(docs[("StatefulSet", "rel-saintpipe-redis")], "redis")
    assert redis["args"][:2] == ["--requirepass", "$(REDIS_PASSWORD)"]
    for name in ("rel-saintpipe-samplers", "rel-saintpipe-trainer"):
        env = env_of(container(workload(default_docs, name), name.removeprefix("rel-saintpipe-")))
        assert env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "rel-saintpipe-auth",
                                                                       "key": "redis-password"}
        assert env["SAINTPIPE_REDIS_URL"]["value"] == "redis://:$(REDIS_PASSWORD)@rel-saintpipe-redis:6379/0"
        # Kubernetes expands $(VAR) only from variables defined earlier in the list.
        names = list(env)
        assert names.index("REDIS_PASSWORD") < names.index("SAINTPIPE_REDIS_URL")


def test_external_redis_uses_its_url_and_the_given_secret(custom_docs):
    docs = by_kind_name(custom_docs)
    assert ("StatefulSet", "rel-saintpipe-redis") not in docs
    assert "redis-password" not in docs[("Secret", "rel-saintpipe-auth")]["data"]
    for name, c_name in (("rel-saintpipe-samplers", "samplers"), ("rel-saintpipe-trainer", "trainer")):
        c = container(workload(custom_docs, name), c_name)
        env = env_of(c)
        assert env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "pool-redis", "key": "pw"}
        assert env["SAINTPIPE_REDIS_URL"]["value"] == "rediss://:$(REDIS_PASSWORD)@redis.example.internal:6380/2"
        assert arg_after(c["args"], "--redis-url") == "$(SAINTPIPE_REDIS_URL)"
        assert arg_after(c["args"], "--job") == "products"


def test_bad_values_fail_with_a_message_naming_the_value():
    cases = [
        ({"redis": {"enabled": False}}, "redis.external.url"),
        ({"redis": {"enabled": False, "external": {"url": "redis://user:pw@host:6379/0"}}}, "without credentials"),
        ({"redis": {"enabled": False, "external": {"url": "redis://host:6379/0"}}}, "redis.external.auth"),
        ({"data": {"source": "s3"}}, "/data/source"),  # the schema's own message
        ({"data": {"source": "claim"}}, "data.claim.name"),
        ({"samplers": {"workers": 9}}, "samplers.workers=9"),
        ({"featureShards": {"replicas": 0}}, "/featureShards/replicas"),
    ]
    for values, message in cases:
        with pytest.raises(helm.HelmError, match=message.replace(".", r"\.")):
            render(values)


def test_gpu_trainers_request_gpus_and_run_the_trainer_image(default_docs, custom_docs):
    default_trainer = container(by_kind_name(default_docs)[("Job", "rel-saintpipe-trainer")], "trainer")
    assert "nvidia.com/gpu" not in default_trainer["resources"].get("limits", {})
    deployment = by_kind_name(custom_docs)[("Job", "rel-saintpipe-trainer")]
    trainer = container(deployment, "trainer")
    assert trainer["resources"]["limits"]["nvidia.com/gpu"] == 2
    assert trainer["resources"]["limits"]["memory"] == "8Gi", "the GPU limit adds to the configured limits"
    assert trainer["image"] == "saintpipe:0.1.0-cuda"
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"accelerator": "nvidia-h100"}, "a component's nodeSelector wins"
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    shards = by_kind_name(custom_docs)[("StatefulSet", "rel-saintpipe-feature-shard")]
    assert shards["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "cpu"}, "the global nodeSelector applies"


def test_ray_head_workers_and_sampler_driver(custom_docs):
    docs = by_kind_name(custom_docs)
    head = container(docs[("Deployment", "rel-saintpipe-ray-head")], "ray-head")
    assert head["command"][:3] == ["ray", "start", "--head"] and "--num-cpus=0" in head["command"]
    workers = docs[("Deployment", "rel-saintpipe-ray-worker")]
    assert workers["spec"]["replicas"] == 2
    assert "--num-cpus=4" in container(workers, "ray-worker")["command"]
    address = "rel-saintpipe-ray-head.ml.svc.cluster.local:6379"
    assert f"--address={address}" in container(workers, "ray-worker")["command"]
    samplers = container(docs[("Deployment", "rel-saintpipe-samplers")], "samplers")
    assert env_of(samplers)["RAY_HEAD_ADDRESS"]["value"] == address
    assert arg_after(samplers["args"], "--workers") == "8"
    for c in (head, container(workers, "ray-worker"), samplers):
        env = env_of(c)
        assert env["RAY_AUTH_MODE"]["value"] == "token"
        assert env["RAY_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "rel-saintpipe-auth"
        assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]


def test_service_monitor_scrapes_every_metrics_service(custom_docs):
    (monitor,) = [d for d in custom_docs if d["kind"] == "ServiceMonitor"]
    # kubernetes-validate has no CRD schemas: check the fields the Prometheus Operator requires.
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["name"] and monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    spec = monitor["spec"]
    assert set(spec) <= {"selector", "namespaceSelector", "endpoints", "jobLabel"}
    assert spec["namespaceSelector"] == {"matchNames": ["ml"]}
    assert spec["endpoints"] and all(set(e) <= {"port", "path", "interval", "scrapeTimeout", "honorLabels"}
                                     for e in spec["endpoints"])
    for endpoint in spec["endpoints"]:
        assert endpoint["interval"].endswith("s") and endpoint["scrapeTimeout"].endswith("s")
    selector = spec["selector"]["matchLabels"]
    selected = [d for d in custom_docs if d["kind"] == "Service"
                and selector.items() <= d["metadata"]["labels"].items()]
    assert {d["metadata"]["name"] for d in selected} == {
        "rel-saintpipe-feature-shard", "rel-saintpipe-samplers", "rel-saintpipe-trainer"}
    ports = {e["port"] for e in spec["endpoints"]}
    for service in selected:
        assert ports <= {p["name"] for p in service["spec"]["ports"]}, service["metadata"]["name"]


def test_metrics_ports_agree_with_the_commands(default_docs):
    for name, c_name in (("rel-saintpipe-samplers", "samplers"), ("rel-saintpipe-trainer", "trainer")):
        doc = workload(default_docs, name)
        c = container(doc, c_name)
        port = int(arg_after(c["args"], "--metrics-port"))
        assert {"name": "metrics", "containerPort": port} in c["ports"]
        assert doc["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == str(port)


def test_dashboard_configmap_carries_the_same_dashboard_as_compose(default_docs):
    deploy_json = (ROOT / "deploy" / "grafana" / "dashboards" / "saintpipe.json").read_text()
    chart_json = (CHART / "dashboards" / "saintpipe.json").read_text()
    assert chart_json == deploy_json, "copy deploy/grafana/dashboards/saintpipe.json into helm/saintpipe/dashboards/"
    configmap = by_kind_name(default_docs)[("ConfigMap", "rel-saintpipe-dashboard")]
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(configmap["data"]["saintpipe.json"]) == json.loads(deploy_json)


def test_notes_tell_the_user_what_to_do_next():
    notes = render(NON_DEFAULT)["saintpipe/templates/NOTES.txt"]
    assert "kubectl --namespace ml get pods -l app.kubernetes.io/instance=rel" in notes
    assert "logs -f job/rel-saintpipe-trainer" in notes
    assert "ServiceMonitor" in notes and "kube-prometheus-stack" in notes
    assert "4 feature shard(s)" in notes and "2 GPU(s) each" in notes
