"""The whole chain on this machine: sim agents, a real Prometheus with the shipped rules, every
dashboard query, the alerts, and the tuner reading Prometheus.

Usage: e2e.py AGENT TUNER WORK_DIR PANELS_JSON

Four `agent --backend sim` nodes (n4 with half the NVLinks of GPU 3) are scraped by a Prometheus
on 127.0.0.1 that loads deploy/helm/meshfit/rules/meshfit.rules.yaml. Checks, in order:
  - every target of every dashboard panel (repeated panels once per value) returns data, with
    the dashboards' variables expanded the way Grafana would on first load;
  - n4, and only n4, is below 85% in the "Nodes below the fleet" panel;
  - the alerts for n4 fire (MeshfitCollectiveBusbwBelowFleet, MeshfitNvlinkInactive), and no
    alert fires or is pending for a healthy node;
  - `tuner recommend --prometheus` reports n4 below the fleet median (skipped, saying so, while
    the tuner has no --prometheus flag).
Results of every panel go to PANELS_JSON for render_dashboards.py.

The rules are loaded as shipped except for timing: every group evaluates each second and alerts
have no `for:` hold, so that a check takes seconds rather than the half hour the hold asks for.
All servers listen on 127.0.0.1; every process started here is stopped on the way out.
"""
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
from pathlib import Path

import yaml

DEPLOY = Path(__file__).resolve().parent.parent
RULES = DEPLOY / "helm" / "meshfit" / "rules" / "meshfit.rules.yaml"
DASHBOARDS = sorted((DEPLOY / "helm" / "meshfit" / "dashboards").glob("*.json"))
PROFILE = "dgx-h100"
NODES = {"n1": [], "n2": [], "n3": [], "n4": ["nvlink-degraded:gpu=3"]}
DEGRADED = "n4"
FIRING_FOR_DEGRADED = {"MeshfitCollectiveBusbwBelowFleet", "MeshfitNvlinkInactive"}
BELOW_FLEET_PANEL = "Nodes below the fleet"
BELOW_FLEET = 0.85
SCRAPE_S = 1
# Grafana's $__rate_interval: max(step + scrape interval, 4 x scrape interval), for a 2 s step.
RATE_INTERVAL = "4s"
RANGE_STEP_S = 2
RANGE_S = 60


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


def start_agents(procs: Processes, agent: str, work: Path, token: str) -> dict[str, str]:
    addresses = {}
    for seed, (node, faults) in enumerate(NODES.items()):
        log = work / f"agent-{node}.log"
        argv = [agent, "--backend", "sim", "--profile", PROFILE, "--node-name", node,
                "--listen", "127.0.0.1:0", "--state-dir", str(work / node), "--seed", str(seed),
                "--jitter", "0s", "--interval", "1h", "--sample-interval", f"{SCRAPE_S}s",
                "--calibrate-token", token]
        for fault in faults:
            argv += ["--fault", fault]
        proc = procs.start(f"agent {node}", argv, log)

        def bound(log=log, proc=proc, node=node):
            if proc.poll() is not None:
                raise SystemExit(f"e2e: agent {node} exited ({proc.returncode}):\n{log.read_text()}")
            found = re.search(r"listening on http://(127\.0\.0\.1:\d+)", log.read_text())
            return found and found.group(1)

        addresses[node] = wait_until(f"agent {node} to log its address", bound, 30)
    for node, address in addresses.items():
        wait_until(f"agent {node} /readyz", lambda a=address: http_get(f"http://{a}/readyz")[0] == 200, 30)
        wait_until(f"agent {node} to finish calibrating",
                   lambda a=address: "meshfit_calibration_last_success_timestamp_seconds" in http_get(f"http://{a}/metrics")[1],
                   60)
    say(f"{len(addresses)} sim agents ({PROFILE}) calibrated: "
        + ", ".join(f"{n} {a}{' ' + ' '.join(NODES[n]) if NODES[n] else ''}" for n, a in addresses.items()))
    return addresses


