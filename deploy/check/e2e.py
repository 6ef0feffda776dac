"""The whole chain on this machine: sim agents, a real Prometheus with the shipped rules, every
dashboard query, the alerts, and the tuner reading Prometheus.

Usage: e2e.py AGENT TUNER WORK_DIR PANELS_JSON [--fleet small|screenshots]

`agent --backend sim` nodes of two GPU models are scraped by a Prometheus on 127.0.0.1 that
loads deploy/helm/meshfit/rules/meshfit.rules.yaml. The small fleet (the default, for CI): H100
nodes h1-h6 and A100 nodes a1-a3, where h4 has half the NVLinks of GPU 3, h5's GPUs are busy
with a job, h6's calibration fails, and a3 has a downtrained PCIe link, a down NIC and a slow
GPU. The screenshots fleet: 48 H100 and 16 A100 nodes with a few faults of each kind, sampled
and scraped less often so that 64 agents stay light on two cores. Checks, in order:
  - every target of every dashboard panel (repeated panels once per value) and every annotation
    query returns data, with the dashboards' variables expanded the way Grafana would on first
    load (the node drill-down opened on the degraded node, as from a click in the fleet view).
    One exception: a panel reading meshfit_nominal_busbw_bytes_per_second may be empty while
    the agent does not export that gauge yet, and then the check says so;
  - the nodes with NVLinks down, and only they, are below 85% in the "Nodes below the fleet"
    panel;
  - each faulty node's alerts fire (the NVLink node's busbw and NVLink alerts, the failing
    node's MeshfitNeverCalibrated...), and no other alert fires or is pending: healthy A100s,
    with less busbw and fewer NVLinks than the H100s, are compared with A100s only and stay
    quiet, and the busy node, kept from calibrating by a job for minutes rather than a week,
    raises nothing;
  - `tuner recommend --prometheus`, scoped to the measured H100 nodes, flags the degraded node;
  - (small fleet) the dashboards over two clusters: a second Prometheus scrapes the same agents
    twice, with the target label cluster="east" and cluster="west", so that every node is in both
    clusters under one host name, the case where a join or grouping without `cluster` merges two
    nodes or fails on duplicates. Every query of both dashboards returns data with $cluster All
    and with $cluster east; with east no series of west comes back; with All every series that
    names a node names its cluster too, and "Nodes below the fleet" lists each measured node
    once per cluster.
The first Prometheus sets no `cluster` label, as a single Prometheus does: the $cluster
variable then has no values and stands at All, whose `.*` matches series without the label.
Results of every panel and annotation of the first go to PANELS_JSON for render_dashboards.py.

The rules are loaded as shipped except for timing: every group evaluates at each scrape and
alerts have no `for:` hold, so that a check takes seconds rather than the half hour the hold asks
for (and the failing node alerts at once rather than after a day).
All servers listen on 127.0.0.1; every process started here is stopped on the way out.
"""
import argparse
import json
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml

DEPLOY = Path(__file__).resolve().parent.parent
RULES = DEPLOY / "helm" / "meshfit" / "rules" / "meshfit.rules.yaml"
DASHBOARDS = sorted((DEPLOY / "helm" / "meshfit" / "dashboards").glob("*.json"))
BELOW_FLEET_PANEL = "Nodes below the fleet"
BELOW_FLEET = 0.85
# The second Prometheus's clusters: the same agents scraped once under each.
CLUSTERS = ("east", "west")
# Per kind of node: agent flags, and the alerts it must fire (every other node fires none).
KINDS = {
    "healthy": ([], set()),
    "nvlink": (["--fault", "nvlink-degraded:gpu=3"], {"MeshfitCollectiveBusbwBelowFleet", "MeshfitNvlinkInactive"}),
    # Busy for minutes, not the week MeshfitCalibrationBlockedBusy waits for (the rule's own
    # window, which dropping `for:` does not shorten): a node kept busy by jobs stays quiet.
    "busy": (["--busy", "0,1,2,3,4,5,6,7"], set()),
    "failing": (["--fault", "panic:after=0"], {"MeshfitNeverCalibrated"}),
    "links": (["--fault", "pcie-downtrained:gpu=2", "--fault", "nic-down:nic=1", "--fault", "slow-gpu:gpu=5,factor=0.7"],
              {"MeshfitPcieLinkDowntrained", "MeshfitGemmBelowFleet"}),
}


