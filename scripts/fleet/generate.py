#!/usr/bin/env python3
"""A fleet of meshfit agents as OpenMetrics text, for backfilling a Prometheus.

Takes one node's /metrics export (or several, one per GPU model: nodes take them in turn) and
writes the same series for N nodes, each with its own `hostname`, with timestamps, so that

    promtool tsdb create-blocks-from openmetrics FLEET.om DATA_DIR

backfills it. Measured figures get a per-node spread (lognormal, a few percent, seeded), and
`--slow K` nodes run markedly slower (GEMM, intra-node collectives and fabric rails times
`--slow-factor`). Fabric pairs are drawn afresh for the fleet: per node and rail the agent's
bounded set (the k slowest peers and the fastest one, docs/design.md). The output is
streamed family by family, node by node; memory holds the templates and a few floats per
node, never the fleet.

Usage: scripts/fleet/generate.py --nodes N [--template FILE]... [--out FILE] [options]
(--help lists them). Python 3 standard library only.
"""

import argparse
import math
import random
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_TEMPLATE = HERE / "testdata" / "dgx-h100.prom"

PAIRS = "meshfit_fabric_pair_busbw_bytes_per_second"
RAIL_MEDIAN = "meshfit_fabric_rail_median_busbw_bytes_per_second"
RAIL_PEERS = "meshfit_fabric_rail_peers"
# Value families that follow the sample's own time; other `*_timestamp_seconds` and
# `*_start_time_seconds` values (last calibration, last fabric run, process start) are events
# before the window and stay put through it.
LIVE_TIMES = {"meshfit_sample_timestamp_seconds", "meshfit_sampler_last_pass_timestamp_seconds"}

LABELS = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)(?:\s+\S+)?\s*$")


class UsageError(Exception):
    """Bad input: the message names the option or file, the value and what is allowed."""


@dataclass
class Series:
    name: str
    labels: list  # [(label, raw escaped value)], the template node's hostname included
    value: float
    text: str  # the template's own spelling of the value, written when unchanged

    def label(self, key):
        return next((v for k, v in self.labels if k == key), None)


@dataclass
class Family:
    name: str
    kind: str
    help: str
    series: list = field(default_factory=list)


@dataclass
class Template:
    path: Path
    families: dict  # name -> Family, in the export's order
    ref_time: float  # the export's "now": its newest live timestamp
    rail_busbw: dict  # rail -> median pair busbw of the template node