def calibrate_again(addresses: dict[str, str], token: str) -> None:
    """A second run on every node while Prometheus watches, so that the live NVLink counters move
    and the traffic panels draw a rate rather than a flat line."""
    for node, address in addresses.items():
        request = urllib.request.Request(f"http://{address}/v1/calibrate", method="POST",
                                         headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            if response.status // 100 != 2:
                raise SystemExit(f"e2e: POST /v1/calibrate on {node}: {response.status}")
    for node, address in addresses.items():
        wait_until(f"the second calibration on {node}",
                   lambda a=address: re.search(r'meshfit_calibration_runs_total\{result="success"[^}]*\} 2\b',
                                               http_get(f"http://{a}/metrics")[1]), 60)
    say("second calibration on every node done (POST /v1/calibrate)")


def test_rules(work: Path) -> Path:
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        group["interval"] = f"{SCRAPE_S}s"
        for rule in group["rules"]:
            rule.pop("for", None)
    path = work / "rules.yaml"
    path.write_text(yaml.safe_dump(rules, sort_keys=False))
    return path


def start_prometheus(procs: Processes, work: Path, targets: list[str]) -> str:
    config = {
        "global": {"scrape_interval": f"{SCRAPE_S}s", "evaluation_interval": f"{SCRAPE_S}s"},
        "rule_files": [str(test_rules(work))],
        "scrape_configs": [{"job_name": "meshfit", "static_configs": [{"targets": targets}]}],
    }
    (work / "prometheus.yml").write_text(yaml.safe_dump(config))
    address = f"127.0.0.1:{free_port()}"
    log = work / "prometheus.log"
    proc = procs.start("prometheus", [
        "prometheus", f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={work / 'tsdb'}",
        f"--web.listen-address={address}", "--log.level=warn"], log)

    def ready():
        if proc.poll() is not None:
            raise SystemExit(f"e2e: prometheus exited ({proc.returncode}):\n{log.read_text()}")
        return http_get(f"http://{address}/-/ready")[0] == 200

    wait_until("Prometheus to be ready", ready, 60)
    say(f"Prometheus {address} scraping {len(targets)} agents every {SCRAPE_S} s, "
        f"rules from {RULES.relative_to(DEPLOY.parent)} (group interval {SCRAPE_S} s, no for: hold)")
    return address


class Prometheus:
    def __init__(self, address: str) -> None:
        self.base = f"http://{address}/api/v1"

    def get(self, path: str, **params) -> dict:
        status, body = http_get(f"{self.base}/{path}?{urllib.parse.urlencode(params, doseq=True)}", 15)
        reply = json.loads(body) if body else {}
        if status != 200 or reply.get("status") != "success":
            raise SystemExit(f"e2e: Prometheus {path} {params}: {status} {body[:500]}")
        return reply["data"]

    def instant(self, expr: str) -> list[dict]:
        return self.get("query", query=expr)["result"]

    def range(self, expr: str, start: float, end: float) -> list[dict]:
        return self.get("query_range", query=expr, start=start, end=end, step=RANGE_STEP_S)["result"]

    def label_values(self, query: str) -> list[str]:
        found = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\)\s*", query)
        if not found:
            raise SystemExit(f"e2e: variable query {query!r} is not label_values(selector, label)")
        selector, label = found.groups()
        series = self.get("series", **{"match[]": selector})
        return sorted({s[label] for s in series if label in s}, key=natural)


def natural(text: str):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def interpolate(text: str, variables: dict[str, list[str]]) -> str:
    """Grafana's interpolation for Prometheus: one value as is, several as a regex alternation."""
    def value(match):
        name = match.group(1) or match.group(2)
        if name == "__rate_interval":
            return RATE_INTERVAL
        if name not in variables:
            return match.group(0)
        values = variables[name]
        return values[0] if len(values) == 1 else "(" + "|".join(re.escape(v) for v in values) + ")"
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, text)


def resolve_variables(prom: Prometheus, board: dict) -> dict[str, list[str]]:
    """Each query variable's values on first load: its saved current value, else All."""
    variables: dict[str, list[str]] = {}
    for var in board["templating"]["list"]:
        if var["type"] != "query":
            continue
        query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        options = prom.label_values(interpolate(query, variables))
        if not options:
            raise SystemExit(f"e2e: {board['title']}: variable ${var['name']} has no values ({query})")
        current = var.get("current", {}).get("value", "$__all")
        current = current if isinstance(current, list) else [current]
        chosen = options if "$__all" in current else [v for v in current if v in options]
        if not chosen:
            raise SystemExit(f"e2e: {board['title']}: ${var['name']} default {current} is not among {options}")
        variables[var["name"]] = chosen
    return variables


def run_panels(prom: Prometheus, board: dict) -> list[dict]:
    variables = resolve_variables(prom, board)
    end = time.time()
    results = []
    for panel in board["panels"]:
        repeat = panel.get("repeat")
        for value in variables[repeat] if repeat else [None]:
            scope = dict(variables, **({repeat: [value]} if repeat else {}))
            instance = {"panel": panel, "title": interpolate(panel["title"], scope), "targets": []}
            for target in panel["targets"]:
                expr = interpolate(target["expr"], scope)
                if target.get("instant"):
                    data = prom.instant(expr)
                else:
                    data = prom.range(expr, end - RANGE_S, end)
                if not data:
                    raise SystemExit(f"e2e: {board['title']} / {instance['title']} target {target['refId']} "
                                     f"returned no data:\n  {expr}")
                instance["targets"].append({"refId": target["refId"], "expr": expr, "data": data})
            results.append(instance)
    queries = sum(len(r["targets"]) for r in results)
    say(f"{board['title']}: {queries} queries in {len(results)} panels (repeats included) all return data")
    return results


def check_below_fleet(results: list[dict]) -> None:
    (panel,) = [r for r in results if r["title"] == BELOW_FLEET_PANEL]
    ratios = {s["metric"]["hostname"]: float(s["value"][1]) for s in panel["targets"][0]["data"]}
    below = sorted(node for node, ratio in ratios.items() if ratio < BELOW_FLEET)
    if below != [DEGRADED] or set(ratios) != set(NODES):
        raise SystemExit(f"e2e: \"{BELOW_FLEET_PANEL}\" busbw ratios {ratios}: expected only {DEGRADED} under {BELOW_FLEET}")
    say(f"\"{BELOW_FLEET_PANEL}\": busbw ratio to the fleet median "
        + ", ".join(f"{n} {r:.2f}" for n, r in sorted(ratios.items())) + f"; only {DEGRADED} is under {BELOW_FLEET}")