@dataclass
class Node:
    name: str
    profile: str
    kind: str = "healthy"

    @property
    def measured(self) -> bool:
        return self.kind not in ("busy", "failing")


@dataclass
class Fleet:
    nodes: list[Node]
    # The NVLink-degraded node the drill-down opens on and the tuner must flag.
    degraded: str
    # Measured nodes of one model for the tuner, 8 GPUs each; their count must fit a 70B layout.
    tuner_nodes: list[str]
    scrape_s: int
    sample_s: int
    range_s: int
    step_s: int
    busy_retry_s: int
    # History gathered after the second calibration before the panels are queried.
    settle_s: int
    # Also check the dashboards over two clusters (a second Prometheus; see the module doc).
    two_clusters: bool = False

    @property
    def rate_interval(self) -> str:
        # Grafana's $__rate_interval: max(step + scrape interval, 4 x scrape interval).
        return f"{max(self.step_s + self.scrape_s, 4 * self.scrape_s)}s"


def small_fleet() -> Fleet:
    nodes = [Node(f"h{i}", "dgx-h100") for i in (1, 2, 3)] + [
        Node("h4", "dgx-h100", "nvlink"), Node("h5", "dgx-h100", "busy"), Node("h6", "dgx-h100", "failing")]
    nodes += [Node("a1", "dgx-a100"), Node("a2", "dgx-a100"), Node("a3", "dgx-a100", "links")]
    return Fleet(nodes, "h4", ["h1", "h2", "h3", "h4"], scrape_s=1, sample_s=1, range_s=60, step_s=2, busy_retry_s=2,
                 settle_s=4, two_clusters=True)


def screenshots_fleet() -> Fleet:
    """64 nodes: what a fleet view is for. A few of each fault, spread so none sits at an edge."""
    kinds = {"h07": "nvlink", "h15": "busy", "h16": "busy", "h17": "busy", "h31": "links", "h44": "failing",
             "a05": "nvlink", "a11": "busy"}
    nodes = [Node(f"h{i:02}", "dgx-h100", kinds.get(f"h{i:02}", "healthy")) for i in range(1, 49)]
    nodes += [Node(f"a{i:02}", "dgx-a100", kinds.get(f"a{i:02}", "healthy")) for i in range(1, 17)]
    # Two minutes of history after the second run, so that the time panels show more than its edge.
    return Fleet(nodes, "h07", [f"h{i:02}" for i in range(1, 9)], scrape_s=5, sample_s=10, range_s=300, step_s=5,
                 busy_retry_s=20, settle_s=120)


def say(text: str) -> None:
    print(f"   {text}", flush=True)


class Processes:
    """Every process this check starts; `stop` ends them all, by their own ids."""

    def __init__(self) -> None:
        self.running: list[tuple[str, subprocess.Popen]] = []

    def start(self, name: str, argv: list[str], log: Path) -> subprocess.Popen:
        with log.open("w") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.running.append((name, proc))
        return proc

    def stop(self) -> None:
        for _, proc in self.running:
            if proc.poll() is None:
                proc.terminate()
        for name, proc in self.running:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                print(f"{name} ignored SIGTERM for 5 s; killing it", file=sys.stderr)
                proc.kill()
                proc.wait(timeout=5)


def wait_until(what: str, probe, timeout_s: float, every_s: float = 0.25):
    """probe() until it returns something truthy, at most timeout_s; fails naming `what`."""
    deadline = time.monotonic() + timeout_s
    for _ in range(int(timeout_s / every_s) + 1):
        result = probe()
        if result:
            return result
        if time.monotonic() > deadline:
            break
        time.sleep(every_s)
    raise SystemExit(f"e2e: gave up after {timeout_s:.0f} s waiting for {what}")


