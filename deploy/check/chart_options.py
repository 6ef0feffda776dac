"""The chart's operator-facing options (issue 11), each rendered and checked for its effect.

Usage:
  chart_options.py              the checks below, on renders of the chart
  chart_options.py helm-test AGENT
                                the `helm test` Pod's script run here against a sim agent
                                (`AGENT --backend sim`) on 127.0.0.1 and on [::1], where it
                                must pass, and against a stopped agent, where it must fail

- subchart: `global` (any content) passes the values schema, and a parent chart that depends
  on meshfit renders it from its `meshfit:` values with a `global:` block;
- NOTES.txt renders and tells how to reach /metrics and /readyz, and how to run `helm test`;
- the `helm test` Pod: a test hook whose script asks /readyz and /metrics of the Service on the
  agent's port, with labels neither the DaemonSet nor the Service selects, and no Pod when off;
- priorityClassName: system-node-critical by default, overridable, none when empty;
- both IP families: PreferDualStack on the Service, configurable; the agent never bound to the
  IPv4 wildcard; probes on the pod IP by port name;
- the ServiceMonitor's scrape options (manifests.SERVICE_MONITOR_OPTIONS) carried into the
  endpoint, after the chart's own relabeling; the schema refuses a bad scheme and IP family;
- the Dockerfile: a CUDA runtime final stage whose glibc is at least the build stage's, and a
  build stage that cross-compiles for the target platform;
- the calibrate token: from agent.calibrateTokenSecret into the variable the agent reads
  (MESHFIT_CALIBRATE_TOKEN, taken from the agent's own flag definition), and with `helm-test`,
  a sim agent given that variable as the pod would be answers POST /v1/calibrate 202 with the
  token and 401 without;
- prometheusRule.runbookUrlPrefix: every alert's runbook_url is `<prefix>/<alert>.md`, the rest
  of the rules as the tested file has them;
- podMonitor: the same endpoint as the ServiceMonitor's, the two refused together;
- hostProc: hostPID off, the host's /proc read-only at `--host-proc`, refused beside hostPID;
  extraVolumes and extraVolumeMounts reach the pod;
- the metricRelabelings example in values.yaml drops a family the agent exports.
"""
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import helm_python as helm
import yaml

from manifests import (CHART, DEPLOY, NAMESPACE, RELEASE, RULES, SERVICE_MONITOR_OPTIONS, is_hook, key,
                       notes, render, say, validate)

DOCKERFILE = DEPLOY / "Dockerfile"
# glibc of the build stage's Debian release and of the CUDA images' Ubuntu releases: a binary
# linked against a glibc runs on that glibc or a newer one only.
GLIBC = {"bookworm": (2, 36), "trixie": (2, 41), "ubuntu22.04": (2, 35), "ubuntu24.04": (2, 39)}


def fail(message: str) -> None:
    raise SystemExit(f"chart_options: {message}")


def one(docs: list[dict], kind: str) -> dict:
    found = [d for d in docs if d["kind"] == kind and not is_hook(d)]
    if len(found) != 1:
        fail(f"expected one {kind}, the render has {[key(d) for d in found]}")
    return found[0]


def rejects(values: dict) -> bool:
    with helm.Chart.load(CHART) as chart:
        try:
            chart.validate_schema(values)
        except helm.HelmValuesError:
            return True
    return False


def subchart() -> None:
    globals_ = {"imageRegistry": "registry.example", "labels": {"team": "ml-platform"}, "any": [1, "x"]}
    if rejects({"global": globals_}):
        fail("values.schema.json refuses a parent chart's `global:` block: meshfit cannot be a subchart")
    with tempfile.TemporaryDirectory() as tmp:
        parent = Path(tmp) / "platform"
        (parent / "templates").mkdir(parents=True)
        (parent / "Chart.yaml").write_text(
            "apiVersion: v2\nname: platform\nversion: 1.0.0\n"
            "dependencies:\n  - name: meshfit\n    version: 0.1.0\n")
        shutil.copytree(CHART, parent / "charts" / "meshfit")
        values = {"global": globals_, "meshfit": {"agent": {"port": 9555}, "priorityClassName": ""}}
        with helm.Chart.load(parent) as loaded:
            out = loaded.render(values, name="platform", namespace=NAMESPACE, is_install=True)
    docs = [d for name, text in sorted(out.items()) if not name.endswith("NOTES.txt")
            for d in yaml.safe_load_all(text) if d]
    validate(docs, "meshfit as a subchart of `platform`")
    daemonset, service = one(docs, "DaemonSet"), one(docs, "Service")
    pod = daemonset["spec"]["template"]["spec"]
    if daemonset["metadata"]["name"] != "platform-meshfit":
        fail(f"subchart DaemonSet is named {daemonset['metadata']['name']}, not platform-meshfit")
    if pod["containers"][0]["ports"][0]["containerPort"] != 9555 or service["spec"]["ports"][0]["port"] != 9555:
        fail("the parent's meshfit.agent.port=9555 did not reach the DaemonSet and the Service")
    if "priorityClassName" in pod:
        fail("the parent's meshfit.priorityClassName=\"\" still renders a priorityClassName")
    say("subchart: `global` with any content passes the schema; a parent's `meshfit:` values "
        "(agent.port 9555, priorityClassName \"\") reach the DaemonSet and the Service")


