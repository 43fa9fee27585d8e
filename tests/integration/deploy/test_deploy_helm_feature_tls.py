"""The chart's generated feature-shard TLS material and token work with real gRPC servers and clients.

The chart is rendered, its Secrets written out as the projected volume would
(/var/run/secrets/saintpipe -> a temporary directory), and a real shard server
started with the flags of the chart's shard command: the trainer's flags (the
CA, the token file) and the shard's DNS name gather rows; the chart's readiness
probe command reports it healthy; without the token the trainer is refused.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from saintpipe.core.errors import ConfigError
from saintpipe.services.dataset.demo import generate_demo
from saintpipe.services.dataset.store import write_dataset
from saintpipe.services.feature_shard.client import FeatureClient
from saintpipe.services.feature_shard.security import ClientSecurity, ServerSecurity
from saintpipe.services.feature_shard.server import create_server, stop_server
from tests.support.cli import saintpipe_command
from tests.support.helm import arg_after, by_kind_name, container, manifests, pod_spec

SECRETS_DIR = "/var/run/secrets/saintpipe"


def _projected_files(docs: dict, pod: dict, out: Path) -> None:
    """Write the files of ``pod``'s projected `secrets` volume under ``out``, from the rendered Secrets."""
    volume = next(v for v in pod_spec(pod)["volumes"] if v["name"] == "secrets")
    for source in volume["projected"]["sources"]:
        secret = docs[("Secret", source["secret"]["name"])]
        for item in source["secret"]["items"]:
            path = out / item["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(base64.b64decode(secret["data"][item["key"]]))
            path.chmod(0o440)


@pytest.fixture(scope="module")
def chart_secrets(tmp_path_factory):
    docs = by_kind_name(manifests())
    root = tmp_path_factory.mktemp("secrets")
    shard_pod, trainer_pod = docs[("StatefulSet", "rel-saintpipe-feature-shard")], docs[("Job", "rel-saintpipe-trainer")]
    _projected_files(docs, shard_pod, root / "shard")
    _projected_files(docs, trainer_pod, root / "trainer")
    dataset = tmp_path_factory.mktemp("data") / "demo"
    write_dataset(dataset, num_shards=1, **generate_demo(num_nodes=2000, seed=1))
    return docs, root, dataset


def _local(path: str, root: Path) -> Path:
    return Path(path.replace(SECRETS_DIR, str(root)))


def test_the_generated_certificate_and_token_serve_the_trainer(chart_secrets):
    docs, root, dataset = chart_secrets
    shard = container(docs[("StatefulSet", "rel-saintpipe-feature-shard")], "feature-shard")
    line = shard["command"][2]
    flag = dict(re.findall(r"--(tls-cert|tls-key|token-file) (\S+)", line))
    assert set(flag) == {"tls-cert", "tls-key", "token-file"}, line
    os.environ.pop("SAINTPIPE_FEATURE_TOKEN", None)
    security = ServerSecurity(tls_cert=_local(flag["tls-cert"], root / "shard"),
                              tls_key=_local(flag["tls-key"], root / "shard"),
                              token_file=_local(flag["token-file"], root / "shard"))
    server, port = create_server(dataset, 0, security=security)
    try:
        trainer = container(docs[("Job", "rel-saintpipe-trainer")], "trainer")
        address = arg_after(trainer["args"], "--features").split(";")[0]
        host = address.rsplit(":", 1)[0]
        ca = _local(arg_after(trainer["args"], "--feature-tls-ca"), root / "trainer")
        token = _local(arg_after(trainer["args"], "--feature-token-file"), root / "trainer")
        # The shard's DNS name (as the trainer dials it) is what the certificate must name; here it is reached
        # on loopback.
        client_security = ClientSecurity(tls_ca=ca, token_file=token, tls_server_name=host)
        with FeatureClient([[f"127.0.0.1:{port}"]], security=client_security, shared_memory="off") as client:
            rows = client.gather(np.array([0, 5, 7]))
        assert rows.shape[0] == 3
        with pytest.raises(ConfigError, match="requires a token"):
            FeatureClient([[f"127.0.0.1:{port}"]], security=ClientSecurity(tls_ca=ca, tls_server_name=host),
                          shared_memory="off")
        # The chart's readiness probe, as the kubelet runs it in the shard's container.
        probe = shard["readinessProbe"]["exec"]["command"]
        probe = [str(_local(a, root / "shard")) for a in probe]
        probe[probe.index("127.0.0.1:50051")] = f"127.0.0.1:{port}"
        python = str(Path(saintpipe_command()[0]).parent / "python")
        result = subprocess.run([python, *probe[1:]], capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 0 and "SERVING" in result.stdout, result.stderr
    finally:
        stop_server(server, grace=1.0)