def http_get(url: str, timeout_s: float = 5) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, ""


def free_port() -> int:
    # The port is free now; Prometheus binds it a moment later (nothing else here competes).
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def runs(address: str) -> float:
    """Calibration runs the agent has ended, whatever their result."""
    text = http_get(f"http://{address}/metrics")[1]
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("meshfit_calibration_runs_total{"))


def start_agents(procs: Processes, agent: str, work: Path, token: str, fleet: Fleet) -> dict[str, str]:
    addresses = {}
    for seed, node in enumerate(fleet.nodes):
        log = work / f"agent-{node.name}.log"
        argv = [agent, "--backend", "sim", "--profile", node.profile, "--node-name", node.name,
                "--listen", "127.0.0.1:0", "--state-dir", str(work / node.name), "--seed", str(seed),
                "--jitter", "0s", "--interval", "1h", "--sample-interval", f"{fleet.sample_s}s",
                "--busy-retry", f"{fleet.busy_retry_s}s", "--calibrate-token", token, *KINDS[node.kind][0]]
        proc = procs.start(f"agent {node.name}", argv, log)

        def bound(log=log, proc=proc, node=node.name):
            if proc.poll() is not None:
                raise SystemExit(f"e2e: agent {node} exited ({proc.returncode}):\n{log.read_text()}")
            found = re.search(r"listening on http://(127\.0\.0\.1:\d+)", log.read_text())
            return found and found.group(1)

        addresses[node.name] = wait_until(f"agent {node.name} to log its address", bound, 30)
    for node in fleet.nodes:
        address = addresses[node.name]
        wait_until(f"agent {node.name} /readyz", lambda a=address: http_get(f"http://{a}/readyz")[0] == 200, 30)
        # A first run ended, whatever its result: busy and failing nodes never succeed.
        wait_until(f"agent {node.name} to end its first calibration", lambda a=address: runs(a) > 0, 120)
    faults = ", ".join(f"{n.name} {n.kind}" for n in fleet.nodes if n.kind != "healthy")
    models = ", ".join(f"{sum(1 for n in fleet.nodes if n.profile == p)} {p}" for p in dict.fromkeys(n.profile for n in fleet.nodes))
    say(f"{len(addresses)} sim agents ({models}) ran their first calibration; faults: {faults}")
    return addresses