def notes_text() -> None:
    text = notes({})
    port = yaml.safe_load((CHART / "values.yaml").read_text())["agent"]["port"]
    for want in (f"port-forward ds/meshfit {port}", f"localhost:{port}/readyz", f"localhost:{port}/metrics",
                 f"http://meshfit.{NAMESPACE}.svc:{port}/metrics", f"helm test {RELEASE} -n {NAMESPACE}"):
        if want not in text:
            fail(f"NOTES.txt does not say `{want}`:\n{text}")
    if "helm test" in notes({"test": {"enabled": False}}):
        fail("NOTES.txt offers `helm test` with test.enabled=false")
    say("NOTES.txt renders: port-forward, /readyz, /metrics, the in-cluster URL, `helm test` (only when on)")


def test_hook() -> None:
    docs = render({})
    hooks = [d for d in docs if is_hook(d)]
    if [(d["kind"], d["metadata"]["annotations"]["helm.sh/hook"]) for d in hooks] != [("Pod", "test")]:
        fail(f"expected one Pod with helm.sh/hook: test, got {[key(d) for d in hooks]}")
    (pod,) = hooks
    labels = pod["metadata"]["labels"]
    for owner in (one(docs, "DaemonSet")["spec"]["selector"]["matchLabels"], one(docs, "Service")["spec"]["selector"]):
        if all(labels.get(k) == v for k, v in owner.items()):
            fail(f"the test Pod's labels {labels} match the agent's selector {owner}")
    (container,) = pod["spec"]["containers"]
    script = "\n".join(container["command"] + container["args"])
    url = f"http://meshfit.{NAMESPACE}.svc:9420"
    for want in (f"{url}/readyz", f"{url}/metrics", "meshfit_up"):
        if want not in script:
            fail(f"the test Pod's script does not use {want}:\n{script}")
    if container["image"] != "busybox:1.37.0" or pod["spec"]["restartPolicy"] != "Never":
        fail(f"test Pod: image {container['image']}, restartPolicy {pod['spec']['restartPolicy']}")
    moved = render({"agent": {"port": 9555}, "test": {"image": {"repository": "mirror/busybox", "tag": "1.36.1"}}})
    (pod,) = [d for d in moved if is_hook(d)]
    (container,) = pod["spec"]["containers"]
    if container["image"] != "mirror/busybox:1.36.1" or f"meshfit.{NAMESPACE}.svc:9555/readyz" not in container["args"][0]:
        fail("the test Pod does not follow test.image and agent.port")
    if any(is_hook(d) for d in render({"test": {"enabled": False}})):
        fail("test.enabled=false still renders the test Pod")
    say("helm test Pod: hook `test`, busybox wget of /readyz and /metrics (meshfit_up) through the "
        "Service on agent.port, labels outside the agent's selectors, none with test.enabled=false")


def priority_class() -> None:
    def of(values: dict):
        return one(render(values), "DaemonSet")["spec"]["template"]["spec"].get("priorityClassName")
    got = (of({}), of({"priorityClassName": "gpu-agents"}), of({"priorityClassName": ""}))
    if got != ("system-node-critical", "gpu-agents", None):
        fail(f"priorityClassName default/override/empty renders {got}")
    say("priorityClassName: system-node-critical by default, overridable, absent when empty")


