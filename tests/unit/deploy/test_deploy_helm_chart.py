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
    pod_spec,
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
    # The bulk data plane on its declared port (the network policy admits the trainer there: test_deploy_helm_security).
    assert "--bulk-port 50052" in shard["command"][-1]
    assert {"name": "bulk", "containerPort": 50052} in shard["ports"]
    assert {"name": "bulk", "port": 50052, "targetPort": "bulk"} in svc["spec"]["ports"]
    # TLS on (the default): the image's probe, which speaks TLS, on the shard's port.
    assert shard["readinessProbe"]["exec"]["command"][3:7] == ["grpc", "127.0.0.1:50051", "--tls-ca",
                                                              f"{SECRETS_DIR}/tls/ca.crt"]
    # The demo dataset is generated with as many feature shards as there are shard pods.
    (init,) = sts["spec"]["template"]["spec"]["initContainers"]
    assert arg_after(init["command"], "--shards") == "4"
    # The trainer names every shard pod by its stable DNS name.
    trainer = container(docs[("Job", "rel-saintpipe-trainer")], "trainer")
    features = arg_after(trainer["args"], "--features").split(";")
    assert features == [f"rel-saintpipe-feature-shard-{k}.rel-saintpipe-feature-shard.ml.svc.cluster.local:50051"
                        for k in range(4)]


SECRETS_DIR = "/var/run/secrets/saintpipe"


def secret_files(doc: dict) -> dict[str, dict]:
    """File name -> {name, key} of the Secret behind it, from the pod's projected `secrets` volume."""
    volume = next(v for v in pod_spec(doc)["volumes"] if v["name"] == "secrets")
    assert volume["projected"]["defaultMode"] == 0o440
    return {item["path"]: {"name": source["secret"]["name"], "key": item["key"]}
            for source in volume["projected"]["sources"] for item in source["secret"]["items"]}


def assert_no_secret_in_env_or_argv(c: dict) -> None:
    for var in c.get("env", []):
        assert "secretKeyRef" not in var.get("valueFrom", {}), (c["name"], var)
    argv = " ".join(c.get("command", []) + c.get("args", []))
    assert "REDIS_PASSWORD)" not in argv and "--requirepass" not in argv and "--redis-url" not in argv, argv


def test_in_chart_redis_password_comes_from_the_chart_secret_as_a_file(default_docs):
    docs = by_kind_name(default_docs)
    secret = docs[("Secret", "rel-saintpipe-auth")]
    assert set(secret["data"]) == {"redis-password", "ray-token", "feature-token"}
    redis_set = docs[("StatefulSet", "rel-saintpipe-redis")]
    redis = container(redis_set, "redis")
    # redis-server reads its config, the password included, on stdin: not in argv, not in the environment.
    assert redis["command"][:2] == ["sh", "-c"] and "redis-server -" in redis["command"][2]
    assert f'requirepass "$(cat {SECRETS_DIR}/redis-password)"' in redis["command"][2]
    assert secret_files(redis_set) == {"redis-password": {"name": "rel-saintpipe-auth", "key": "redis-password"}}
    assert_no_secret_in_env_or_argv(redis)
    for name in ("rel-saintpipe-samplers", "rel-saintpipe-trainer"):
        doc = workload(default_docs, name)
        c = container(doc, name.removeprefix("rel-saintpipe-"))
        env = env_of(c)
        assert env["SAINTPIPE_REDIS_URL"]["value"] == "redis://rel-saintpipe-redis:6379/0"
        assert env["SAINTPIPE_REDIS_PASSWORD_FILE"]["value"] == f"{SECRETS_DIR}/redis-password"
        assert secret_files(doc)["redis-password"] == {"name": "rel-saintpipe-auth", "key": "redis-password"}
        assert {"name": "secrets", "mountPath": SECRETS_DIR, "readOnly": True} in c["volumeMounts"]
        assert_no_secret_in_env_or_argv(c)


def test_the_ray_token_is_a_file_on_every_ray_node(default_docs):
    for name, c_name in (("rel-saintpipe-ray-head", "ray-head"), ("rel-saintpipe-samplers", "samplers")):
        doc = workload(default_docs, name)
        c = container(doc, c_name)
        env = env_of(c)
        assert env["RAY_AUTH_MODE"]["value"] == "token" and "RAY_AUTH_TOKEN" not in env
        assert env["RAY_AUTH_TOKEN_PATH"]["value"] == f"{SECRETS_DIR}/ray-token"
        assert secret_files(doc)["ray-token"] == {"name": "rel-saintpipe-auth", "key": "ray-token"}
        assert_no_secret_in_env_or_argv(c)


