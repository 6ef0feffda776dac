"""The multi-node calibration recipes (issue 12): the chart's fabric CronJob, the sbatch script
and the mpirun script, checked without a cluster, a Slurm or an MPI.

Usage:
  recipes.py chart                       render the chart with calibration.fabric on and off, lint
                                         it, validate every object, check the wiring between them
  recipes.py launch MICROBENCH WORKDIR   shellcheck the scripts; run each recipe under a stand-in
                                         launcher (srun, scontrol, mpirun, the Job controller) to
                                         capture the microbench command line every rank gets;
                                         check its flags against `microbench fabric --help`; then
                                         run every recipe for real with the sim backend on
                                         loopback, 2 nodes x 2 ranks, and check the files written

The stand-in launchers set what the real ones set for each rank (Slurm: SLURM_PROCID,
SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, SLURMD_NODENAME; Open MPI: OMPI_COMM_WORLD_RANK,
_SIZE, _LOCAL_RANK, _LOCAL_SIZE, PMIX_RANK, PMIX_NAMESPACE, and only the variables passed with -x; the Job
controller: JOB_COMPLETION_INDEX, the pod's env with $(VAR) expanded, the downward API). Each
"node" is named by MESHFIT_NODE_NAME, as issue 12 lets several sim nodes share one machine.
They accept only the option spellings the recipes use; a recipe that changes them fails here.
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import helm_python as helm
import yaml

from manifests import CHART, NAMESPACE, key, notes, render, say, validate

DEPLOY = Path(__file__).resolve().parent.parent
SBATCH = DEPLOY / "slurm" / "meshfit-fabric.sbatch"
MPIRUN = DEPLOY / "mpirun" / "meshfit-fabric.sh"
SCRIPTS = (SBATCH, MPIRUN)
STATE = "/var/lib/meshfit-agent"
ON = {"calibration": {"fabric": {"enabled": True}}}
# Everything optional at once: host network, RDMA resources, NCCL env, a results claim, node
# affinity, the CUDA library mount, extra flags.
FULL = {
    "agent": {"cudaLibraryPath": "/opt/cuda-libs", "hostStateDir": "/data/meshfit"},
    "calibration": {"fabric": {
        "enabled": True, "nodes": 16, "gpusPerNode": 4, "port": 23456, "hostNetwork": True,
        "extraResources": {"rdma/rdma_shared_device_a": 1},
        "env": [{"name": "NCCL_IB_HCA", "value": "mlx5_0,mlx5_1"},
                {"name": "NCCL_SOCKET_IFNAME", "value": "eth0"}],
        "podAnnotations": {"k8s.v1.cni.cncf.io/networks": "rdma-net"},
        "resultsClaim": "meshfit-results", "priorityClassName": "low",
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["h100"]}]}]}},
        "extraArgs": ["--seed=7"],
    }},
}
# Sim runs: 2 nodes x 2 ranks, small sizes, a sim profile (a global flag, so it may follow
# the subcommand) and the sim backend (MICROBENCH_BACKEND, the --backend flag's variable).
SIM_NODES, SIM_RANKS = 2, 2
SIM_FLAGS = ["-b", "1M", "-e", "4M", "-f", "2", "-n", "2", "-w", "1", "--profile", "dgx-h100"]
SIM_TIMEOUT_S = 120


def fail(message: str) -> None:
    raise SystemExit(f"recipes: {message}")


# --- the chart ---------------------------------------------------------------------------------

def by_kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def env_of(container: dict) -> dict:
    return {e["name"]: e for e in container.get("env", [])}


def selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def check_wiring(docs: list[dict], values: dict, origin: str) -> None:
    """The CronJob, its headless Service and the agent's objects fit together."""
    fabric = {**yaml.safe_load((CHART / "values.yaml").read_text())["calibration"]["fabric"],
              **values["calibration"]["fabric"]}
    state_dir = values.get("agent", {}).get("hostStateDir", STATE)
    (cron,) = by_kind(docs, "CronJob")
    services = {d["metadata"]["name"]: d for d in by_kind(docs, "Service")}
    job = cron["spec"]["jobTemplate"]["spec"]
    pod = job["template"]["spec"]
    labels = job["template"]["metadata"]["labels"]
    (box,) = pod["containers"]
    env = env_of(box)

    def need(ok: bool, what: str) -> None:
        if not ok:
            fail(f"{origin}: {what}")

    need(cron["spec"]["concurrencyPolicy"] == "Forbid", "CronJob concurrencyPolicy is not Forbid")
    need(job["completionMode"] == "Indexed", "the Job is not Indexed")
    need(job["completions"] == job["parallelism"] == fabric["nodes"],
         f"completions {job['completions']} and parallelism {job['parallelism']} are not nodes={fabric['nodes']}")
    svc = services.get(pod.get("subdomain"))
    need(svc is not None, f"pod subdomain {pod.get('subdomain')!r} names no Service of the chart")
    need(svc["spec"].get("clusterIP") == "None", f"Service {svc['metadata']['name']} is not headless")
    need(svc["spec"].get("publishNotReadyAddresses") is True, "headless Service holds back unready pods")
    need(selects(svc["spec"]["selector"], labels), "headless Service does not select the fabric pods")
    for other in services.values():
        if other is not svc:
            need(not selects(other["spec"]["selector"], labels),
                 f"Service {other['metadata']['name']} (the agent's) would select the fabric pods")
    for monitor in by_kind(docs, "ServiceMonitor"):
        need(not selects(monitor["spec"]["selector"]["matchLabels"], svc["metadata"]["labels"]),
             "the agent's ServiceMonitor would select the fabric Service")
    # Pod i is `<job>-<i>`; the Job is `<cronjob>-<minutes since epoch>` (8 digits until 2160).
    host = f"{cron['metadata']['name']}-{'9' * 8}-{fabric['nodes'] - 1}"
    need(len(host) <= 63, f"the last pod's host name {host} is over 63 characters")
    need(env["JOB_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['job-name']",
         "JOB_NAME does not come from the pod's job-name label")
    need(env.get("MESHFIT_JOB_ID", {}).get("value") == "$(JOB_NAME)",
         "MESHFIT_JOB_ID is not the Job's name: the ranks present no job id at the rendezvous")
    need(env["MASTER_ADDR"]["value"] == f"$(JOB_NAME)-0.{svc['metadata']['name']}",
         f"MASTER_ADDR {env['MASTER_ADDR']['value']} is not pod 0 under the headless Service")
    port = int(env["MASTER_PORT"]["value"])
    need(port == fabric["port"] == svc["spec"]["ports"][0]["port"] == box["ports"][0]["containerPort"],
         "MASTER_PORT, the Service port and the container port differ")
    need(int(env["MESHFIT_WORLD_SIZE"]["value"]) == fabric["nodes"] * fabric["gpusPerNode"],
         "MESHFIT_WORLD_SIZE is not nodes x gpusPerNode")
    need(int(env["MESHFIT_RANKS_PER_POD"]["value"]) == fabric["gpusPerNode"],
         "MESHFIT_RANKS_PER_POD is not gpusPerNode")
    need(box["command"][:2] == ["bash", "-c"] and box["args"][0] == "fabric",
         "the container does not start its ranks through the bash loop running `microbench fabric`")
    need(env["MESHFIT_NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName",
         "MESHFIT_NODE_NAME is not the Kubernetes node name (the agent's hostname label)")
    devices = {"nvidia.com/gpu": str(fabric["gpusPerNode"]),
               **{k: str(v) for k, v in fabric.get("extraResources", {}).items()}}
    for side in ("requests", "limits"):
        got = {k: str(v) for k, v in box["resources"][side].items() if k in devices}
        need(got == devices, f"resources.{side} {got} are not {devices}")
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    need(any(t["topologyKey"] == "kubernetes.io/hostname" and selects(t["labelSelector"]["matchLabels"], labels)
             for t in anti), "no required anti-affinity keeps the pods on distinct nodes")
    need(pod.get("hostNetwork", False) == fabric.get("hostNetwork", False), "hostNetwork not as set")
    if pod.get("hostNetwork"):
        need(pod.get("dnsPolicy") == "ClusterFirstWithHostNet",
             "a host-network pod without ClusterFirstWithHostNet cannot resolve pod 0")
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in box["volumeMounts"]}
    state_flag = [a for a in box["args"] if a.startswith("--state-dir=")]
    need(len(state_flag) == 1, "the container passes no single --state-dir")
    mount = mounts.get(state_flag[0].split("=", 1)[1])
    need(mount is not None and volumes[mount].get("hostPath", {}).get("path") == state_dir,
         f"--state-dir is not the agent's state directory {state_dir} on the node")
    out = [a for a in box["args"] if a.startswith("--out=")]
    need(len(out) == 1, "the container passes no single --out")
    if fabric.get("resultsClaim"):
        claim = [v for v in volumes.values() if v.get("persistentVolumeClaim", {}).get("claimName") == fabric["resultsClaim"]]
        need(len(claim) == 1 and out[0].split("=", 1)[1].startswith(
            next(p for p, n in mounts.items() if n == claim[0]["name"]) + "/"),
             "--out is not on the results claim")
    need(volumes["shm"]["emptyDir"].get("medium") == "Memory", "/dev/shm is not memory-backed")
    for item in fabric.get("env", []):
        need(env.get(item["name"]) == item, f"{item['name']} from calibration.fabric.env is not in the container")


def chart() -> None:
    for values in (ON, FULL):
        report = helm.lint(CHART, values, strict=True, namespace=NAMESPACE)
        findings = [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]
        if findings:
            fail(f"helm lint --strict with calibration.fabric on: {findings}")
    say("helm lint --strict with calibration.fabric on (defaults, and every option set): no warnings")
    with helm.Chart.load(CHART) as loaded:
        for bad in ({"calibration": {"fabric": {"enabled": True, "node": 4}}},
                    {"calibration": {"fabric": {"enabled": True, "nodes": 1}}},
                    {"calibration": {"fabric": {"enabled": True, "maxBytes": "1 GiB"}}}):
            try:
                loaded.validate_schema(bad)
            except helm.HelmValuesError:
                continue
            fail(f"values.schema.json accepted {bad}")
    say("values.schema.json rejects a misspelt calibration.fabric key, one node, a malformed size")
    off = {key(d) for d in render({})}
    if any("fabric" in k for k in off):
        fail(f"calibration.fabric is off by default, yet the chart renders {sorted(k for k in off if 'fabric' in k)}")
    for values, origin in ((ON, "chart (calibration.fabric on)"), (FULL, "chart (calibration.fabric, every option)")):
        docs = render(values)
        added = sorted({key(d) for d in docs} - off)
        if added != [f"CronJob/{NAMESPACE}/meshfit-fabric", f"Service/{NAMESPACE}/meshfit-fabric"]:
            fail(f"{origin}: expected the CronJob and the headless Service beyond the defaults, got {added}")
        validate(docs, origin)
        check_wiring(docs, values, origin)
        say(f"{origin}: Indexed Job of {values['calibration']['fabric'].get('nodes', 2)} pods under a headless "
            "Service, MASTER_ADDR pod 0, GPUs requested, one pod per node, records to the agent's state dir")
    text = notes(ON)
    if "meshfit-fabric" not in text or "create job --from=cronjob/meshfit-fabric" not in text:
        fail(f"NOTES.txt with calibration.fabric on does not name the CronJob:\n{text}")
    if "fabric" in notes({}):
        fail("NOTES.txt mentions the fabric calibration while it is off")
    say("NOTES.txt names the CronJob and how to start a run when on, and says nothing of it when off")


# --- the launch recipes ------------------------------------------------------------------------

RECORDER = """#!/usr/bin/env python3
# Stand-in microbench: records its argv and the variables a rank reads, then exits 0.
import json, os, sys
keep = ("MASTER_ADDR", "MASTER_PORT", "MESHFIT_NODE_NAME", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK",
        "JOB_COMPLETION_INDEX", "MESHFIT_WORLD_SIZE", "MESHFIT_RANKS_PER_POD", "MESHFIT_LOCAL_RANK")
with open(os.environ["RECIPE_ARGV_LOG"], "a") as log:
    log.write(json.dumps({"argv": sys.argv[1:], "env": {k: os.environ[k] for k in keep if k in os.environ}}) + "\\n")
"""

# srun in an allocation of SLURM_NTASKS tasks, SLURM_NTASKS_PER_NODE per node: every task gets
# the caller's environment (srun's --export=ALL) plus its own Slurm variables.
SRUN = """#!/usr/bin/env bash
set -u
while [ $# -gt 0 ]; do
  case $1 in
    --gpu-bind=*|--kill-on-bad-exit=*) shift ;;
    -*) echo "stand-in srun: option $1 not handled (deploy/check/recipes.py)" >&2; exit 2 ;;
    *) break ;;
  esac
done
per=$SLURM_NTASKS_PER_NODE
pids=()
for ((i = 0; i < SLURM_NTASKS; i++)); do
  node=$((i / per))
  SLURM_PROCID=$i SLURM_LOCALID=$((i % per)) SLURM_NODEID=$node SLURMD_NODENAME=sim$node \\
    MESHFIT_NODE_NAME=sim$node "$@" &
  pids+=($!)
done
rc=0
for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
exit $rc
"""

SCONTROL = """#!/usr/bin/env bash
[ "$1 $2" = "show hostnames" ] || { echo "stand-in scontrol: only 'show hostnames' (deploy/check/recipes.py)" >&2; exit 2; }
tr ',' '\\n' <<< "$3"
"""

# Open MPI's mpirun: a rank gets only the variables named with -x (the remote hosts' own
# environment is not the caller's), so a variable the script forgets to pass is missed here.
MPIRUN_STUB = """#!/usr/bin/env bash
set -u
np= per= hostfile= forward=()
while [ $# -gt 0 ]; do
  case $1 in
    -np) np=$2; shift 2 ;;
    --hostfile) hostfile=$2; shift 2 ;;
    --map-by) per=${2#ppr:}; per=${per%:node}; shift 2 ;;
    --bind-to) shift 2 ;;
    -x) forward+=("$2=${!2}"); shift 2 ;;
    -*) echo "stand-in mpirun: option $1 not handled (deploy/check/recipes.py)" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ -n "$np" ] && [ -n "$per" ] && [ -r "$hostfile" ] || { echo "stand-in mpirun: needs -np, --hostfile, --map-by ppr:N:node" >&2; exit 2; }
pids=()
for ((i = 0; i < np; i++)); do
  node=$((i / per))
  env -i HOME="$HOME" RECIPE_ARGV_LOG="${RECIPE_ARGV_LOG:-}" MICROBENCH_BACKEND="${MICROBENCH_BACKEND:-}" \\
    "${forward[@]}" OMPI_COMM_WORLD_RANK=$i OMPI_COMM_WORLD_SIZE=$np \\
    OMPI_COMM_WORLD_LOCAL_RANK=$((i % per)) OMPI_COMM_WORLD_LOCAL_SIZE=$per PMIX_RANK=$i \\
    PMIX_NAMESPACE="prterun-standin-$$@1" MESHFIT_NODE_NAME=sim$node "$@" &
  pids+=($!)
done
rc=0
for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
exit $rc
"""


def stand_ins(work: Path) -> Path:
    bin_dir = work / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, text in (("srun", SRUN), ("scontrol", SCONTROL), ("mpirun", MPIRUN_STUB),
                       ("microbench-recorder", RECORDER)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return bin_dir


def run_ranks(cmds: list[tuple[list[str], dict]], label: str) -> None:
    procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for argv, env in cmds]
    failed = []
    for i, proc in enumerate(procs):
        try:
            out, _ = proc.communicate(timeout=SIM_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            fail(f"{label}: not finished after {SIM_TIMEOUT_S} s")
        if proc.returncode != 0:
            failed.append(f"--- {label} process {i} exited {proc.returncode}:\n{out}")
    if failed:
        fail("\n".join(failed))


def slurm(work: Path, bin_dir: Path, microbench: str, flags: list[str], extra_env: dict) -> Path:
    results = work / "results"
    env = {**os.environ, **extra_env, "PATH": f"{bin_dir}:{os.environ['PATH']}", "MICROBENCH": microbench,
           "MESHFIT_RESULTS": str(results), "SLURM_JOB_ID": "4242", "SLURM_JOB_NUM_NODES": str(SIM_NODES),
           "SLURM_NTASKS": str(SIM_NODES * SIM_RANKS), "SLURM_NTASKS_PER_NODE": str(SIM_RANKS),
           "SLURM_JOB_NODELIST": ",".join(["127.0.0.1"] + [f"sim{n}" for n in range(1, SIM_NODES)]),
           "SLURM_SUBMIT_DIR": str(work), "MASTER_PORT": str(free_port()), "RENDEZVOUS_TIMEOUT": "60"}
    env.pop("MESHFIT_STATE_DIR", None)
    run_ranks([(["bash", str(SBATCH), *flags], env)], f"{SBATCH.relative_to(DEPLOY.parent)} under stand-in srun")
    return results


def mpi(work: Path, bin_dir: Path, microbench: str, flags: list[str], extra_env: dict) -> Path:
    results = work / "results"
    hostfile = work / "hostfile"
    work.mkdir(parents=True, exist_ok=True)
    hostfile.write_text("".join(f"127.0.0.1 slots={SIM_RANKS}  # sim{n}\n" for n in range(SIM_NODES)))
    env = {**os.environ, **extra_env, "PATH": f"{bin_dir}:{os.environ['PATH']}", "MICROBENCH": microbench,
           "MESHFIT_RESULTS": str(results), "GPUS_PER_NODE": str(SIM_RANKS), "MASTER_PORT": str(free_port()),
           "RENDEZVOUS_TIMEOUT": "60"}
    env.pop("MESHFIT_STATE_DIR", None)
    run_ranks([(["bash", str(MPIRUN), str(hostfile), *flags], env)],
              f"{MPIRUN.relative_to(DEPLOY.parent)} under stand-in mpirun")
    return results


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def k8s_pods(work: Path, overrides: dict) -> list[tuple[list[str], dict]]:
    """The rendered Indexed Job's pods as processes: the container's command and args with the
    pod env (downward API and $(VAR) expanded), each node's hostPath a directory of its own,
    pod 0's DNS name 127.0.0.1. `microbench` is whatever the caller's PATH finds."""
    fabric = {"enabled": True, "nodes": SIM_NODES, "gpusPerNode": SIM_RANKS, "port": free_port(),
              "rendezvousTimeoutSeconds": 60, **overrides}
    (cron,) = by_kind(render({"calibration": {"fabric": fabric}}), "CronJob")
    job_name = f"{cron['metadata']['name']}-29400000"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (box,) = pod["containers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    pods = []
    for index in range(SIM_NODES):
        node_root = work / f"sim{index}"
        env = {"JOB_COMPLETION_INDEX": str(index)}
        for item in box["env"]:
            if "value" in item:
                value = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), item["value"])
            else:
                path = item["valueFrom"]["fieldRef"]["fieldPath"]
                value = {"metadata.labels['job-name']": job_name, "spec.nodeName": f"sim{index}"}[path]
            env[item["name"]] = value
        if env["MASTER_ADDR"] != f"{job_name}-0.{pod['subdomain']}":
            fail(f"k8s: MASTER_ADDR {env['MASTER_ADDR']} is not pod 0's name {job_name}-0.{pod['subdomain']}")
        env["MASTER_ADDR"] = "127.0.0.1"  # no cluster DNS here; the name itself is checked above
        argv = [re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), a)
                for a in box["command"] + box["args"]]
        # A path in the container becomes the directory standing for its volume: a node's
        # own for hostPath and emptyDir, one shared by all for the claim.
        local = {}
        for mount in box["volumeMounts"]:
            source = volumes[mount["name"]]
            local[mount["mountPath"]] = node_root / mount["name"] if "persistentVolumeClaim" not in source else work / "claim"
            local[mount["mountPath"]].mkdir(parents=True, exist_ok=True)

        def on_host(arg: str) -> str:
            flag, eq, path = arg.rpartition("=") if arg.startswith("--") else ("", "", arg)
            for inside in sorted(local, key=len, reverse=True):
                if path == inside or path.startswith(inside + "/"):
                    return f"{flag}{eq}{local[inside]}{path[len(inside):]}"
            return arg

        pods.append(([on_host(a) for a in argv], env))
    return pods