def ip_families() -> None:
    docs = render({})
    service = one(docs, "Service")["spec"]
    if service.get("ipFamilyPolicy") != "PreferDualStack" or "ipFamilies" in service:
        fail(f"the default Service is not PreferDualStack without pinned families: {service}")
    service = one(render({"service": {"ipFamilyPolicy": "SingleStack", "ipFamilies": ["IPv6"]}}), "Service")["spec"]
    if (service["ipFamilyPolicy"], service["ipFamilies"]) != ("SingleStack", ["IPv6"]):
        fail(f"service.ipFamilyPolicy/ipFamilies not rendered: {service}")
    agent = one(docs, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]
    listen = [a for a in agent["args"] if a.startswith("--listen")]
    if any("0.0.0.0" in a for a in listen):
        fail(f"the agent is told {listen}: IPv4 only; leave it both families (`:PORT`)")
    for probe in ("livenessProbe", "readinessProbe"):
        get = agent[probe]["httpGet"]
        if "host" in get or get["port"] != "metrics":
            fail(f"{probe} {get}: must go to the pod IP (no host) by port name")
    for bad in ({"service": {"ipFamilyPolicy": "DualStack"}}, {"service": {"ipFamilies": ["IPv5"]}}):
        if not rejects(bad):
            fail(f"values.schema.json accepted {bad}")
    say(f"IP families: Service PreferDualStack (or as set), agent {listen or ['its default listen']}, "
        "probes to the pod IP; the schema refuses DualStack and IPv5")


def service_monitor() -> None:
    options = SERVICE_MONITOR_OPTIONS["serviceMonitor"]
    (endpoint,) = one(render(SERVICE_MONITOR_OPTIONS), "ServiceMonitor")["spec"]["endpoints"]
    for name, want in options.items():
        have = endpoint.get(name)
        if name == "relabelings":
            have = have[1:]  # after the chart's own `node` relabeling
        if have != want:
            fail(f"serviceMonitor.{name}={want} renders {have}")
    (endpoint,) = one(render({}), "ServiceMonitor")["spec"]["endpoints"]
    absent = [k for k in ("tlsConfig", "basicAuth", "bearerTokenSecret", "metricRelabelings") if k in endpoint]
    if absent or endpoint["scheme"] != "http" or endpoint["honorLabels"] is not False:
        fail(f"default ServiceMonitor endpoint: {endpoint}")
    for bad in ({"serviceMonitor": {"scheme": "tcp"}}, {"serviceMonitor": {"bearerTokenSecret": {"name": "s"}}}):
        if not rejects(bad):
            fail(f"values.schema.json accepted {bad}")
    say(f"ServiceMonitor: {', '.join(options)} reach the endpoint (the operator's CRD schema checks "
        "them next); the schema refuses scheme tcp and a token secret without a key")


def agent_env_of(flag_field: str) -> str:
    """The variable the agent reads for a flag, from its clap definition in agent/src/config.rs."""
    source = (DEPLOY.parent / "agent" / "src" / "config.rs").read_text()
    found = re.search(r'#\[arg\(long, env = "(MESHFIT_\w+)"[^\]]*\]\s*pub ' + flag_field + r":", source)
    if not found:
        fail(f"agent/src/config.rs defines no `{flag_field}` flag with a MESHFIT_* variable")
    return found.group(1)


def token_env(values: dict) -> list[dict]:
    env = one(render(values), "DaemonSet")["spec"]["template"]["spec"]["containers"][0]["env"]
    return [e for e in env if "TOKEN" in e["name"]]


def calibrate_token() -> None:
    want = agent_env_of("calibrate_token")
    if token_env({}):
        fail(f"a token variable is rendered without agent.calibrateTokenSecret: {token_env({})}")
    secret = {"name": "meshfit-calibrate", "key": "token"}
    got = token_env({"agent": {"calibrateTokenSecret": secret}})
    if got != [{"name": want, "valueFrom": {"secretKeyRef": secret}}]:
        fail(f"agent.calibrateTokenSecret={secret} renders {got}, not {want} from that Secret key")
    text = notes({"agent": {"calibrateTokenSecret": secret}})
    if "get secret meshfit-calibrate" not in text or "Authorization: Bearer" not in text:
        fail(f"NOTES.txt does not tell how to POST /v1/calibrate with the Secret's token:\n{text}")
    if "answers 401" not in notes({}):
        fail("NOTES.txt does not say POST /v1/calibrate answers 401 without a token")
    if not rejects({"agent": {"calibrateTokenSecret": {"name": "s"}}}):
        fail("values.schema.json accepted a calibrate token secret without a key")
    say(f"calibrate token: agent.calibrateTokenSecret becomes {want} (the agent's variable) from the "
        "Secret key; NOTES tells how to use it, or that the endpoint answers 401; no key is refused")


