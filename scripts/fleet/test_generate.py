"""The fleet generator: run by deploy/check.sh as `python3 -m unittest discover -s scripts/fleet`.

Generates small fleets from the committed agent exports and checks what promtool's OpenMetrics
backfill needs (timestamps, series in time order, `# EOF`), the spread, the slow nodes, the
bounded fabric pairs and the `cluster` label; with promtool installed, backfills one.
"""

import contextlib
import io
import re
import shutil
import statistics
import subprocess
import tempfile
import unittest
from collections import defaultdict
from pathlib import Path

import generate

HERE = Path(__file__).resolve().parent
H100 = HERE / "testdata" / "dgx-h100.prom"
A100 = HERE / "testdata" / "dgx-a100.prom"
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+) (\S+)$")


def run(*args):
    """generate.py's exit code, standard output and standard error for `args`."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = generate.main([str(a) for a in args])
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()


def samples(text):
    """(name, labels dict, value, timestamp) of each sample line."""
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m:
            labels = dict(re.findall(r'([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"', m.group(2)))
            yield m.group(1), labels, float(m.group(3)), float(m.group(4))


def template_series(path):
    return sum(1 for line in path.read_text().splitlines() if line and not line.startswith("#"))


class Generate(unittest.TestCase):
    def fleet(self, *extra):
        code, out, err = run("--nodes", 20, "--end", 1_800_000_000, *extra)
        self.assertEqual(code, 0, err)
        return out, err

    def test_openmetrics_for_backfill(self):
        out, _ = self.fleet("--samples", 3, "--span", 120)
        self.assertTrue(out.endswith("# EOF\n"))
        self.assertEqual(out.count("# EOF"), 1)
        times = defaultdict(list)
        for name, labels, _, at in samples(out):
            times[(name, tuple(sorted(labels.items())))].append(at)
        self.assertTrue(times)
        for key, ts in times.items():
            self.assertEqual(ts, [1_799_999_880.0, 1_799_999_940.0, 1_800_000_000.0], key)
        # Families are not interleaved: each TYPE line appears once.
        types = [line.split()[2] for line in out.splitlines() if line.startswith("# TYPE")]
        self.assertEqual(len(types), len(set(types)))
        # A counter family is named without `_total`, its samples with it.
        self.assertIn("# TYPE meshfit_calibration_runs counter", out)
        self.assertIn("\nmeshfit_calibration_runs_total{", out)

    def test_every_node_has_the_templates_series_and_the_bounded_pairs(self):
        out, _ = self.fleet("--slowest-peers", 2)
        per_node = defaultdict(set)
        pairs = defaultdict(set)
        for name, labels, _, _ in samples(out):
            key = (name, tuple(sorted(labels.items())))
            per_node[labels["hostname"]].add(key)
            if name == generate.PAIRS:
                pairs[(labels["hostname"], labels["gpu"])].add(labels["peer_node"])
        self.assertEqual(sorted(per_node), [f"node-{i:05d}" for i in range(20)])
        template_pairs = 16  # 2 peers x 8 rails in the template; the fleet's own replace them
        for node, series in per_node.items():
            self.assertEqual(len(series), template_series(H100) - template_pairs + 8 * 3, node)
        for (node, rail), peers in pairs.items():
            self.assertEqual(len(peers), 3, (node, rail))  # the 2 slowest and the fastest
            self.assertNotIn(node, peers)
        uuids = [labels["UUID"] for name, labels, _, at in samples(out) if name == "meshfit_gpu_info"]
        self.assertEqual(len(set(uuids)), 20 * 8, "a GPU UUID repeats across nodes")

    def test_slow_nodes_are_markedly_slower_and_named(self):
        out, err = self.fleet("--slow", 2, "--seed", 7)
        slow = re.search(r"slow nodes \(x0\.7\): (.*)", err).group(1).split(", ")
        self.assertEqual(len(slow), 2)
        gemm = defaultdict(list)
        for name, labels, value, _ in samples(out):
            if name == "meshfit_gemm_flops_per_second" and labels["dtype"] == "bf16":
                gemm[labels["hostname"]].append(value)
        median = {n: statistics.median(v) for n, v in gemm.items()}
        healthy = statistics.median(v for n, v in median.items() if n not in slow)
        for n, v in median.items():
            ratio = v / healthy
            if n in slow:
                self.assertLess(ratio, 0.8, n)
            else:
                self.assertGreater(ratio, 0.85, n)
        # Each node's rail median: its own rail's rate, or its peers' median when lower.
        medians = {
            labels["hostname"]: value
            for name, labels, value, _ in samples(out)
            if name == generate.RAIL_MEDIAN and labels["gpu"] == "3"
        }
        fleet = statistics.median(medians.values())
        for n, v in medians.items():
            self.assertEqual(v / fleet < 0.8, n in slow, (n, v / fleet))
        peer_counts = {
            value for name, labels, value, _ in samples(out) if name == generate.RAIL_PEERS
        }
        self.assertEqual(peer_counts, {19.0})
        # A healthy node's slowest fabric peers are the slow nodes.
        peers = {
            labels["peer_node"]
            for name, labels, _, _ in samples(out)
            if name == generate.PAIRS and labels["hostname"] not in slow and labels["gpu"] == "3"
        }
        self.assertTrue(set(slow) <= peers)

    def test_peaks_are_each_nodes_best_size_and_shape(self):
        out, err = self.fleet("--slow", 2, "--seed", 7)
        slow = re.search(r"slow nodes \(x0\.7\): (.*)", err).group(1).split(", ")
        sizes, shapes = defaultdict(float), defaultdict(float)
        peaks = {}
        for name, labels, value, _ in samples(out):
            node = labels["hostname"]
            if name == "meshfit_collective_busbw_bytes_per_second":
                key = (node, labels["collective"], labels["scope"], labels["ranks"], labels.get("ranks_per_node"))
                sizes[key] = max(sizes[key], value)
            elif name == "meshfit_gemm_flops_per_second":
                key = (node, labels["gpu"], labels["dtype"])
                shapes[key] = max(shapes[key], value)
            elif name == "meshfit_collective_peak_busbw_bytes_per_second":
                key = (node, labels["collective"], labels["scope"], labels["ranks"], labels.get("ranks_per_node"))
                peaks[key] = value
            elif name == "meshfit_gemm_peak_flops_per_second":
                peaks[(node, labels["gpu"], labels["dtype"])] = value
        self.assertEqual(peaks, {**sizes, **shapes})
        all_reduce = {k[0]: v for k, v in peaks.items() if k[1:] == ("all_reduce", "intra_node", "8", None)}
        fleet = statistics.median(all_reduce.values())
        for node, v in all_reduce.items():
            self.assertEqual(v / fleet < 0.8, node in slow, (node, v / fleet))

    def test_spread_is_seeded(self):
        a, _ = self.fleet("--seed", 3)
        b, _ = self.fleet("--seed", 3)
        c, _ = self.fleet("--seed", 4)
        self.assertEqual(a, b)
        self.assertNotEqual(a, c)
        flat, _ = self.fleet("--spread", 0)
        values = {v for n, l, v, _ in samples(flat) if n == "meshfit_gemm_flops_per_second"}
        spread = {v for n, l, v, _ in samples(a) if n == "meshfit_gemm_flops_per_second"}
        self.assertLess(len(values), len(spread))

    def test_cluster_label_and_templates_in_turn(self):
        out, _ = self.fleet("--cluster", "east", "--template", H100, "--template", A100)
        models = {}
        for name, labels, _, _ in samples(out):
            self.assertEqual(labels.get("cluster"), "east", name)
            if name == "meshfit_gpu_info":
                models[labels["hostname"]] = labels["model_name"]
        self.assertEqual(models["node-00000"], "NVIDIA H100 80GB HBM3")
        self.assertEqual(models["node-00001"], "NVIDIA A100-SXM4-80GB")

    def test_bad_input_is_named(self):
        code, _, err = run("--nodes", 0)
        self.assertEqual(code, 2)
        self.assertIn("--nodes", err)
        code, _, err = run("--nodes", 3, "--slow", 4)
        self.assertEqual((code, "--slow 4: expected 0 to --nodes (3)" in err), (2, True), err)
        with tempfile.TemporaryDirectory() as d:
            two = Path(d) / "two.prom"
            two.write_text('a{hostname="x"} 1\na{hostname="y"} 2\n')
            code, _, err = run("--nodes", 2, "--template", two)
            self.assertEqual(code, 2)
            self.assertIn("expected one node's export", err)
            self.assertIn("['x', 'y']", err)
            bad = Path(d) / "bad.prom"
            bad.write_text('a{hostname="x"} fast\n')
            code, _, err = run("--nodes", 2, "--template", bad)
            self.assertEqual(code, 2)
            self.assertIn("line 1: value 'fast' is not a number", err)

    @unittest.skipIf(shutil.which("promtool") is None, "promtool is not installed")
    def test_promtool_backfills_it(self):
        with tempfile.TemporaryDirectory() as d:
            om = Path(d) / "fleet.om"
            code, _, err = run("--nodes", 20, "--slow", 1, "--cluster", "c1", "--out", om)
            self.assertEqual(code, 0, err)
            blocks = Path(d) / "data"
            subprocess.run(
                ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(om), str(blocks)],
                check=True,
                capture_output=True,
            )
            report = subprocess.run(
                ["promtool", "tsdb", "analyze", str(blocks)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            series = int(re.search(r"^Series: (\d+)$", report, re.M).group(1))
            written = {(n, tuple(sorted(l.items()))) for n, l, _, _ in samples(om.read_text())}
            self.assertEqual(series, len(written))


if __name__ == "__main__":
    unittest.main()
