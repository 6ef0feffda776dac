"""The chart rendered in each of its modes, and the Pod Security Standards level each needs.

Usage: pss.py

Each mode of MODES is rendered with Helm, validated with kubernetes-validate --strict, and every
pod it makes (the DaemonSet's, the fabric CronJob's, the `helm test` Pod) is checked against
the Pod Security Standards' baseline and restricted controls, as the PodSecurity admission
plugin applies them (https://kubernetes.io/docs/concepts/security/pod-security-standards/,
"latest" version, Kubernetes 1.25 and on). The check fails unless:
  - the lowest level that admits every pod of a mode is the level the mode claims;
  - the controls each mode fails are exactly those MODES lists, so that the reasons
    deploy/README.md gives ("Pod Security levels") are the real ones, and a change that adds a
    root container or a host namespace fails here rather than in a cluster;
  - deploy/README.md's table names each mode with its level;
  - the Namespace the chart renders enforces the default mode's level.
The checker itself is first run on pods with a known verdict, so that a control it misses fails.

No published tool does this offline from PyPI or npm (kube-score, kubeconform and
kubernetes-validate check schemas, not PSS; the admission plugin is Go inside the API server),
so the controls are written out below, one function each, named as the standard names them.
"""
import sys
from pathlib import Path

from manifests import DEPLOY, key, render, say, validate

README = DEPLOY / "README.md"
LEVELS = ("restricted", "baseline", "privileged")
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret"}
SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
                "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                "net.ipv4.tcp_keepalive_probes"}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}

# mode -> (values, claimed level, baseline controls failed, restricted controls failed beyond
# those). The README's "Pod Security levels" table says the same in words.
MODES = {
    "hostPID": ({}, "privileged",
                {"host namespaces", "hostPath volumes"},
                {"volume types", "running as non-root", "running as non-root user", "capabilities"}),
    "hostProc": ({"hostPID": False, "hostProc": {"enabled": True}, "agent": {"hostStateDirOwner": "preCreated"}},
                 "privileged", {"hostPath volumes"}, {"volume types"}),
    "hostProc, fabric calibration on": (
        {"hostPID": False, "hostProc": {"enabled": True}, "agent": {"hostStateDirOwner": "preCreated"},
         "calibration": {"fabric": {"enabled": True}}},
        "privileged", {"hostPath volumes"}, {"volume types"}),
}


def fail(message: str) -> None:
    raise SystemExit(f"pss: {message}")


def containers(pod: dict) -> list[dict]:
    return pod.get("containers", []) + pod.get("initContainers", []) + pod.get("ephemeralContainers", [])


def sc(obj: dict) -> dict:
    return obj.get("securityContext") or {}


# --- baseline ---------------------------------------------------------------------------------
def host_process(pod: dict) -> list[str]:
    return [f"{c.get('name', 'pod')}: windowsOptions.hostProcess" for c in [pod] + containers(pod)
            if (sc(c).get("windowsOptions") or {}).get("hostProcess")]


def host_namespaces(pod: dict) -> list[str]:
    return [f"{field}: true" for field in ("hostNetwork", "hostPID", "hostIPC") if pod.get(field)]


def privileged_containers(pod: dict) -> list[str]:
    return [f"{c['name']}: privileged" for c in containers(pod) if sc(c).get("privileged")]


def baseline_capabilities(pod: dict) -> list[str]:
    return [f"{c['name']}: adds {cap}" for c in containers(pod)
            for cap in (sc(c).get("capabilities") or {}).get("add", []) if cap not in BASELINE_CAPABILITIES]


def host_path_volumes(pod: dict) -> list[str]:
    return [f"volume {v['name']}: hostPath {v['hostPath'].get('path')}" for v in pod.get("volumes", [])
            if "hostPath" in v]


def host_ports(pod: dict) -> list[str]:
    return [f"{c['name']}: hostPort {p['hostPort']}" for c in containers(pod) for p in c.get("ports", [])
            if p.get("hostPort")]


def app_armor(pod: dict) -> list[str]:
    found = []
    for c in [pod] + containers(pod):
        profile = (sc(c).get("appArmorProfile") or {}).get("type")
        if profile not in (None, "RuntimeDefault", "Localhost"):
            found.append(f"{c.get('name', 'pod')}: appArmorProfile {profile}")
    return found


