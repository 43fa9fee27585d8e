"""The chart's sweep: a Job running `saintpipe sweep` against the release's own Redis, feature shards and
samplers in the trainer Job's place (``sweep.enabled``), its sweep file from values in a ConfigMap.

The security checks (restricted pod security, read-only root, no API token, requests and limits, NetworkPolicy
coverage, checkov) run over the sweep's render too (test_deploy_helm_security.py, case ``sweep``); the sweep on
running services itself is run for real in tests/integration/sweep/ and the compose test.
"""

from __future__ import annotations

from pathlib import Path

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

from tests.support.helm import arg_after, by_kind_name, container, env_of, manifests, pod_spec, workload
from tests.support.network_policy import Pod, admitted

SWEEP = {"sweep": {"enabled": True}}
FILE = """[trainer]
epochs = 3

[sweep]
trials = 3
concurrent = 3
scheduler = "none"

[sweep.space]
"model.lr" = {loguniform = [0.001, 0.1]}
"""


def _names(docs: list[dict]) -> set[tuple[str, str]]:
    return set(by_kind_name(docs))


def test_off_by_default_and_in_the_trainer_job_s_place_when_on():
    default = _names(manifests())
    assert ("Job", "rel-saintpipe-trainer") in default
    assert not {n for n in default if n[1] == "rel-saintpipe-sweep"}
    swept = _names(manifests(SWEEP))
    assert {("Job", "rel-saintpipe-sweep"), ("ConfigMap", "rel-saintpipe-sweep"),
            ("NetworkPolicy", "rel-saintpipe-sweep")} <= swept
    # Both would read the job's stream: the trainer Job (and its Service) go, its checkpoint claim stays.
    assert not {n for n in swept if n[1] == "rel-saintpipe-trainer" and n[0] in ("Job", "Service")}
    assert ("PersistentVolumeClaim", "rel-saintpipe-checkpoints") in swept
    # Everything else is the release as it was.
    assert default - swept == {("Job", "rel-saintpipe-trainer"), ("Service", "rel-saintpipe-trainer")}


@pytest.mark.parametrize("kube_version", ("1.27.0", "1.37.0"))
def test_the_sweep_s_manifests_are_valid_kubernetes(kube_version):
    docs = [d for d in manifests(SWEEP) if d["metadata"]["name"] == "rel-saintpipe-sweep"]
    assert {d["kind"] for d in docs} == {"Job", "ConfigMap", "NetworkPolicy"}
    for doc in docs:
        kubernetes_validate.validate(doc, kube_version, strict=True)


@pytest.mark.parametrize("tls", [True, False])
def test_the_sweep_reaches_the_release_as_the_trainer_does(tls):
    values = {"featureShards": {"tls": {"enabled": tls}}}
    trainer = container(workload(manifests(values), "rel-saintpipe-trainer"), "trainer")
    docs = manifests({**values, **SWEEP})
    job = workload(docs, "rel-saintpipe-sweep")
    sweep = container(job, "sweep")
    args = sweep["args"]
    assert args[:2] == ["saintpipe", "sweep"] and arg_after(args, "--config") == "/etc/saintpipe/sweep.toml"
    for flag in ("--features", "--feature-token-file", "--data", "--job"):
        assert arg_after(args, flag) == arg_after(trainer["args"], flag), flag
    assert ("--feature-tls-ca" in args) == tls == ("--feature-tls-ca" in trainer["args"])
    if tls:
        assert arg_after(args, "--feature-tls-ca") == arg_after(trainer["args"], "--feature-tls-ca")
    env, trained = env_of(sweep), env_of(trainer)
    for name in ("SAINTPIPE_REDIS_URL", "SAINTPIPE_REDIS_PASSWORD_FILE", "HOME"):
        assert env[name] == trained[name], name
    assert env["SAINTPIPE_HOME"]["value"] == "/runs"  # the sweep directories: /runs/sweeps/<time>-<job>
    assert "RAY_AUTH_TOKEN_PATH" not in env  # its Ray is its own, local
    # The same image, security context and secret files as the trainer: no secret in args or env values.
    assert sweep["image"] == trainer["image"] and sweep["securityContext"] == trainer["securityContext"]
    spec, trainer_spec = pod_spec(job), pod_spec(workload(manifests(values), "rel-saintpipe-trainer"))
    volumes = {v["name"]: v for v in spec["volumes"]}
    trainer_volumes = {v["name"]: v for v in trainer_spec["volumes"]}
    assert volumes["secrets"] == trainer_volumes["secrets"]
    for key in ("securityContext", "serviceAccountName", "automountServiceAccountToken"):
        assert spec[key] == trainer_spec[key], key
    assert spec["restartPolicy"] == "Never" and job["spec"]["backoffLimit"] == 0
    # Its results go to the trainer's checkpoint volume; its sweep file is the ConfigMap's; Ray gets a /dev/shm.
    mounts = {m["mountPath"]: m["name"] for m in sweep["volumeMounts"]}
    assert volumes[mounts["/runs"]]["persistentVolumeClaim"] == {"claimName": "rel-saintpipe-checkpoints"}
    assert volumes[mounts["/etc/saintpipe"]]["configMap"] == {"name": "rel-saintpipe-sweep"}
    assert volumes[mounts["/dev/shm"]]["emptyDir"]["medium"] == "Memory"