def k8s(work: Path, microbench: str, overrides: dict, extra_env: dict) -> Path:
    """Runs the pods, with `microbench` on their PATH (the image's /usr/local/bin)."""
    image_bin = work / "image-bin"
    image_bin.mkdir(parents=True, exist_ok=True)
    (image_bin / "microbench").unlink(missing_ok=True)
    (image_bin / "microbench").symlink_to(microbench)
    base = {"PATH": f"{image_bin}:{os.environ['PATH']}", "HOME": os.environ.get("HOME", "/tmp"), **extra_env}
    run_ranks([(argv, {**base, **env}) for argv, env in k8s_pods(work, overrides)],
              "the chart's fabric Indexed Job, its pods as processes")
    return work


def help_flags(microbench: str) -> tuple[set[str], dict[str, set[str]]]:
    done = subprocess.run([microbench, "fabric", "--help"], capture_output=True, text=True)
    if done.returncode != 0:
        first = (done.stderr or done.stdout).strip().splitlines()[:2]
        fail(f"`{microbench} fabric --help` exited {done.returncode} ({' / '.join(first)}): microbench has no "
             "`fabric` subcommand yet (issue 12), so the flags the recipes in deploy/slurm, deploy/mpirun "
             "and the chart's CronJob pass to it cannot be checked. Build microbench with it, or hold back "
             "the recipes.")
    flags, values = set(), {}
    current = None
    for line in done.stdout.splitlines():
        m = re.match(r"\s+((?:-\w, )?--[\w-]+)", line)
        if m:
            names = re.findall(r"--?[\w-]+", m.group(1))
            flags.update(names)
            current = names[-1]
        for group in re.findall(r"\[possible values: ([^\]]+)\]", line):
            values.setdefault(current, set()).update(v.strip() for v in group.split(","))
        m = re.match(r"\s+- ([\w-]+):", line)  # long help lists possible values one per line
        if m and current:
            values.setdefault(current, set()).add(m.group(1))
    return flags, values


