"""The Helm chart rendered by Helm's own engine (helm-python-sdk binds Helm's Go SDK), and lookups in it."""

from __future__ import annotations

from pathlib import Path

import helm_python as helm
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "saintpipe"
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "Job")


def render(values: dict | None = None, *, namespace: str = "ml") -> dict[str, str]:
    """Template path -> rendered text, for release "rel" in ``namespace`` (values checked by the chart's schema)."""
    with helm.Chart.load(str(CHART)) as chart:
        return chart.render(values, name="rel", namespace=namespace, is_install=True)


def manifests(values: dict | None = None, *, namespace: str = "ml") -> list[dict]:
    docs = []
    for name, text in render(values, namespace=namespace).items():
        if name.endswith(".yaml"):
            docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs


def by_kind_name(docs: list[dict]) -> dict[tuple[str, str], dict]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def workload(docs: list[dict], name: str) -> dict:
    """The Deployment, StatefulSet or Job called ``name``."""
    (found,) = [d for d in docs if d["kind"] in WORKLOAD_KINDS and d["metadata"]["name"] == name]
    return found


def workloads(docs: list[dict]) -> list[dict]:
    return [d for d in docs if d["kind"] in WORKLOAD_KINDS]


def pod_spec(doc: dict) -> dict:
    return doc["spec"]["template"]["spec"]


def container(doc: dict, name: str) -> dict:
    (found,) = [c for c in pod_spec(doc)["containers"] if c["name"] == name]
    return found


def all_containers(doc: dict) -> list[dict]:
    spec = pod_spec(doc)
    return [*spec.get("initContainers", []), *spec["containers"]]


def env_of(c: dict) -> dict[str, dict]:
    return {item["name"]: item for item in c.get("env", [])}


def arg_after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]