def test_the_sweep_file_comes_from_values_and_parses_as_the_command_reads_it(tmp_path):
    from saintpipe.sweep.config import check_space, expand
    from saintpipe.sweep.driver import load_sweep

    for file, trials in ((None, 4), (FILE, 3)):
        values = {"sweep": {"enabled": True, **({"file": file} if file else {})}}
        docs = manifests(values)
        text = by_kind_name(docs)[("ConfigMap", "rel-saintpipe-sweep")]["data"]["sweep.toml"]
        if file:
            assert text == file
        job = workload(docs, "rel-saintpipe-sweep")
        args = container(job, "sweep")["args"]
        env = {e["name"]: e["value"] for e in container(job, "sweep")["env"] if "value" in e}
        path = tmp_path / f"sweep-{trials}.toml"
        path.write_text(text)
        config = load_sweep(path, Path(arg_after(args, "--data")), None, environ=env,
                            flags={"sweep": {"features": arg_after(args, "--features")},
                                   "pool": {"job_id": arg_after(args, "--job")}})
        assert len(expand(config, check_space(config))) == trials and config.pool.job_id == "demo"
        # A changed file is a new pod (the Job's template changes with it).
        annotations = job["spec"]["template"]["metadata"]["annotations"]
        assert len(annotations["checksum/sweep-file"]) == 64
    a, b = (workload(manifests({"sweep": {"enabled": True, **v}}), "rel-saintpipe-sweep")
            for v in ({}, {"file": FILE}))
    assert a["spec"]["template"]["metadata"]["annotations"] != b["spec"]["template"]["metadata"]["annotations"]


def test_only_the_sweep_reads_the_pool_and_the_shards_when_it_is_on():
    docs = manifests(SWEEP)
    policies = [d for d in docs if d["kind"] == "NetworkPolicy"]
    labels = {d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]:
              d["spec"]["template"]["metadata"]["labels"] for d in docs if d["kind"] in ("Job", "Deployment",
                                                                                         "StatefulSet")}
    pods = {name: Pod("ml", lab) for name, lab in labels.items()}
    stranger = Pod("ml", {"app": "notebook"})
    assert admitted(policies, pods["sweep"], pods["redis"], 6379)
    assert admitted(policies, pods["sweep"], pods["feature-shard"], 50051)
    assert admitted(policies, pods["sweep"], pods["feature-shard"], 50052)
    assert not admitted(policies, pods["samplers"], pods["feature-shard"], 50051)
    assert not admitted(policies, stranger, pods["sweep"], 8265)  # nothing reaches into the sweep's pod
    assert not admitted(policies, pods["ray-head"], pods["sweep"], 6379)


@pytest.mark.parametrize("sweep, where", [
    ({"enabled": True, "file": "[trainer]\nepochs = 2\n"}, "/sweep/file"),
    ({"enabled": True, "trials": 2}, "additional properties 'trials' not allowed"),
    ({"enabled": "yes"}, "/sweep/enabled': got string, want boolean"),
    ({"backoffLimit": -1}, "/sweep/backoffLimit"),
])
def test_a_wrong_sweep_value_is_the_schema_s_error(sweep, where):
    with pytest.raises(helm.HelmValuesError) as caught:
        manifests({"sweep": sweep})
    assert where in str(caught.value), str(caught.value)


def test_values_yaml_documents_the_sweep_file_it_ships():
    from tests.support.helm import CHART

    values = yaml.safe_load((CHART / "values.yaml").read_text())["sweep"]
    assert values["enabled"] is False and "[sweep.space]" in values["file"]