def calibrate_again(addresses: dict[str, str], token: str) -> None:
    """A second run on every node while Prometheus watches, so that the live NVLink counters move,
    the traffic panels draw a rate rather than a flat line and calibration annotations have runs
    to mark (busy nodes skip it, failing ones fail it)."""
    before = {node: runs(address) for node, address in addresses.items()}
    for node, address in addresses.items():
        request = urllib.request.Request(f"http://{address}/v1/calibrate", method="POST",
                                         headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                status = response.status
        except urllib.error.HTTPError as e:
            status = e.code
        # 409: a busy node is in one of its own retries at that moment; its next one counts.
        if status // 100 != 2 and status != 409:
            raise SystemExit(f"e2e: POST /v1/calibrate on {node}: {status}")
    for node, address in addresses.items():
        wait_until(f"the second calibration on {node}", lambda a=address, n=node: runs(a) > before[n], 120)
    say("second calibration on every node done (POST /v1/calibrate)")


def test_rules(work: Path, scrape_s: int) -> Path:
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        group["interval"] = f"{scrape_s}s"
        for rule in group["rules"]:
            rule.pop("for", None)
    path = work / "rules.yaml"
    path.write_text(yaml.safe_dump(rules, sort_keys=False))
    return path


def start_prometheus(procs: Processes, work: Path, targets: list[str], scrape_s: int,
                     clusters: tuple[str, ...] = ()) -> str:
    """A Prometheus in `work` scraping the targets with the shipped rules; with `clusters`, the
    targets once under each, with the target label `cluster`."""
    work.mkdir(exist_ok=True)
    static = [{"targets": targets, "labels": {"cluster": c}} for c in clusters] or [{"targets": targets}]
    config = {
        "global": {"scrape_interval": f"{scrape_s}s", "evaluation_interval": f"{scrape_s}s"},
        "rule_files": [str(test_rules(work, scrape_s))],
        "scrape_configs": [{"job_name": "meshfit", "static_configs": static}],
    }
    (work / "prometheus.yml").write_text(yaml.safe_dump(config))
    address = f"127.0.0.1:{free_port()}"
    log = work / "prometheus.log"
    proc = procs.start(f"prometheus {work.name}", [
        "prometheus", f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={work / 'tsdb'}",
        f"--web.listen-address={address}", "--log.level=warn"], log)

    def ready():
        if proc.poll() is not None:
            raise SystemExit(f"e2e: prometheus exited ({proc.returncode}):\n{log.read_text()}")
        return http_get(f"http://{address}/-/ready")[0] == 200

    wait_until("Prometheus to be ready", ready, 60)
    as_clusters = f" once as each of the clusters {', '.join(clusters)}" if clusters else " (no cluster label)"
    say(f"Prometheus {address} scraping {len(targets)} agents{as_clusters} every {scrape_s} s, "
        f"rules from {RULES.relative_to(DEPLOY.parent)} (group interval {scrape_s} s, no for: hold)")
    return address


class Prometheus:
    def __init__(self, address: str, fleet: Fleet) -> None:
        self.base = f"http://{address}/api/v1"
        self.step_s = fleet.step_s

    def get(self, path: str, **params) -> dict:
        status, body = http_get(f"{self.base}/{path}?{urllib.parse.urlencode(params, doseq=True)}", 15)
        reply = json.loads(body) if body else {}
        if status != 200 or reply.get("status") != "success":
            raise SystemExit(f"e2e: Prometheus {path} {params}: {status} {body[:500]}")
        return reply["data"]

    def instant(self, expr: str) -> list[dict]:
        return self.get("query", query=expr)["result"]

    def range(self, expr: str, start: float, end: float) -> list[dict]:
        return self.get("query_range", query=expr, start=start, end=end, step=self.step_s)["result"]

    def label_values(self, query: str) -> list[str]:
        found = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\)\s*", query)
        if not found:
            raise SystemExit(f"e2e: variable query {query!r} is not label_values(selector, label)")
        selector, label = found.groups()
        series = self.get("series", **{"match[]": selector})
        return sorted({s[label] for s in series if label in s}, key=natural)


def natural(text: str):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def prometheus_escape(value: str) -> str:
    """Grafana's regex escaping of a multi-value variable for Prometheus: the regex's special
    characters get a backslash, itself doubled inside PromQL's string (a space or `-` stays)."""
    return re.sub(r"([$^*{}\[\]'+?.()|])", r"\\\\\1", value.replace("\\", "\\\\\\\\"))


def interpolate(text: str, variables: dict[str, list[str]], rate_interval: str = "") -> str:
    """Grafana's interpolation for Prometheus: one value as is, several as a regex alternation."""
    def value(match):
        name = match.group(1) or match.group(2)
        if name == "__rate_interval":
            return rate_interval
        if name not in variables:
            return match.group(0)
        values = variables[name]
        return values[0] if len(values) == 1 else "(" + "|".join(prometheus_escape(v) for v in values) + ")"
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, text)