def runbook_prefix() -> None:
    def urls(values: dict) -> dict[str, str]:
        groups = one(render(values), "PrometheusRule")["spec"]["groups"]
        return {r["alert"]: r["annotations"]["runbook_url"] for g in groups for r in g["rules"] if "alert" in r}
    shipped = {r["alert"]: r["annotations"]["runbook_url"] for g in yaml.safe_load(RULES.read_text())["groups"]
               for r in g["rules"] if "alert" in r}
    if urls({}) != shipped:
        fail("the default PrometheusRule's runbook URLs differ from the rule file's")
    prefix = "https://wiki.example.com/sre/meshfit"
    for given in (prefix, prefix + "/"):
        got = urls({"prometheusRule": {"runbookUrlPrefix": given}})
        wrong = {a: u for a, u in got.items() if u != f"{prefix}/{a}.md"}
        if wrong or set(got) != set(shipped):
            fail(f"prometheusRule.runbookUrlPrefix={given} renders {wrong or got}")
    moved = one(render({"prometheusRule": {"runbookUrlPrefix": prefix}}), "PrometheusRule")["spec"]
    for group in moved["groups"]:
        for rule in group["rules"]:
            rule.get("annotations", {}).pop("runbook_url", None)
    original = one(render({}), "PrometheusRule")["spec"]
    for group in original["groups"]:
        for rule in group["rules"]:
            rule.get("annotations", {}).pop("runbook_url", None)
    if moved != original:
        fail("prometheusRule.runbookUrlPrefix changed more than the runbook URLs")
    if not rejects({"prometheusRule": {"runbookUrlPrefix": "wiki/meshfit"}}):
        fail("values.schema.json accepted a runbook prefix that is not an http(s) URL")
    say(f"runbook URLs: {len(shipped)} alerts link <prefix>/<alert>.md with prometheusRule.runbookUrlPrefix "
        "(with or without a trailing /), nothing else changes; the default is the rule file's")


