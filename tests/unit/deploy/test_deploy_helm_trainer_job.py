"""The chart's training: an indexed Job that ends, one data-parallel rank per pod, checkpoints on a volume.

The ranks' code path (``saintpipe serve trainer --world-size N --rank K --master ...``, one
process per rank, no Ray) is run for real in tests/integration/trainer/test_trainer_serve_cli.py.
"""

from __future__ import annotations

import helm_python as helm
import pytest

from tests.support.helm import arg_after, by_kind_name, container, env_of, manifests, pod_spec, workload

RWX = {"checkpoints": {"persistence": {"accessMode": "ReadWriteMany"}}}


def trainer_job(values: dict | None = None) -> dict:
    return workload(manifests(values), "rel-saintpipe-trainer")


def test_training_is_a_job_that_ends_and_retries_a_bounded_number_of_times():
    docs = manifests()
    job = workload(docs, "rel-saintpipe-trainer")
    assert job["kind"] == "Job"
    assert not [d for d in docs if d["kind"] == "Deployment" and "trainer" in d["metadata"]["name"]]
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"] == 1
    assert spec["backoffLimit"] == 6
    assert "ttlSecondsAfterFinished" not in spec and "activeDeadlineSeconds" not in spec
    # In place: a restarted container keeps the pod's volumes.
    assert pod_spec(job)["restartPolicy"] == "OnFailure"
    args = container(job, "trainer")["args"]
    assert arg_after(args, "--world-size") == "1" and arg_after(args, "--rank") == "$(TRAINER_RANK)"
    assert "--master" not in args and "--trainers" not in args and "--ray-address" not in args


def test_job_limits_are_values():
    job = trainer_job({"trainer": {"backoffLimit": 2, "ttlSecondsAfterFinished": 3600,
                                   "activeDeadlineSeconds": 86400, "epochs": 40}})
    spec = job["spec"]
    assert (spec["backoffLimit"], spec["ttlSecondsAfterFinished"], spec["activeDeadlineSeconds"]) == (2, 3600, 86400)
    assert arg_after(container(job, "trainer")["args"], "--epochs") == "40"


def test_replicas_are_ranks_of_one_data_parallel_group():
    docs = manifests({"trainer": {"replicas": 3, **RWX}})
    job = workload(docs, "rel-saintpipe-trainer")
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 3
    c = container(job, "trainer")
    assert arg_after(c["args"], "--world-size") == "3"
    # Each pod's rank is its completion index, from the downward API.
    rank = env_of(c)["TRAINER_RANK"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert rank == "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    # Rank 0 is reachable by name before it is ready: pod hostname <job>-0 under the headless Service.
    service = by_kind_name(docs)[("Service", "rel-saintpipe-trainer")]
    assert pod_spec(job)["subdomain"] == "rel-saintpipe-trainer"
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"].items() <= job["spec"]["template"]["metadata"]["labels"].items()
    host, port = arg_after(c["args"], "--master").rsplit(":", 1)
    assert host == "rel-saintpipe-trainer-0.rel-saintpipe-trainer.ml.svc.cluster.local"
    assert {"name": "rendezvous", "containerPort": int(port)} in c["ports"]
    assert {"name": "rendezvous", "port": int(port), "targetPort": "rendezvous"} in service["spec"]["ports"]


@pytest.mark.parametrize("trainer", [
    {"replicas": 2},
    {"replicas": 3, "checkpoints": {"persistence": {"enabled": False}}},
    {"replicas": 2, "checkpoints": {"persistence": {"enabled": False, "accessMode": "ReadWriteMany"}}},
])
def test_ranks_without_a_shared_checkpoint_directory_are_refused_by_the_schema(trainer):
    with pytest.raises(helm.HelmValuesError, match=r"(?s)/trainer/checkpoints.*(ReadWriteMany|persistence/enabled)"):
        manifests({"trainer": trainer})


def test_ranks_share_an_existing_claim():
    job = trainer_job({"trainer": {"replicas": 2, "checkpoints": {"existingClaim": "shared-ckpt"}}})
    volumes = {v["name"]: v for v in pod_spec(job)["volumes"]}
    assert volumes["checkpoints"]["persistentVolumeClaim"] == {"claimName": "shared-ckpt"}


def test_checkpoints_and_the_model_go_to_a_claim_kept_after_uninstall():
    docs = manifests()
    claim = by_kind_name(docs)[("PersistentVolumeClaim", "rel-saintpipe-checkpoints")]
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    job = workload(docs, "rel-saintpipe-trainer")
    trainer = container(job, "trainer")
    assert arg_after(trainer["args"], "--checkpoint-dir") == "/checkpoints"
    assert {"name": "checkpoints", "mountPath": "/checkpoints"} in trainer["volumeMounts"]
    volumes = {v["name"]: v for v in pod_spec(job)["volumes"]}
    assert volumes["checkpoints"]["persistentVolumeClaim"] == {"claimName": "rel-saintpipe-checkpoints"}


def test_without_persistence_the_checkpoints_survive_container_restarts_in_an_empty_dir():
    docs = manifests({"trainer": {"checkpoints": {"persistence": {"enabled": False, "keep": False}}}})
    assert not [d for d in docs if d["kind"] == "PersistentVolumeClaim"]
    volumes = {v["name"]: v for v in pod_spec(workload(docs, "rel-saintpipe-trainer"))["volumes"]}
    assert volumes["checkpoints"]["emptyDir"] == {"sizeLimit": "2Gi"}