def check_flags(argv: list[str], flags: set[str], values: dict, origin: str) -> None:
    if argv[:1] != ["fabric"]:
        fail(f"{origin}: runs `microbench {' '.join(argv[:1])}`, not `microbench fabric`")
    for arg in argv[1:]:
        if not arg.startswith("-"):
            continue
        name, _, value = arg.partition("=")
        if name not in flags:
            fail(f"{origin} passes {name}, which `microbench fabric --help` does not list; it lists "
                 f"{', '.join(sorted(flags))}")
        if value and name in values and value not in values[name]:
            fail(f"{origin} passes {arg}; `microbench fabric --help` allows {', '.join(sorted(values[name]))}")


def launch(microbench: str, work: Path) -> None:
    for script in SCRIPTS:
        subprocess.run(["bash", "-n", str(script)], check=True)
    subprocess.run([str(Path(sys.executable).parent / "shellcheck"), "--external-sources", *map(str, SCRIPTS)],
                   check=True)
    say(f"bash -n and shellcheck: {', '.join(str(s.relative_to(DEPLOY)) for s in SCRIPTS)}: no findings")

    # 1. What each rank is given, through the stand-in launchers and a recording microbench.
    bin_dir = stand_ins(work)
    recorder = str(bin_dir / "microbench-recorder")
    recorded = {}
    runners = {"slurm": lambda w, mb, env: slurm(w, bin_dir, mb, [], env),
               "mpirun": lambda w, mb, env: mpi(w, bin_dir, mb, [], env),
               "k8s": lambda w, mb, env: k8s(w, mb, {}, env)}
    for name, runner in runners.items():
        log = work / f"argv-{name}.jsonl"
        runner(work / f"record-{name}", recorder, {"RECIPE_ARGV_LOG": str(log)})
        ranks = [json.loads(line) for line in log.read_text().splitlines()]
        if len(ranks) != SIM_NODES * SIM_RANKS:
            fail(f"{name}: {len(ranks)} ranks started, expected {SIM_NODES * SIM_RANKS}")
        states = {r["env"]["MESHFIT_NODE_NAME"]: {a for a in r["argv"] if a.startswith("--state-dir=")} for r in ranks}
        if len({frozenset(s) for s in states.values()}) != SIM_NODES or any(len(s) != 1 for s in states.values()):
            fail(f"{name}: each node needs its own single --state-dir, got {states}")
        if {r["env"].get("MASTER_ADDR") for r in ranks} != {"127.0.0.1"} or len({r["env"].get("MASTER_PORT") for r in ranks}) != 1:
            fail(f"{name}: ranks disagree on MASTER_ADDR:MASTER_PORT or miss them: {[r['env'] for r in ranks]}")
        recorded[name] = ranks[0]["argv"]
    say("stand-in srun, mpirun and Job controller: every rank gets MASTER_ADDR:MASTER_PORT of rank 0's host "
        "and its node its own --state-dir")

    # 2. Those flags against the subcommand's own help.
    flags, values = help_flags(microbench)
    for name, argv in recorded.items():
        check_flags(argv, flags, values, {"slurm": str(SBATCH.relative_to(DEPLOY.parent)),
                                          "mpirun": str(MPIRUN.relative_to(DEPLOY.parent)),
                                          "k8s": "the chart's fabric CronJob"}[name])
        # clap parses every flag and value before it prints help: microbench's own parsers
        # (sizes, seconds, --launcher) judge what the recipe passes.
        done = subprocess.run([microbench, *argv, "--help"], capture_output=True, text=True)
        if done.returncode != 0:
            fail(f"{name}: `microbench {' '.join(argv)}` is refused by microbench: {done.stderr.strip()}")
        say(f"{name}: microbench {' '.join(argv)}: every flag in `microbench fabric --help`, every value parsed")

    # 3. The recipes for real, sim backend on loopback: the ranks meet and the files land.
    sim = {"MICROBENCH_BACKEND": "sim"}
    for name, runner in (("slurm", slurm), ("mpirun", mpi)):
        results = runner(work / f"sim-{name}", bin_dir, microbench, SIM_FLAGS, sim)
        check_results(name, results)
    small = {"minBytes": "1M", "maxBytes": "4M", "iters": 2, "warmupIters": 1, "extraArgs": ["--profile", "dgx-h100"]}
    check_results("k8s", k8s(work / "sim-k8s", microbench, small, sim))