def resolve_variables(prom: Prometheus, board: dict, chosen_by_user: dict[str, str | list[str]]
                      ) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Each query variable's values on first load: its saved current value, All, or with no saved
    value the first option, as Grafana picks; `chosen_by_user` as if picked in the URL. A
    variable with All and no options at all (the `cluster` label where no Prometheus sets it)
    stands at All, as Grafana's does. Returns what each variable interpolates to (All as its
    allValue where it has one, as Grafana sends it) and the options chosen (a repeated panel's)."""
    scope: dict[str, list[str]] = {}
    chosen_options: dict[str, list[str]] = {}
    for var in board["templating"]["list"]:
        if var["type"] != "query":
            continue
        query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        options = prom.label_values(interpolate(query, scope))
        if not options and not var.get("includeAll"):
            raise SystemExit(f"e2e: {board['title']}: variable ${var['name']} has no values ({query})")
        current = chosen_by_user.get(var["name"], var.get("current", {}).get("value", "$__all"))
        current = current if isinstance(current, list) else [current]
        if current == [""]:
            current = options[:1]
        if "$__all" in current or not options:
            chosen = options
            values = [var["allValue"]] if var.get("allValue") else options
        else:
            chosen = values = [v for v in current if v in options]
        if not values:
            raise SystemExit(f"e2e: {board['title']}: ${var['name']} default {current} is not among {options}")
        scope[var["name"]], chosen_options[var["name"]] = values, chosen
    return scope, chosen_options


def run_query(prom: Prometheus, what: str, expr: str, instant: bool, end: float, range_s: int) -> list[dict]:
    data = prom.instant(expr) if instant else prom.range(expr, end - range_s, end)
    if not data:
        raise SystemExit(f"e2e: {what} returned no data:\n  {expr}")
    return data


def run_panels(prom: Prometheus, board: dict, fleet: Fleet, chosen: dict[str, str | list[str]] | None = None
               ) -> tuple[list[dict], list[dict]]:
    variables, options = resolve_variables(prom, board, {"hostname": fleet.degraded, **(chosen or {})})
    end = time.time()
    results = []
    for panel in board["panels"]:
        repeat = panel.get("repeat")
        for value in options[repeat] if repeat else [None]:
            scope = dict(variables, **({repeat: [value]} if repeat else {}))
            instance = {"panel": panel, "title": interpolate(panel["title"], scope), "targets": []}
            for target in panel["targets"]:
                expr = interpolate(target["expr"], scope, fleet.rate_interval)
                what = f"{board['title']} / {instance['title']} target {target['refId']}"
                data = run_query(prom, what, expr, target.get("instant", False), end, fleet.range_s)
                instance["targets"].append({"refId": target["refId"], "expr": expr, "data": data})
            results.append(instance)
    annotations = []
    for annotation in board["annotations"]["list"]:
        if "expr" not in annotation:
            continue
        expr = interpolate(annotation["expr"], variables, fleet.rate_interval)
        data = run_query(prom, f"{board['title']} annotation {annotation['name']}", expr, False, end, fleet.range_s)
        annotations.append({"annotation": annotation, "expr": expr, "data": data})
    queries = sum(len(r["targets"]) for r in results)
    say(f"{board['title']}: {queries} queries in {len(results)} panels (repeats included) and {len(annotations)} "
        f"annotation queries; {', '.join(f'${k}={v[0] if len(v) == 1 else len(v)}' for k, v in variables.items())}"
        f"{' (clusters: ' + ', '.join(options['cluster']) + ')' if options.get('cluster') else ' (no cluster label)'}")
    return results, annotations


def check_below_fleet(results: list[dict], fleet: Fleet) -> None:
    (panel,) = [r for r in results if r["title"] == BELOW_FLEET_PANEL]
    ratios = {s["metric"]["hostname"]: float(s["value"][1]) for s in panel["targets"][0]["data"]}
    below = sorted(node for node, ratio in ratios.items() if ratio < BELOW_FLEET)
    measured = {n.name for n in fleet.nodes if n.measured}
    want = sorted(n.name for n in fleet.nodes if n.kind == "nvlink")
    if below != want or set(ratios) != measured:
        raise SystemExit(f"e2e: \"{BELOW_FLEET_PANEL}\" busbw ratios {ratios}: expected only {want} under "
                         f"{BELOW_FLEET}, among {sorted(measured)}")
    say(f"\"{BELOW_FLEET_PANEL}\": busbw ratio to the model's median, lowest "
        + ", ".join(f"{n} {r:.2f}" for n, r in sorted(ratios.items(), key=lambda i: i[1])[:len(want) + 2])
        + f"; only {', '.join(want)} under {BELOW_FLEET}")


def check_two_clusters(prom: Prometheus, fleet: Fleet) -> None:
    """Both dashboards over the same fleet scraped as two clusters (see the module doc)."""
    measured = {n.name for n in fleet.nodes if n.measured}
    for path in DASHBOARDS:
        board = json.loads(path.read_text())
        for pick in (["$__all"], [CLUSTERS[0]]):
            results, annotations = run_panels(prom, board, fleet, {"cluster": pick})
            series = [(f"{r['title']} target {t['refId']}", s["metric"]) for r in results for t in r["targets"]
                      for s in t["data"]]
            series += [(f"annotation {a['annotation']['name']}", s["metric"]) for a in annotations for s in a["data"]]
            if pick == ["$__all"]:
                bad = [(w, m) for w, m in series if "hostname" in m and "cluster" not in m]
                what = "names a node but not its cluster"
            else:
                bad = [(w, m) for w, m in series if m.get("cluster", pick[0]) != pick[0]]
                what = f"is of another cluster than ${{cluster}}={pick[0]}"
            if bad:
                raise SystemExit(f"e2e: {board['title']}, $cluster={pick[0]}: {len(bad)} series {what}, e.g. "
                                 + "; ".join(f"{w}: {m}" for w, m in bad[:3]))
            below = [r for r in results if r["title"] == BELOW_FLEET_PANEL]
            if below and pick == ["$__all"]:
                rows = sorted((s["metric"]["cluster"], s["metric"]["hostname"]) for s in below[0]["targets"][0]["data"])
                want = sorted((c, n) for c in CLUSTERS for n in measured)
                if rows != want:
                    raise SystemExit(f"e2e: \"{BELOW_FLEET_PANEL}\" over two clusters: rows {rows}, expected {want}")
    say(f"two clusters ({', '.join(CLUSTERS)}, every node in both): every query of both dashboards returns data "
        f"with $cluster All and {CLUSTERS[0]}; {CLUSTERS[0]} returns none of {CLUSTERS[1]}; under All every "
        f"node's series keeps its cluster and \"{BELOW_FLEET_PANEL}\" has {2 * len(measured)} rows")


def check_alerts(prom: Prometheus, fleet: Fleet) -> None:
    expected = {n.name: KINDS[n.kind][1] for n in fleet.nodes}

    def firing_as_expected():
        alerts = prom.get("alerts")["alerts"]
        firing: dict[str, set[str]] = {}
        for a in alerts:
            if a["state"] == "firing":
                firing.setdefault(a["labels"].get("hostname", ""), set()).add(a["labels"]["alertname"])
        return alerts if all(want <= firing.get(node, set()) for node, want in expected.items()) else None

    alerts = wait_until("each faulty node's alerts to fire", firing_as_expected, 60)
    unexpected = [a for a in alerts if a["labels"]["alertname"] not in expected.get(a["labels"].get("hostname"), set())]
    if unexpected:
        raise SystemExit("e2e: unexpected alerts: " + "; ".join(f"{a['labels']} {a['state']}" for a in unexpected))
    fired = sorted({(a["labels"]["hostname"], a["labels"]["alertname"]) for a in alerts})
    say("alerts: " + ", ".join(f"{n} {a}" for n, a in fired) + "; none for any other node")


def check_tuner(tuner: str, address: str, fleet: Fleet) -> None:
    """`tuner recommend --prometheus` names the degraded node and ranks with it: with the
    default (slowest-node) aggregate a TP=8 layout pays for the halved NVLink, and
    `--exclude-degraded` drops the node, prices the same layout faster and states what keeping it
    costs. Scoped to measured H100 nodes: the tuner prices one GPU model at a time."""
    if not tuner:
        raise SystemExit("e2e: the workspace has no `tuner` binary")
    selector = '{hostname=~"' + "|".join(fleet.tuner_nodes) + '"}'

    def recommend(*extra: str) -> dict:
        argv = [tuner, "recommend", "--model", "70b", "--gpus", str(8 * len(fleet.tuner_nodes)), "--tp", "8",
                "--prometheus", f"http://{address}", "--selector", selector, "--format", "json", *extra]
        run = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if run.returncode != 0:
            raise SystemExit(f"e2e: {' '.join(argv)} exited {run.returncode}:\n{run.stderr}")
        return json.loads(run.stdout)

    kept = recommend()
    flagged = {s["node"] for s in kept["measurements"]["stragglers"]}
    if flagged != {fleet.degraded}:
        raise SystemExit(f"e2e: the tuner should flag {fleet.degraded} alone, flagged {sorted(flagged)}")
    if kept["meshes"][0]["sources"]["tp_comm"] != "measured":
        raise SystemExit(f"e2e: TP all-reduce should be priced from measurements: {kept['meshes'][0]['sources']}")
    excluded = recommend("--exclude-degraded")
    if [n for n, _ in excluded["measurements"]["excluded"]] != [fleet.degraded]:
        raise SystemExit(f"e2e: --exclude-degraded should leave out {fleet.degraded}: {excluded['measurements']['excluded']}")
    with_step, without_step = kept["meshes"][0]["step_time_s"], excluded["meshes"][0]["step_time_s"]
    if not with_step > without_step:
        raise SystemExit(f"e2e: the degraded node should slow the TP=8 ranking: {with_step} s with it, {without_step} s without")
    say(f"tuner recommend --prometheus --selector '{selector}' flags {fleet.degraded}; best TP=8 layout "
        f"{with_step:.3f} s with it, {without_step:.3f} s without ({excluded['measurements']['keep_cost']})")


def main(agent: str, tuner: str, work: Path, panels_json: Path, fleet: Fleet) -> None:
    procs = Processes()
    # SIGTERM (CI's timeout, check.sh's trap) unwinds through `finally` like Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        token = secrets.token_hex(16)
        addresses = start_agents(procs, agent, work, token, fleet)
        address = start_prometheus(procs, work, list(addresses.values()), fleet.scrape_s)
        prom = Prometheus(address, fleet)
        # Started now, so that it too sees the second calibration (the annotations' runs).
        two = (Prometheus(start_prometheus(procs, work / "two-clusters", list(addresses.values()), fleet.scrape_s,
                                           CLUSTERS), fleet) if fleet.two_clusters else None)
        measured = {n.name for n in fleet.nodes if n.measured}
        for server, clusters in ((prom, ("",)), (two, CLUSTERS)):
            if server is None:
                continue
            wait_until(f"the recording rules over every measured node{' in each cluster' if server is two else ''}",
                       lambda server=server: {(s["metric"].get("cluster", ""), s["metric"]["hostname"]) for s in server.instant(
                           "hostname_collective:meshfit_collective_busbw_bytes_per_second:ratio_to_fleet"
                           " and on (cluster, hostname) hostname_gpu_dtype:meshfit_gemm_flops_per_second:ratio_to_fleet")}
                       == {(c, n) for c in clusters for n in measured},
                       120)
        calibrate_again(addresses, token)
        # Range panels need a few scrapes of history after it, rate() two at least.
        time.sleep(fleet.settle_s)
        boards = []
        for path in DASHBOARDS:
            board = json.loads(path.read_text())
            results, annotations = run_panels(prom, board, fleet)
            if any(r["title"] == BELOW_FLEET_PANEL for r in results):
                check_below_fleet(results, fleet)
            boards.append({"file": path.name, "title": board["title"], "panels": results, "annotations": annotations})
        check_alerts(prom, fleet)
        check_tuner(tuner, address, fleet)
        if two:
            check_two_clusters(two, fleet)
        panels_json.write_text(json.dumps(boards))
    finally:
        procs.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(usage=__doc__)
    parser.add_argument("agent")
    parser.add_argument("tuner")
    parser.add_argument("work", type=Path)
    parser.add_argument("panels_json", type=Path)
    parser.add_argument("--fleet", choices=("small", "screenshots"), default="small")
    args = parser.parse_args()
    main(args.agent, args.tuner, args.work, args.panels_json,
         small_fleet() if args.fleet == "small" else screenshots_fleet())
