"""The Kubernetes Pod Security Standards, "restricted" profile, as a check of one pod spec.

Written from https://kubernetes.io/docs/concepts/security/pod-security-standards/ (the
baseline controls plus the restricted ones, as of v1.27+): what the API server's
PodSecurity admission would refuse in a namespace labelled
pod-security.kubernetes.io/enforce=restricted.
"""

from __future__ import annotations

RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret"}
SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
                "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                "net.ipv4.tcp_keepalive_probes"}


def restricted_violations(pod: dict) -> list[str]:
    """Everything in ``pod`` (a PodSpec) the restricted profile forbids; empty when it is admitted."""
    out: list[str] = []
    psc = pod.get("securityContext", {})
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            out.append(f"{field}: true")
    for volume in pod.get("volumes", []):
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            out.append(f"volume {volume['name']}: type {sorted(kinds)} not allowed")
    for sysctl in psc.get("sysctls", []):
        if sysctl["name"] not in SAFE_SYSCTLS:
            out.append(f"sysctl {sysctl['name']}")
    if psc.get("runAsUser") == 0:
        out.append("pod runAsUser: 0")
    pod_seccomp = psc.get("seccompProfile", {}).get("type")
    if pod_seccomp == "Unconfined":
        out.append("pod seccompProfile Unconfined")
    containers = [*pod.get("initContainers", []), *pod.get("containers", []), *pod.get("ephemeralContainers", [])]
    for c in containers:
        name = c["name"]
        sc = c.get("securityContext", {})
        if sc.get("privileged"):
            out.append(f"{name}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{name}: allowPrivilegeEscalation must be false")
        if sc.get("runAsNonRoot") is False or not (sc.get("runAsNonRoot") or psc.get("runAsNonRoot")):
            out.append(f"{name}: runAsNonRoot must be true")
        if sc.get("runAsUser") == 0:
            out.append(f"{name}: runAsUser 0")
        seccomp = sc.get("seccompProfile", {}).get("type") or pod_seccomp
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"{name}: seccompProfile must be RuntimeDefault or Localhost (is {seccomp})")
        caps = sc.get("capabilities", {})
        if "ALL" not in caps.get("drop", []):
            out.append(f"{name}: capabilities must drop ALL")
        if set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
            out.append(f"{name}: adds capabilities {caps['add']}")
        if sc.get("procMount", "Default") != "Default":
            out.append(f"{name}: procMount")
        if any(p.get("hostPort") for p in c.get("ports", [])):
            out.append(f"{name}: hostPort")
        selinux = sc.get("seLinuxOptions", {})
        if selinux.get("user") or selinux.get("role"):
            out.append(f"{name}: seLinuxOptions user/role")
        if sc.get("appArmorProfile", {}).get("type") == "Unconfined":
            out.append(f"{name}: AppArmor Unconfined")
    return out