def pod_monitor() -> None:
    options = SERVICE_MONITOR_OPTIONS["serviceMonitor"]
    values = {"serviceMonitor": {**options, "enabled": False}, "podMonitor": {"enabled": True}}
    docs = render(values)
    if any(d["kind"] == "ServiceMonitor" for d in docs):
        fail("serviceMonitor.enabled=false with podMonitor on still renders a ServiceMonitor")
    monitor = one(docs, "PodMonitor")
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    service = one(render(SERVICE_MONITOR_OPTIONS), "ServiceMonitor")
    (service_endpoint,) = service["spec"]["endpoints"]
    if endpoint != service_endpoint:
        fail(f"the PodMonitor endpoint {endpoint} is not the ServiceMonitor's {service_endpoint}")
    daemonset = one(docs, "DaemonSet")
    pod_labels = daemonset["spec"]["template"]["metadata"]["labels"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    if any(pod_labels.get(k) != v for k, v in selector.items()) or monitor["spec"]["jobLabel"] not in pod_labels:
        fail(f"the PodMonitor selects {selector} (job from {monitor['spec']['jobLabel']}); the pods have {pod_labels}")
    if monitor["metadata"]["labels"].get("release") != "kube-prometheus-stack":
        fail("the PodMonitor lacks podMonitor.additionalLabels")
    try:
        render({"podMonitor": {"enabled": True}})
    except Exception as e:  # Helm's template `fail`, whatever the binding's class for it
        if "podMonitor.enabled" not in str(e):
            fail(f"both monitors on is refused without naming the values: {e}")
    else:
        fail("serviceMonitor and podMonitor both on renders: every agent would be scraped twice")
    say("PodMonitor: the ServiceMonitor's endpoint on the agent pods, job from app.kubernetes.io/name; "
        "both monitors on is refused by name")


def host_proc_and_volumes() -> None:
    values = {"hostPID": False, "hostProc": {"enabled": True},
              "extraVolumes": [{"name": "certs", "secret": {"secretName": "meshfit-certs"}}],
              "extraVolumeMounts": [{"name": "certs", "mountPath": "/etc/meshfit/certs", "readOnly": True}]}
    if rejects(values):
        fail(f"values.schema.json refuses {values}")
    pod = one(render(values), "DaemonSet")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    if pod["hostPID"] is not False or "--host-proc=/host/proc" not in container["args"]:
        fail(f"hostProc: hostPID {pod['hostPID']}, args {container['args']}")
    if volumes["host-proc"]["hostPath"]["path"] != "/proc" or mounts["host-proc"] != {
            "name": "host-proc", "mountPath": "/host/proc", "readOnly": True}:
        fail(f"hostProc: the host's /proc is not mounted read-only at /host/proc: {volumes} {mounts}")
    if volumes.get("certs") != values["extraVolumes"][0] or mounts.get("certs") != values["extraVolumeMounts"][0]:
        fail(f"extraVolumes/extraVolumeMounts did not reach the pod: {volumes} {mounts}")
    try:
        render({"hostProc": {"enabled": True}})
    except Exception as e:  # Helm's template `fail`
        if "hostPID=false" not in str(e):
            fail(f"hostPID and hostProc both on is refused without saying what to set: {e}")
    else:
        fail("hostPID and hostProc.enabled both on renders")
    for bad in ({"hostProc": {"enabled": True, "mountPath": "/proc"}}, {"extraVolumes": [{"hostPath": {}}]}):
        if not rejects(bad):
            fail(f"values.schema.json accepted {bad}")
    preset = one(render({"agent": {"hostStateDirOwner": "preCreated"}}), "DaemonSet")["spec"]["template"]["spec"]
    state = [v for v in preset["volumes"] if v["name"] == "state"][0]["hostPath"]
    if "initContainers" in preset or state["type"] != "Directory":
        fail(f"hostStateDirOwner=preCreated: init containers {preset.get('initContainers')}, state {state}")
    say("hostProc: hostPID off, host /proc read-only at --host-proc=/host/proc, refused beside hostPID "
        "and at /proc; extraVolumes and extraVolumeMounts reach the pod; preCreated state: no init "
        "container, hostPath type Directory")


def relabel_example() -> None:
    """The values.yaml example must drop something: a regex naming no family is a silent no-op."""
    text = (CHART / "values.yaml").read_text()
    examples = re.findall(r"regex: ([^,}]+), action: drop", text)
    source = "\n".join(p.read_text() for p in (DEPLOY.parent / "agent" / "src" / "metrics").glob("*.rs"))
    families = set(re.findall(r'"(meshfit_[a-z0-9_]+)"', source))
    if not examples:
        fail("values.yaml has no metricRelabelings drop example to check")
    for regex in examples + [SERVICE_MONITOR_OPTIONS["serviceMonitor"]["metricRelabelings"][0]["regex"]]:
        if not any(re.fullmatch(regex.strip(), f) for f in families):
            fail(f"the relabeling example regex {regex!r} drops no family the agent exports "
                 f"(agent/src/metrics: {', '.join(sorted(families))})")
    say(f"metricRelabelings examples {examples} each drop a family the agent exports")


def dockerfile() -> None:
    text = DOCKERFILE.read_text()
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", text, re.M))
    froms = re.findall(r"^FROM (.+)$", text, re.M)
    build, final = froms[0], froms[-1]

    def expand(s: str) -> str:
        return re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), s)
    build, final = expand(build), expand(final)
    if "--platform=$BUILDPLATFORM" not in build:
        fail(f"the build stage `FROM {build}` does not run on the build platform (cross-compiling)")
    base = re.fullmatch(r"nvcr\.io/nvidia/cuda:(\d+)\.\d+\.\d+-runtime-(ubuntu\d+\.\d+)", final)
    if not base:
        fail(f"the final stage `FROM {final}` is not nvcr.io/nvidia/cuda:<version>-runtime-ubuntu<version>")
    debian = re.search(r"-(\w+)(?: AS|\s|$)", build).group(1)
    if GLIBC[debian] > GLIBC[base.group(2)]:
        fail(f"build stage {debian} links glibc {GLIBC[debian]}, newer than {base.group(2)}'s {GLIBC[base.group(2)]}")
    for want in ("docker buildx build --platform linux/amd64,linux/arm64", "TARGETARCH",
                 "CARGO_PROFILE_RELEASE_STRIP"):
        if want not in text:
            fail(f"the Dockerfile has no {want}")
    say(f"Dockerfile: build on $BUILDPLATFORM ({debian}, glibc {'.'.join(map(str, GLIBC[debian]))}) for "
        f"TARGETARCH, stripped; final CUDA {base.group(1)} runtime on {base.group(2)} "
        f"(glibc {'.'.join(map(str, GLIBC[base.group(2)]))})")


