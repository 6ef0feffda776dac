#!/usr/bin/env python3
"""One screen from a scripts/device-check.sh folder: the libraries microbench loaded, the GPUs
and links NVML saw, the best GEMM, HBM, host and peer copy and all-reduce figures against the
GPU's datasheet, and every step that failed, with the first line of its error.

    scripts/device-summary.py OUT_DIR
    scripts/device-summary.py --self-test     checks the summary on a made-up folder

A figure of 0.0 is a value (a one-rank all-reduce has busbw 0), not a missing one; a link
NVML could not place (null in topo.json) shows as ?."""

import json
import os
import sys
import tempfile

# Dense datasheet peaks: bf16 tensor TFLOP/s without sparsity, HBM TB/s. NVIDIA's H200, H100
# SXM and A100 SXM datasheets.
DATASHEETS = {
    "H200": (989.4, 4.8),
    "H100 80GB HBM3": (989.4, 3.35),
    "A100-SXM4-80GB": (312.0, 2.039),
}


def lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        out = []
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out


def document(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def best(out, name, kind, field, ranks=None):
    values = [
        r[field]
        for r in lines(os.path.join(out, name))
        if r.get("kind") == kind
        and r.get(field) is not None
        and (ranks is None or r.get("ranks") == ranks)
    ]
    return max(values) if values else None


def shown(value, scale, unit):
    return "missing" if value is None else "%.2f %s" % (value / scale, unit)


def against(value, peak, scale):
    if value is None or peak is None:
        return ""
    return " (%.0f%% of the datasheet's %.4g)" % (100.0 * value / (peak * scale), peak)


def summary(out):
    text = []
    libs = document(os.path.join(out, "libs.json"))
    if libs:
        for lib in libs.get("libraries", []):
            where = lib.get("path") or lib.get("name") or "not loaded"
            version = lib.get("version")
            state = lib.get("error") or ("version %s" % version if version else "loaded")
            text.append("%-10s %s: %s" % (lib.get("library"), where, state))
    else:
        text.append("libs: no libs.json")
    topo = document(os.path.join(out, "topo.json")) or {}
    gpus = topo.get("gpus", [])
    model = gpus[0]["name"] if gpus else None
    links = topo.get("links") or []
    for g in gpus:
        row = links[g["index"]] if g["index"] < len(links) else None
        # A pair NVML could not place is null (topo.json's notes say why).
        row = " ".join("?" if link is None else str(link) for link in row or [])
        text.append(
            "GPU %d %s, %.0f GiB, cc %s, links %s"
            % (
                g["index"],
                g["name"],
                g.get("memory_bytes", 0) / 2**30,
                ".".join(str(c) for c in g.get("compute_capability", [])),
                row or "-",
            )
        )
    if not gpus:
        text.append("topology: none read")
    peak = next((v for k, v in DATASHEETS.items() if model and k in model), (None, None))
    rows = [
        ("gemm bf16 8192^3", best(out, "gemm.jsonl", "gemm", "flops"), 1e12, "TFLOP/s", peak[0]),
        ("hbm copy busbw", best(out, "hbm.jsonl", "hbm_copy", "busbw"), 1e12, "TB/s", peak[1]),
        ("h2d busbw", best(out, "host_copy.jsonl", "h2d", "busbw"), 1e9, "GB/s", None),
        ("d2h busbw", best(out, "host_copy.jsonl", "d2h", "busbw"), 1e9, "GB/s", None),
        ("p2p busbw", best(out, "p2p.jsonl", "p2p_copy", "busbw", ranks=1), 1e9, "GB/s", None),
        ("p2p-bidir busbw", best(out, "p2p.jsonl", "p2p_copy", "busbw", ranks=2), 1e9, "GB/s", None),
        ("all_reduce busbw", best(out, "all_reduce.jsonl", "all_reduce", "busbw"), 1e9, "GB/s", None),
        ("job all_reduce", best(out, "job_all_reduce.jsonl", "all_reduce", "busbw"), 1e9, "GB/s", None),
    ]
    for name, value, scale, unit, datasheet in rows:
        text.append("%-18s %s%s" % (name, shown(value, scale, unit), against(value, datasheet, scale)))
    steps = os.path.join(out, "steps.tsv")
    failed = []
    if os.path.exists(steps):
        with open(steps) as f:
            for row in list(f)[1:]:
                step, code, _ = (row.rstrip("\n").split("\t") + ["", "", ""])[:3]
                if code in ("0", "skip"):
                    continue
                err = os.path.join(out, step + ".err")
                first = ""
                if step == "libs" and libs:
                    unusable = [l["library"] for l in libs.get("libraries", []) if l.get("error")]
                    first = "unusable: %s (lines above)" % ", ".join(unusable)
                if not first and os.path.exists(err):
                    with open(err) as e:
                        first = next((l.strip() for l in e if l.strip()), "")
                failed.append("FAILED %s (exit %s): %s" % (step, code, first or "no message"))
    text.extend(failed or ["every step ran"])
    return "\n".join(text) + "\n"


def self_test():
    with tempfile.TemporaryDirectory() as out:
        def write(name, content):
            with open(os.path.join(out, name), "w") as f:
                f.write(content)

        gpu = {"name": "NVIDIA H200", "memory_bytes": 150 * 2**30, "compute_capability": [9, 0]}
        # GPU 1 reaches 2 over NVLink, the pair 0-2 NVML could not place (null), and GPU 3
        # has no row at all.
        write("topo.json", json.dumps({
            "gpus": [dict(gpu, index=i) for i in range(4)],
            "links": [["X", "NV18", None], ["NV18", "X", "NV18"], [None, "NV18", "X"]],
        }))
        write("gemm.jsonl", json.dumps({"kind": "gemm", "flops": 791.5e12}) + "\n")
        write("all_reduce.jsonl", json.dumps({"kind": "all_reduce", "busbw": 0.0}) + "\n")
        write("steps.tsv", "step\texit\tseconds\nlibs\t1\t0\ngemm\t0\t3\np2p\tskip\t0\n")
        write("libs.err", "\nmicrobench: NCCL not found: tried libnccl.so.2\n")
        got = summary(out)
        for want in (
            "gemm bf16 8192^3   791.50 TFLOP/s (80% of the datasheet's 989.4)",
            "all_reduce busbw   0.00 GB/s",
            "hbm copy busbw     missing",
            "GPU 0 NVIDIA H200, 150 GiB, cc 9.0, links X NV18 ?",
            "GPU 1 NVIDIA H200, 150 GiB, cc 9.0, links NV18 X NV18",
            "GPU 2 NVIDIA H200, 150 GiB, cc 9.0, links ? NV18 X",
            "GPU 3 NVIDIA H200, 150 GiB, cc 9.0, links -",
            "FAILED libs (exit 1): microbench: NCCL not found: tried libnccl.so.2",
        ):
            assert want in got, "%r not in:\n%s" % (want, got)
        assert "FAILED p2p" not in got and "FAILED gemm" not in got, got
    print("device-summary: self-test passed")


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        self_test()
    elif len(sys.argv) == 2:
        sys.stdout.write(summary(sys.argv[1]))
    else:
        sys.exit(__doc__)
