"""values.schema.json: every value typed, ranged or enumerated; a typo or a wrong value is Helm's schema error."""

from __future__ import annotations

import json

import helm_python as helm
import pytest
import yaml

from tests.support.helm import CHART, manifests

SCHEMA = json.loads((CHART / "values.schema.json").read_text())
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
FREE_FORM = {"extraEnv", "podSecurityContext", "securityContext", "affinity", "nodeSelector", "labels",
             "annotations", "podAnnotations", "requests", "limits", "global"}


def resolve(node: dict) -> dict:
    while "$ref" in node:
        node = SCHEMA["$defs"][node["$ref"].rsplit("/", 1)[1]]
    return node


def leaf_paths(values: dict, prefix: tuple = ()):
    for key, value in values.items():
        if isinstance(value, dict) and value and key not in FREE_FORM:
            yield from leaf_paths(value, (*prefix, key))
        else:
            yield (*prefix, key)


def test_every_value_in_values_yaml_is_described_by_the_schema():
    for path in leaf_paths(VALUES):
        node = SCHEMA
        for key in path:
            node = resolve(node)
            assert key in node.get("properties", {}), f"values.yaml {'.'.join(path)}: not in values.schema.json"
            node = node["properties"][key]
        node = resolve(node)
        assert "type" in node or "enum" in node or "const" in node, f"{'.'.join(path)}: no type in the schema"


def test_every_object_of_the_schema_refuses_unknown_keys():
    def walk(node: dict, where: str) -> None:
        node = resolve(node)
        if node.get("type") == "object" and "properties" in node:
            assert node.get("additionalProperties") is False, f"{where}: unknown keys would pass"
            for key, child in node["properties"].items():
                walk(child, f"{where}.{key}")

    walk(SCHEMA, "values")


def test_the_defaults_pass_the_schema():
    with helm.Chart.load(str(CHART)) as chart:
        chart.validate_schema(VALUES)
    assert manifests()  # and render


@pytest.mark.parametrize("values, where", [
    ({"trainr": {"replicas": 2}}, "additional properties 'trainr' not allowed"),
    ({"trainer": {"replica": 2}}, "additional properties 'replica' not allowed"),
    ({"featureShards": {"replicas": "2"}}, "/featureShards/replicas': got string, want integer"),
    ({"featureShards": {"replicas": 0}}, "/featureShards/replicas': minimum"),
    ({"samplers": {"workers": 1.5}}, "/samplers/workers"),
    ({"data": {"source": "s3"}}, "/data/source': value must be one of 'demo', 'claim'"),
    ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
    ({"image": {"digest": "sha256:abc"}}, "/image/digest"),
    ({"trainer": {"metricsPort": 70000}}, "/trainer/metricsPort': maximum"),
    ({"trainer": {"resources": {"limits": {"memory": "lots"}}}}, "/trainer/resources"),
    ({"trainer": {"checkpoints": {"persistence": {"accessMode": "ReadOnlyMany"}}}}, "/accessMode"),
    ({"job": "my job"}, "/job"),
    ({"redis": {"persistence": {"enabled": "yes"}}}, "/redis/persistence/enabled': got string, want boolean"),
    ({"networkPolicy": {"enabled": True, "metricsFrom": {"namespaceSelector": {}}}}, "/networkPolicy/metricsFrom"),
    ({"grafana": {"dashboard": {"namespace": "Monitoring"}}}, "/grafana/dashboard/namespace"),
    ({"monitoring": {"serviceMonitor": {"interval": "often"}}}, "/monitoring/serviceMonitor/interval"),
])
def test_a_wrong_value_is_helms_schema_error_naming_it(values, where):
    with pytest.raises(helm.HelmValuesError) as caught:
        manifests(values)
    message = str(caught.value)
    assert "don't meet the specifications of the schema" in message
    assert where in message, message