def test_external_redis_uses_its_url_and_the_given_secret(custom_docs):
    docs = by_kind_name(custom_docs)
    assert ("StatefulSet", "rel-saintpipe-redis") not in docs
    assert "redis-password" not in docs[("Secret", "rel-saintpipe-auth")]["data"]
    for name, c_name in (("rel-saintpipe-samplers", "samplers"), ("rel-saintpipe-trainer", "trainer")):
        doc = workload(custom_docs, name)
        c = container(doc, c_name)
        env = env_of(c)
        assert secret_files(doc)["redis-password"] == {"name": "pool-redis", "key": "pw"}
        assert env["SAINTPIPE_REDIS_URL"]["value"] == "rediss://redis.example.internal:6380/2"
        assert arg_after(c["args"], "--job") == "products"
        assert_no_secret_in_env_or_argv(c)


def test_feature_shards_speak_tls_and_take_a_token_from_files(default_docs):
    docs = by_kind_name(default_docs)
    tls = docs[("Secret", "rel-saintpipe-feature-tls")]
    assert tls["type"] == "kubernetes.io/tls" and set(tls["data"]) == {"tls.crt", "tls.key", "ca.crt"}
    shard_set = docs[("StatefulSet", "rel-saintpipe-feature-shard")]
    shard = container(shard_set, "feature-shard")
    line = shard["command"][2]
    assert f"--token-file {SECRETS_DIR}/feature-token" in line
    assert f"--tls-cert {SECRETS_DIR}/tls/server.crt --tls-key {SECRETS_DIR}/tls/server.key" in line
    assert secret_files(shard_set) == {
        "feature-token": {"name": "rel-saintpipe-auth", "key": "feature-token"},
        "tls/ca.crt": {"name": "rel-saintpipe-feature-tls", "key": "ca.crt"},
        "tls/server.crt": {"name": "rel-saintpipe-feature-tls", "key": "tls.crt"},
        "tls/server.key": {"name": "rel-saintpipe-feature-tls", "key": "tls.key"},
    }
    trainer_job = docs[("Job", "rel-saintpipe-trainer")]
    trainer = container(trainer_job, "trainer")
    assert arg_after(trainer["args"], "--feature-token-file") == f"{SECRETS_DIR}/feature-token"
    assert arg_after(trainer["args"], "--feature-tls-ca") == f"{SECRETS_DIR}/tls/ca.crt"
    # The trainer gets the CA, never the shards' key.
    assert set(secret_files(trainer_job)) == {"redis-password", "feature-token", "tls/ca.crt"}
    # Nobody else holds the feature token.
    holders = {d["metadata"]["name"] for d in default_docs if d["kind"] in ("StatefulSet", "Deployment", "Job")
               and "feature-token" in secret_files(d) if any(v["name"] == "secrets" for v in pod_spec(d)["volumes"])}
    assert holders == {"rel-saintpipe-feature-shard", "rel-saintpipe-trainer"}


def test_feature_tls_can_come_from_an_existing_secret_or_be_off():
    docs = by_kind_name(manifests({"featureShards": {"tls": {"existingSecret": "shards-cert-manager"}}}))
    assert ("Secret", "rel-saintpipe-feature-tls") not in docs
    assert secret_files(docs[("Job", "rel-saintpipe-trainer")])["tls/ca.crt"]["name"] == "shards-cert-manager"
    docs = by_kind_name(manifests({"featureShards": {"tls": {"enabled": False}}}))
    shard = container(docs[("StatefulSet", "rel-saintpipe-feature-shard")], "feature-shard")
    assert "--tls-cert" not in shard["command"][2] and shard["readinessProbe"]["grpc"]["port"] == 50051
    assert "--feature-tls-ca" not in container(docs[("Job", "rel-saintpipe-trainer")], "trainer")["args"]


@pytest.mark.parametrize("values", [
    {"featureShards": {"auth": {"token": "change-me-feature-token"}}},
    {"redis": {"auth": {"password": "change-me-redis"}}},
    {"ray": {"auth": {"token": "change-me-ray-token"}}},
    {"redis": {"enabled": False, "external": {"url": "redis://h:6379/0", "auth": {"password": "CHANGE-ME"}}}},
])
def test_placeholder_secrets_are_refused(values):
    with pytest.raises(helm.HelmError, match="placeholder"):
        render(values)


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
        assert env["RAY_AUTH_TOKEN_PATH"]["value"] == f"{SECRETS_DIR}/ray-token"
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