def parse_template(path):
    """One agent export in the Prometheus text format."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"--template {path}: cannot read: {e.strerror}") from None
    families = {}
    current = None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                fam = families.setdefault(parts[2], Family(parts[2], "untyped", ""))
                rest = parts[3] if len(parts) > 3 else ""
                if parts[1] == "HELP":
                    fam.help = rest
                else:
                    fam.kind = rest
                current = fam
            continue
        m = SAMPLE.match(line)
        if not m:
            raise UsageError(f"--template {path}: line {n}: not a sample: {line[:80]!r}")
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        try:
            v = float(value)
        except ValueError:
            raise UsageError(
                f"--template {path}: line {n}: value {value!r} is not a number"
            ) from None
        if current is None or not name.startswith(current.name):
            current = families.setdefault(name, Family(name, "untyped", ""))
        current.series.append(Series(name, LABELS.findall(labels), v, value))
    families = {k: f for k, f in families.items() if f.series}
    if not families:
        raise UsageError(f"--template {path}: no samples: expected an agent's /metrics export")
    hosts = {s.label("hostname") for f in families.values() for s in f.series}
    if None in hosts or len(hosts) != 1:
        raise UsageError(
            f"--template {path}: expected one node's export, every series with the same "
            f"`hostname`; found {sorted(h or '(none)' for h in hosts)}"
        )
    live = [s.value for name in LIVE_TIMES if name in families for s in families[name].series]
    ref = max(live) if live else time.time()
    # Each rail's figure on a healthy node: the agent's median over peers, else the pairs'.
    by_rail = {}
    for name in (RAIL_MEDIAN, PAIRS):
        for s in families.get(name, Family(name, "gauge", "")).series:
            by_rail.setdefault(s.label("gpu"), []).append(s.value)
        if by_rail:
            break
    rails = {r: sorted(v)[len(v) // 2] for r, v in by_rail.items()}
    return Template(path, families, ref, rails)


def om_help(text_format_help):
    """HELP text from the text format's escaping (\\\\, \\n) to OpenMetrics' (also \\")."""
    raw = text_format_help.replace("\\\\", "\0").replace("\\n", "\n").replace("\0", "\\")
    return raw.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def om_family(fam):
    """OpenMetrics names a counter family without `_total`, its samples with it."""
    if fam.kind == "counter" and fam.name.endswith("_total"):
        return fam.name[: -len("_total")], "counter"
    if fam.kind in ("gauge", "counter"):
        return fam.name, fam.kind if fam.kind == "gauge" else "unknown"
    return fam.name, "unknown"


def lognormal(key, sigma):
    """A seeded factor exp(N(0, sigma)) for `key`: the same key gives the same factor."""
    return random.Random(key).lognormvariate(0.0, sigma) if sigma > 0 else 1.0


@dataclass
class Fleet:
    nodes: int
    templates: list
    seed: int
    spread: float
    slow: set
    slow_factor: float
    slowest_peers: int
    written: range
    cluster: str
    prefix: str
    times: list

    def name(self, i):
        return f"{self.prefix}{i:05d}"

    def template(self, i):
        return self.templates[i % len(self.templates)]

    def factor(self, i, what):
        """Node i's factor on a measured figure: its spread, times the slow factor if slow."""
        f = lognormal(f"{self.seed}:{i}:{what}", self.spread)
        return f * self.slow_factor if i in self.slow and what in ("gemm", "coll") else f


class Rails:
    """Each node's fabric factor per rail, sorted per rail: a pair runs at the slower end's
    factor, so a node's k slowest peers, fastest peer and median peer come from the sorted
    factors without visiting every pair (N^2 at fleet scale)."""

    def __init__(self, fleet, rails):
        self.fleet = fleet
        self.factor = {}
        self.sorted = {}
        self.rank = {}
        for r in rails:
            col = [
                lognormal(f"{fleet.seed}:{i}:rail{r}", fleet.spread)
                * (fleet.slow_factor if i in fleet.slow else 1.0)
                for i in range(fleet.nodes)
            ]
            self.factor[r] = col
            self.sorted[r] = sorted(range(fleet.nodes), key=col.__getitem__)
            self.rank[r] = {j: q for q, j in enumerate(self.sorted[r])}

    def peers(self, i, r):
        """(peer, pair factor) for node i on rail r: the k slowest, then the fastest."""
        col, order, k = self.factor[r], self.sorted[r], self.fleet.slowest_peers
        others = [j for j in order[: k + 1] if j != i][:k]
        fastest = next(j for j in reversed(order) if j != i)
        if fastest not in others:
            others.append(fastest)
        return [(j, min(col[i], col[j])) for j in others]

    def median(self, i, r):
        """The median over node i's peers of the pair factor on rail r: min(own, the peers'
        median), as a pair runs at its slower end."""
        col, order, p = self.factor[r], self.sorted[r], self.rank[r][i]
        n = len(order) - 1

        def peer(q):  # the q-th slowest peer's factor, node i left out
            return col[order[q if q < p else q + 1]]

        m = peer(n // 2) if n % 2 else (peer(n // 2 - 1) + peer(n // 2)) / 2
        return min(col[i], m)


def write_fleet(fleet, out):
    """Every family of the templates, node by node, each series at every time in order."""
    names = []
    for t in fleet.templates:
        names += [n for n in t.families if n not in names]
    rails = sorted({r for t in fleet.templates for r in t.rail_busbw}, key=rail_order)
    fabric = Rails(fleet, rails) if rails and fleet.nodes > 1 else None
    if fabric is None:
        names = [n for n in names if n not in FABRIC]
    cluster = f',cluster="{fleet.cluster}"' if fleet.cluster else ""
    for name in names:
        first = next(t.families[name] for t in fleet.templates if name in t.families)
        om_name, om_kind = om_family(first)
        out.write(f"# TYPE {om_name} {om_kind}\n")
        if first.help:
            out.write(f"# HELP {om_name} {om_help(first.help)}\n")
        for i in fleet.written:
            t = fleet.template(i)
            fam = t.families.get(name)
            if fam is None:
                continue
            node = fleet.name(i)
            if name in FABRIC:
                series = FABRIC[name](fleet, fabric, t, fam, i)
            elif name in PEAKS and PEAKS[name][0] in t.families:
                series = peak_series(fleet, t, fam, i)
            else:
                series = node_series(fleet, t, fam, i)
            for s, values in series:
                labels = ",".join(
                    f'{k}="{node if k == "hostname" else v}"' for k, v in s.labels
                )
                head = f"{s.name}{{{labels}{cluster}}} "
                out.write("".join(f"{head}{v} {at}\n" for at, v in zip(fleet.times, values)))
    out.write("# EOF\n")


def node_series(fleet, t, fam, i):
    """Node i's series of `fam`: (series, its values at the fleet's times) for each."""
    n = len(fleet.times)
    what = spread_of(fam.name)
    node = fleet.factor(i, what) if what else 1.0
    # One draw per series in the template's order: the same seed gives the same fleet.
    noise = random.Random(f"{fleet.seed}:{i}:{fam.name}")
    for s in fam.series:
        if fam.name in LIVE_TIMES:
            yield s, fleet.times
        elif fam.name.endswith(("_timestamp_seconds", "_start_time_seconds")):
            yield s, [round(s.value - t.ref_time + fleet.times[0], 3)] * n
        elif what is None or s.label("scope") == "inter_node":
            # Job-wide figures of a fabric run are the same on every node of the job.
            yield relabel(s, i), [s.text] * n
        else:
            f = node * noise.lognormvariate(0.0, fleet.spread / 4) if fleet.spread else node
            v = s.value / f if fam.name == "meshfit_collective_time_seconds" else s.value * f
            yield relabel(s, i), [repr(v)] * n


# The agent's per-node reductions (docs/design.md): each series is the highest of the source
# family's series that share its key (every size of a collective, every shape of a GPU's GEMM).
PEAKS = {
    "meshfit_collective_peak_busbw_bytes_per_second": (
        "meshfit_collective_busbw_bytes_per_second",
        ("collective", "scope", "ranks", "ranks_per_node", "backend"),
    ),
    "meshfit_gemm_peak_flops_per_second": (
        "meshfit_gemm_flops_per_second",
        ("gpu", "dtype", "backend"),
    ),
}


def peak_series(fleet, t, fam, i):
    """Node i's peaks, from its own spread values of the source family (as the agent takes
    them from its measurements), so a slow node's peak is as slow as its sizes and shapes."""
    source, key = PEAKS[fam.name]
    best = {}
    for s, values in node_series(fleet, t, t.families[source], i):
        k = tuple(s.label(label) for label in key)
        best[k] = max(best.get(k, 0.0), float(values[0]))
    for s in fam.series:
        k = tuple(s.label(label) for label in key)
        yield relabel(s, i), [repr(best[k])] * len(fleet.times)


def relabel(s, i):
    """A GPU's UUID is unique in the fleet."""
    if s.label("UUID") is None:
        return s
    labels = [(k, f"{v}-n{i}" if k == "UUID" else v) for k, v in s.labels]
    return Series(s.name, labels, s.value, s.text)


def spread_of(name):
    """Which of a node's factors a measured family takes; None for facts and counters."""
    if name == "meshfit_gemm_flops_per_second":
        return "gemm"
    if name in ("meshfit_collective_busbw_bytes_per_second", "meshfit_collective_time_seconds"):
        return "coll"
    if name in ("meshfit_memory_bandwidth_bytes_per_second", "meshfit_p2p_bandwidth_bytes_per_second"):
        return "mem"
    return None


def rail_order(rail):
    """Rails in numeric order ("2" before "10")."""
    return (len(rail), rail)


def pair_series(fleet, fabric, t, fam, i):
    """Node i's bounded pair set per rail, labelled like the template's pairs."""
    like = fam.series[0]
    for r in sorted(t.rail_busbw, key=rail_order):
        for j, f in fabric.peers(i, r):
            labels = [
                (k, fleet.name(j) if k == "peer_node" else r if k == "gpu" else v)
                for k, v in like.labels
            ]
            yield Series(PAIRS, labels, 0.0, ""), [repr(t.rail_busbw[r] * f)] * len(fleet.times)


def rail_series(fleet, fabric, t, fam, i, value):
    """Node i's series of a per-rail family, one per rail, labelled like the template's."""
    like = fam.series[0]
    n = len(fleet.times)
    for r in sorted(t.rail_busbw, key=rail_order):
        labels = [(k, r if k == "gpu" else v) for k, v in like.labels]
        yield Series(fam.name, labels, 0.0, ""), [value(r)] * n


# The fabric families, drawn for the fleet rather than copied from the template.
FABRIC = {
    PAIRS: pair_series,
    RAIL_MEDIAN: lambda fleet, fabric, t, fam, i: rail_series(
        fleet, fabric, t, fam, i, lambda r: repr(t.rail_busbw[r] * fabric.median(i, r))
    ),
    RAIL_PEERS: lambda fleet, fabric, t, fam, i: rail_series(
        fleet, fabric, t, fam, i, lambda r: str(fleet.nodes - 1)
    ),
}


def positive(kind):
    def parse(text):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a {kind.__name__}") from None
        if v <= 0:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a value above 0")
        return v

    return parse


def arguments(argv):
    p = argparse.ArgumentParser(
        prog="generate.py",
        description="Write a fleet of meshfit agents' exports as OpenMetrics text with "
        "timestamps, for `promtool tsdb create-blocks-from openmetrics`.",
    )
    p.add_argument("--nodes", type=positive(int), required=True, help="nodes in the fleet")
    p.add_argument(
        "--template",
        type=Path,
        action="append",
        help="one node's /metrics export (repeat for more GPU models: nodes take them in "
        "turn); default: the DGX H100 sim export beside this script",
    )
    p.add_argument("--out", type=Path, help="output file (default: standard output)")
    p.add_argument(
        "--range",
        dest="node_range",
        metavar="FIRST:END",
        help="write nodes FIRST to END-1 only (default all), for writing one fleet in parallel "
        "parts: the spread, the slow nodes and the pairs are those of the whole --nodes fleet",
    )
    p.add_argument("--seed", type=int, default=1, help="seed of the spread and of the slow nodes (default 1)")
    p.add_argument(
        "--spread",
        type=float,
        default=0.03,
        help="sigma of each node's lognormal factor on measured figures (default 0.03: about 3%%)",
    )
    p.add_argument("--slow", type=int, default=0, help="nodes markedly slower (default 0)")
    p.add_argument(
        "--slow-factor",
        type=float,
        default=0.7,
        help="the slow nodes' GEMM, collective busbw and fabric rails, times this (default 0.7)",
    )
    p.add_argument(
        "--slowest-peers",
        type=int,
        default=4,
        help="fabric pairs per rail besides the fastest, as the agent's fabric_slowest_peers (default 4)",
    )
    p.add_argument("--cluster", default="", help="a `cluster` label on every series (default none)")
    p.add_argument("--prefix", default="node-", help="node names: PREFIX and a 5-digit index (default node-)")
    p.add_argument(
        "--end",
        type=float,
        help="the last sample's time, Unix seconds (default now); put it a few minutes ahead "
        "when Prometheus starts later, as its queries look back 5 minutes",
    )
    p.add_argument("--span", type=positive(float), default=600.0, help="seconds from first to last sample (default 600)")
    p.add_argument("--samples", type=positive(int), default=5, help="samples per series (default 5)")
    a = p.parse_args(argv)
    if not 0 <= a.slow <= a.nodes:
        p.error(f"--slow {a.slow}: expected 0 to --nodes ({a.nodes})")
    if not 0 < a.slow_factor <= 1:
        p.error(f"--slow-factor {a.slow_factor}: expected a factor above 0, at most 1")
    if not 0 <= a.spread < 1:
        p.error(f"--spread {a.spread}: expected a sigma from 0 to below 1")
    a.first, a.end_node = 0, a.nodes
    if a.node_range is not None:
        m = re.fullmatch(r"(\d+):(\d+)", a.node_range)
        if not m or not int(m.group(1)) < int(m.group(2)) <= a.nodes:
            p.error(f"--range {a.node_range}: expected FIRST:END with FIRST < END <= --nodes ({a.nodes})")
        a.first, a.end_node = int(m.group(1)), int(m.group(2))
    if a.slowest_peers < 0:
        p.error(f"--slowest-peers {a.slowest_peers}: expected 0 or more")
    if a.cluster and not re.fullmatch(r'[^"\\\n]*', a.cluster):
        p.error(f"--cluster {a.cluster!r}: expected a value without quotes, backslashes or newlines")
    if not re.fullmatch(r"[A-Za-z0-9._-]*", a.prefix):
        p.error(f"--prefix {a.prefix!r}: expected letters, digits, '.', '_' or '-'")
    return a


def main(argv):
    a = arguments(argv)
    try:
        templates = [parse_template(p) for p in (a.template or [DEFAULT_TEMPLATE])]
    except UsageError as e:
        print(f"generate.py: {e}", file=sys.stderr)
        return 2
    end = math.floor(a.end if a.end is not None else time.time())
    step = a.span / (a.samples - 1) if a.samples > 1 else 0.0
    times = [round(end - a.span + k * step, 3) if a.samples > 1 else end for k in range(a.samples)]
    slow = set(random.Random(f"{a.seed}:slow").sample(range(a.nodes), a.slow))
    fleet = Fleet(
        a.nodes, templates, a.seed, a.spread, slow, a.slow_factor, a.slowest_peers,
        range(a.first, a.end_node), a.cluster, a.prefix, times,
    )
    if slow & set(fleet.written):
        names = ", ".join(fleet.name(i) for i in sorted(slow & set(fleet.written)))
        print(f"generate.py: slow nodes (x{a.slow_factor}): {names}", file=sys.stderr)
    try:
        if a.out:
            with open(a.out, "w", encoding="utf-8", buffering=1 << 20) as out:
                write_fleet(fleet, out)
        else:
            write_fleet(fleet, sys.stdout)
    except OSError as e:
        print(f"generate.py: --out {a.out}: {e.strerror}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