def se_linux(pod: dict) -> list[str]:
    found = []
    for c in [pod] + containers(pod):
        options = sc(c).get("seLinuxOptions") or {}
        if options.get("type", "") not in SELINUX_TYPES or options.get("user") or options.get("role"):
            found.append(f"{c.get('name', 'pod')}: seLinuxOptions {options}")
    return found


def proc_mount(pod: dict) -> list[str]:
    return [f"{c['name']}: procMount {sc(c)['procMount']}" for c in containers(pod)
            if sc(c).get("procMount", "Default") != "Default"]


def seccomp_baseline(pod: dict) -> list[str]:
    return [f"{c.get('name', 'pod')}: seccomp Unconfined" for c in [pod] + containers(pod)
            if (sc(c).get("seccompProfile") or {}).get("type") == "Unconfined"]


def sysctls(pod: dict) -> list[str]:
    return [f"sysctl {s['name']}" for s in sc(pod).get("sysctls", []) if s["name"] not in SAFE_SYSCTLS]


# --- restricted ---------------------------------------------------------------------------------
def volume_types(pod: dict) -> list[str]:
    found = []
    for v in pod.get("volumes", []):
        kinds = set(v) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            found.append(f"volume {v['name']}: {', '.join(sorted(kinds - RESTRICTED_VOLUMES))}")
    return found


def privilege_escalation(pod: dict) -> list[str]:
    return [f"{c['name']}: allowPrivilegeEscalation not false" for c in containers(pod)
            if sc(c).get("allowPrivilegeEscalation") is not False]


def running_as_non_root(pod: dict) -> list[str]:
    pod_level = sc(pod).get("runAsNonRoot")
    found = []
    for c in containers(pod):
        mine = sc(c).get("runAsNonRoot")
        if mine is False or (mine is None and pod_level is not True):
            found.append(f"{c['name']}: runAsNonRoot not true")
    return found


def running_as_non_root_user(pod: dict) -> list[str]:
    return [f"{c.get('name', 'pod')}: runAsUser 0" for c in [pod] + containers(pod) if sc(c).get("runAsUser") == 0]


def seccomp_restricted(pod: dict) -> list[str]:
    allowed = ("RuntimeDefault", "Localhost")
    pod_level = (sc(pod).get("seccompProfile") or {}).get("type")
    found = []
    for c in containers(pod):
        mine = (sc(c).get("seccompProfile") or {}).get("type")
        if mine is not None and mine not in allowed or mine is None and pod_level not in allowed:
            found.append(f"{c['name']}: seccompProfile not RuntimeDefault or Localhost")
    return found


def capabilities_restricted(pod: dict) -> list[str]:
    found = []
    for c in containers(pod):
        caps = sc(c).get("capabilities") or {}
        if "ALL" not in caps.get("drop", []):
            found.append(f"{c['name']}: does not drop ALL")
        found += [f"{c['name']}: adds {cap}" for cap in caps.get("add", []) if cap != "NET_BIND_SERVICE"]
    return found


BASELINE = {"hostProcess": host_process, "host namespaces": host_namespaces,
            "privileged containers": privileged_containers, "capabilities": baseline_capabilities,
            "hostPath volumes": host_path_volumes, "host ports": host_ports, "AppArmor": app_armor,
            "SELinux": se_linux, "/proc mount type": proc_mount, "seccomp": seccomp_baseline, "sysctls": sysctls}
RESTRICTED = {"volume types": volume_types, "privilege escalation": privilege_escalation,
              "running as non-root": running_as_non_root, "running as non-root user": running_as_non_root_user,
              "seccomp": seccomp_restricted, "capabilities": capabilities_restricted}


def failed_controls(pod: dict, controls: dict) -> dict[str, list[str]]:
    return {name: found for name, check in controls.items() if (found := check(pod))}


def pod_specs(docs: list[dict]) -> list[tuple[str, dict]]:
    pods = []
    for doc in docs:
        spec = {"Pod": lambda d: d["spec"],
                "DaemonSet": lambda d: d["spec"]["template"]["spec"],
                "Job": lambda d: d["spec"]["template"]["spec"],
                "CronJob": lambda d: d["spec"]["jobTemplate"]["spec"]["template"]["spec"]}.get(doc["kind"])
        if spec:
            pods.append((key(doc), spec(doc)))
    return pods