def check_results(name: str, root: Path) -> None:
    """Each node's fabric.jsonl in its own directory, and the job-wide file, hold inter-node records."""
    node_files = sorted(p for p in root.rglob("fabric.jsonl"))
    job_files = sorted(p for p in root.rglob("*.jsonl") if p.name != "fabric.jsonl")
    if len(node_files) != SIM_NODES:
        fail(f"{name}: expected a fabric.jsonl per node ({SIM_NODES}), found {[str(p) for p in node_files]}")
    if len(job_files) != 1:
        fail(f"{name}: expected one job-wide file from rank 0, found {[str(p) for p in job_files]}")
    for path in node_files + job_files:
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if not any(r.get("scope") == "inter_node" for r in records):
            fail(f"{name}: {path} holds no inter_node record")
        # A node's file is the one its agent exports: its pairs must name it as one end.
        (node,) = [part for part in path.parts if re.fullmatch(r"sim\d+", part)] or [None]
        if path in node_files and not any(
                r.get("kind") == "send_recv" and node in (r.get("node"), r.get("peer_node")) for r in records):
            fail(f"{name}: {path} has no pairwise send_recv record with {node} at one end")
    say(f"{name}: sim run of {SIM_NODES} nodes x {SIM_RANKS} ranks on loopback: a fabric.jsonl per node and "
        f"the job-wide {job_files[0].name}, inter_node records in each, each node's pairs in its own file")


if __name__ == "__main__":
    if sys.argv[1:] == ["chart"]:
        chart()
    elif len(sys.argv) == 4 and sys.argv[1] == "launch":
        launch(sys.argv[2], Path(sys.argv[3]))
    else:
        raise SystemExit(__doc__)