def check_alerts(prom: Prometheus) -> None:
    def degraded_alerts_firing():
        alerts = prom.get("alerts")["alerts"]
        firing = {a["labels"]["alertname"] for a in alerts
                  if a["state"] == "firing" and a["labels"].get("hostname") == DEGRADED}
        return alerts if FIRING_FOR_DEGRADED <= firing else None

    alerts = wait_until(f"{', '.join(sorted(FIRING_FOR_DEGRADED))} to fire for {DEGRADED}", degraded_alerts_firing, 60)
    healthy = [a for a in alerts if a["labels"].get("hostname") != DEGRADED]
    if healthy:
        raise SystemExit("e2e: alerts on healthy nodes: "
                         + "; ".join(f"{a['labels']} {a['state']}" for a in healthy))
    fired = sorted({(a["labels"]["alertname"], a["state"]) for a in alerts})
    say(f"alerts for {DEGRADED}: " + ", ".join(f"{n} ({s}, {sum(1 for a in alerts if a['labels']['alertname'] == n)} series)"
                                               for n, s in fired) + "; none for n1-n3")


def check_tuner(tuner: str, address: str) -> None:
    """`tuner recommend --prometheus` names the degraded node and ranks with it: with the
    default (slowest-node) aggregate a TP=8 layout pays for n4's halved NVLink, and
    `--exclude-degraded` drops n4, prices the same layout faster and states what keeping it costs."""
    if not tuner:
        raise SystemExit("e2e: the workspace has no `tuner` binary")

    def recommend(*extra: str) -> dict:
        argv = [tuner, "recommend", "--model", "70b", "--gpus", str(8 * len(NODES)), "--tp", "8",
                "--prometheus", f"http://{address}", "--format", "json", *extra]
        run = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if run.returncode != 0:
            raise SystemExit(f"e2e: {' '.join(argv)} exited {run.returncode}:\n{run.stderr}")
        return json.loads(run.stdout)

    kept = recommend()
    flagged = {s["node"] for s in kept["measurements"]["stragglers"]}
    if flagged != {DEGRADED}:
        raise SystemExit(f"e2e: the tuner should flag {DEGRADED} alone, flagged {sorted(flagged)}")
    if kept["meshes"][0]["sources"]["tp_comm"] != "measured":
        raise SystemExit(f"e2e: TP all-reduce should be priced from measurements: {kept['meshes'][0]['sources']}")
    excluded = recommend("--exclude-degraded")
    if [n for n, _ in excluded["measurements"]["excluded"]] != [DEGRADED]:
        raise SystemExit(f"e2e: --exclude-degraded should leave out {DEGRADED}: {excluded['measurements']['excluded']}")
    with_step, without_step = kept["meshes"][0]["step_time_s"], excluded["meshes"][0]["step_time_s"]
    if not with_step > without_step:
        raise SystemExit(f"e2e: the degraded node should slow the TP=8 ranking: {with_step} s with it, {without_step} s without")
    say(f"tuner recommend --prometheus flags {DEGRADED}; best TP=8 layout {with_step:.3f} s with it, "
        f"{without_step:.3f} s without ({excluded['measurements']['keep_cost']})")


def main(agent: str, tuner: str, work: Path, panels_json: Path) -> None:
    procs = Processes()
    # SIGTERM (CI's timeout, check.sh's trap) unwinds through `finally` like Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        token = secrets.token_hex(16)
        addresses = start_agents(procs, agent, work, token)
        address = start_prometheus(procs, work, list(addresses.values()))
        prom = Prometheus(address)
        wait_until("the recording rules over every node",
                   lambda: len(prom.instant("hostname_collective:meshfit_collective_busbw_bytes_per_second:ratio_to_fleet"
                                            " and on (hostname) hostname_gpu:meshfit_gemm_flops_per_second:ratio_to_fleet")) > 0
                   and {s["metric"]["hostname"] for s in prom.instant("hostname_collective:meshfit_collective_busbw_bytes_per_second:ratio_to_fleet")} == set(NODES),
                   60)
        calibrate_again(addresses, token)
        # Range panels need a few scrapes of history after it, rate() two at least.
        time.sleep(4 * SCRAPE_S)
        boards = []
        for path in DASHBOARDS:
            board = json.loads(path.read_text())
            results = run_panels(prom, board)
            if any(r["title"] == BELOW_FLEET_PANEL for r in results):
                check_below_fleet(results)
            boards.append({"file": path.name, "title": board["title"], "panels": results})
        check_alerts(prom)
        check_tuner(tuner, address)
        panels_json.write_text(json.dumps(boards))
    finally:
        procs.stop()


if __name__ == "__main__":
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]))