def level(pods: list[tuple[str, dict]]) -> tuple[str, dict, dict]:
    baseline = {}
    restricted = {}
    for name, pod in pods:
        for control, found in failed_controls(pod, BASELINE).items():
            baseline.setdefault(control, []).extend(f"{name} {f}" for f in found)
        for control, found in failed_controls(pod, RESTRICTED).items():
            restricted.setdefault(control, []).extend(f"{name} {f}" for f in found)
    # Restricted includes every baseline control.
    lowest = "privileged" if baseline else "baseline" if restricted else "restricted"
    return lowest, baseline, {k: v for k, v in restricted.items() if k not in baseline}


def self_test() -> None:
    """Pods whose level the standard states, so that the checker cannot pass by missing a control."""
    good = {"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "c", "securityContext": {"allowPrivilegeEscalation": False,
                                                             "capabilities": {"drop": ["ALL"]}}}],
            "volumes": [{"name": "v", "emptyDir": {}}]}
    cases = [
        ("a pod meeting every restricted control", good, "restricted"),
        ("a pod without runAsNonRoot", {**good, "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}},
         "baseline"),
        ("a container adding CHOWN", {**good, "containers": [{"name": "c", "securityContext": {
            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]}}}]}, "baseline"),
        ("a container adding SYS_ADMIN", {**good, "containers": [{"name": "c", "securityContext": {
            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]}}}]},
         "privileged"),
        ("a privileged container", {**good, "containers": [{"name": "c", "securityContext": {"privileged": True}}]},
         "privileged"),
        ("hostNetwork", {**good, "hostNetwork": True}, "privileged"),
        ("hostPID", {**good, "hostPID": True}, "privileged"),
        ("a hostPath volume", {**good, "volumes": [{"name": "v", "hostPath": {"path": "/proc"}}]}, "privileged"),
        ("a hostPort", {**good, "containers": [{**good["containers"][0], "ports": [{"containerPort": 1, "hostPort": 1}]}]},
         "privileged"),
    ]
    for what, pod, want in cases:
        got = level([(what, pod)])[0]
        if got != want:
            fail(f"checker self-test: {what} is {want} by the standard, the checker says {got}")
    say(f"checker self-test: {len(cases)} pods of known level, each judged as the standard does")


def readme_claims() -> dict[str, str]:
    """`| mode | ... | \\`level\\` | ...` rows of the README's "Pod Security levels" table."""
    text = README.read_text()
    section = text.split("## Pod Security levels", 1)
    if len(section) != 2:
        fail("deploy/README.md has no \"## Pod Security levels\" section")
    claims = {}
    for line in section[1].split("\n## ", 1)[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0] in MODES:
            found = [lvl for lvl in LEVELS if f"`{lvl}`" in cells[2]]
            if len(found) == 1:
                claims[cells[0]] = found[0]
    return claims


def main() -> None:
    self_test()
    claims = readme_claims()
    for mode, (values, claimed, want_baseline, want_restricted) in MODES.items():
        docs = render(values)
        validate(docs, f"chart ({mode} mode)")
        lowest, baseline, restricted = level(pod_specs(docs))
        if lowest != claimed:
            fail(f"{mode} mode claims Pod Security {claimed!r}, its pods need {lowest!r}: "
                 f"baseline fails {baseline or 'nothing'}, restricted also {restricted or 'nothing'}")
        if set(baseline) != want_baseline or set(restricted) != want_restricted:
            fail(f"{mode} mode: expected baseline to fail on {sorted(want_baseline)} and restricted also on "
                 f"{sorted(want_restricted)}; the pods fail baseline on {baseline} and restricted also on {restricted}")
        if claims.get(mode) != claimed:
            fail(f"deploy/README.md's Pod Security table gives mode {mode!r} "
                 f"{claims.get(mode) or 'no level'}, the check finds {claimed!r}")
        reasons = "; ".join(f"{c}: {', '.join(sorted(set(v)))}" for c, v in sorted(baseline.items()))
        also = ", ".join(sorted(restricted)) or "nothing more"
        say(f"{mode}: Pod Security {claimed} (baseline fails {reasons}; restricted also {also})")
    namespace = [d for d in render({"namespace": {"create": True}}) if d["kind"] == "Namespace"]
    enforced = namespace[0]["metadata"]["labels"].get("pod-security.kubernetes.io/enforce") if namespace else None
    if enforced != MODES["hostPID"][1]:
        fail(f"the chart's Namespace enforces {enforced!r}, the default mode needs {MODES['hostPID'][1]!r}")
    say(f"the chart's Namespace enforces {enforced}, the default mode's level")


if __name__ == "__main__":
    if sys.argv[1:]:
        raise SystemExit(__doc__)
    main()
