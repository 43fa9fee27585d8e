"""Which pod may open a connection to which port, under a set of NetworkPolicies (ingress only).

Follows the API's semantics (networking.k8s.io/v1): a pod selected by no policy with
Ingress in its policyTypes admits everything; one selected by some admits a connection
when any of their rules does (a rule without ``from`` admits every peer, without ``ports``
every port). Named ports and ipBlock peers are not used by this chart and are refused here.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: dict = field(default_factory=dict)
    namespace_labels: dict = field(default_factory=dict)


def selects(selector: dict, labels: dict) -> bool:
    """A LabelSelector (matchLabels and matchExpressions In/NotIn/Exists/DoesNotExist) against ``labels``."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        ok = {"In": key in labels and labels[key] in values,
              "NotIn": key not in labels or labels[key] not in values,
              "Exists": key in labels, "DoesNotExist": key not in labels}[op]
        if not ok:
            return False
    return True


def _peer_admits(peer: dict, policy_ns: str, src: Pod) -> bool:
    if "ipBlock" in peer:
        raise ValueError("ipBlock peers are not modelled")
    if "namespaceSelector" in peer:
        if not selects(peer["namespaceSelector"], {**src.namespace_labels,
                                                   "kubernetes.io/metadata.name": src.namespace}):
            return False
    elif src.namespace != policy_ns:
        return False
    return "podSelector" not in peer or selects(peer["podSelector"], src.labels)


def _port_admits(rule_ports: list[dict] | None, port: int) -> bool:
    if not rule_ports:
        return True
    for p in rule_ports:
        if not isinstance(p.get("port", 0), int):
            raise ValueError("named ports are not modelled")
        if p.get("protocol", "TCP") == "TCP" and ("port" not in p or p["port"] <= port <= p.get("endPort", p["port"])):
            return True
    return False


def admitted(policies: list[dict], src: Pod, dst: Pod, port: int) -> bool:
    """May ``src`` connect to ``dst`` on TCP ``port``?"""
    applying = [p for p in policies
                if p["metadata"]["namespace"] == dst.namespace and "Ingress" in p["spec"].get("policyTypes", ["Ingress"])
                and selects(p["spec"]["podSelector"], dst.labels)]
    if not applying:
        return True
    for policy in applying:
        for rule in policy["spec"].get("ingress", []):
            peers = rule.get("from")
            if (peers is None or any(_peer_admits(peer, policy["metadata"]["namespace"], src) for peer in peers)) \
                    and _port_admits(rule.get("ports"), port):
                return True
    return False