def free_port(family: socket.AddressFamily, host: str) -> int:
    with socket.socket(family) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_ready(url: str, agent: subprocess.Popen) -> None:
    for _ in range(100):  # 10 s
        if agent.poll() is not None:
            fail(f"the sim agent for {url} exited with {agent.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    fail(f"{url} not ready within 10 s")


def run_hook(script: str, base: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", script.replace(f"http://meshfit.{NAMESPACE}.svc:9420", base)],
                          capture_output=True, text=True, timeout=60)


def helm_test(agent: str) -> None:
    """The hook's own script, with the Service URL swapped for a loopback one. busybox is not
    here: GNU wget takes the same -q -T -O flags."""
    (pod,) = [d for d in render({}) if is_hook(d)]
    script = pod["spec"]["containers"][0]["args"][0]
    if not shutil.which("wget"):
        fail("no wget here to run the helm test Pod's script")
    families = [(socket.AF_INET, "127.0.0.1", "127.0.0.1")]
    if socket.has_ipv6:
        try:
            free_port(socket.AF_INET6, "::1")
            families.append((socket.AF_INET6, "::1", "[::1]"))
        except OSError:
            say("helm test script: no IPv6 loopback here, IPv4 only")
    for family, host, literal in families:
        base = f"http://{literal}:{free_port(family, host)}"
        with tempfile.TemporaryDirectory() as state:
            argv = [agent, "--backend", "sim", "--profile", "dgx-h100", "--node-name", "hook",
                    f"--listen={base.removeprefix('http://')}", f"--state-dir={state}"]
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_ready(f"{base}/readyz", proc)
                ok = run_hook(script, base)
            finally:
                proc.terminate()
                proc.wait(timeout=10)
        if ok.returncode != 0 or "meshfit_up" not in ok.stdout:
            fail(f"the helm test script fails against a ready agent on {base}: {ok.stdout}{ok.stderr}")
        down = run_hook(script, base)
        if down.returncode == 0:
            fail(f"the helm test script passes with no agent on {base}")
        say(f"helm test script: passes against a ready sim agent on {base}, fails once it is stopped")


def token_against_agent(agent: str) -> None:
    """A sim agent given the token the way the rendered pod gives it (the variable, not a flag)."""
    secret = {"name": "meshfit-calibrate", "key": "token"}
    (variable,) = token_env({"agent": {"calibrateTokenSecret": secret}})
    token = "s3cret-" + str(time.time_ns())
    base = f"http://127.0.0.1:{free_port(socket.AF_INET, '127.0.0.1')}"

    def post(headers: dict) -> int:
        request = urllib.request.Request(f"{base}/v1/calibrate", data=b"", headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status
        except urllib.error.HTTPError as e:
            return e.code
    with tempfile.TemporaryDirectory() as state:
        argv = [agent, "--backend", "sim", "--profile", "dgx-h100", "--node-name", "token",
                f"--listen={base.removeprefix('http://')}", f"--state-dir={state}"]
        env = {"PATH": "/usr/bin:/bin", variable["name"]: token}
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_ready(f"{base}/readyz", proc)
            without, wrong, right = post({}), post({"Authorization": "Bearer nope"}), \
                post({"Authorization": f"Bearer {token}"})
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    # 409: a calibration is already running (the first one starts within the jitter).
    if without != 401 or wrong != 401 or right not in (202, 409):
        fail(f"agent given {variable['name']} as the pod is: POST /v1/calibrate without a token {without}, "
             f"a wrong one {wrong}, the right one {right} (want 401, 401, 202 or 409)")
    say(f"calibrate token: a sim agent given {variable['name']} as the chart sets it answers "
        f"POST /v1/calibrate {right} with the token, 401 without or with a wrong one")


if __name__ == "__main__":
    if sys.argv[1:2] == ["helm-test"] and len(sys.argv) == 3:
        helm_test(sys.argv[2])
        token_against_agent(sys.argv[2])
        raise SystemExit(0)
    if sys.argv[1:]:
        raise SystemExit(__doc__)
    subchart()
    notes_text()
    test_hook()
    priority_class()
    ip_families()
    service_monitor()
    calibrate_token()
    runbook_prefix()
    pod_monitor()
    host_proc_and_volumes()
    relabel_example()
    dockerfile()
