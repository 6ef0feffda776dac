#!/usr/bin/env bash
# Runs the prebuilt microbench on a machine with an NVIDIA GPU and writes what it saw to $1:
# topology, GEMM 8192^3 bf16, HBM copy, host-to-device copy and an NCCL all-reduce over the
# GPUs present (one GPU gives a one-rank communicator), then the same all-reduce as a job of one
# process per GPU (issue 12; needs 2+ GPUs, else recorded as skipped). Each step's tables and
# JSON go to their own files; a failed step is recorded in steps.tsv and the next one still runs.
#
# Usage: scripts/device-check.sh OUT_DIR
#   MICROBENCH=path/to/microbench  the binary (default: the first built one under target*/)
#   STEP_TIMEOUT=seconds           limit per step (default 300)
# Build the binary first on the x86-64 build machine: cargo build --release -p microbench
#
# cuBLAS and NCCL come from the Python environment's nvidia-* wheels when they are not on the
# library path already. cudarc looks for unversioned or CUDA-versioned names (libnccl.so,
# libcublas.so.12), while the wheels ship libnccl.so.2 and libcublas.so.<major>, so the
# script links the unversioned names to them in a scratch folder.
set -u

out=${1:?usage: scripts/device-check.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
step_timeout=${STEP_TIMEOUT:-300}
repo=$(cd "$(dirname "$0")/.." && pwd)

bin=${MICROBENCH:-}
if [ -z "$bin" ]; then
    for candidate in "$repo"/target-mb/release/microbench "$repo"/target/release/microbench \
        "$repo"/target-mb/debug/microbench "$repo"/target/debug/microbench; do
        if [ -x "$candidate" ]; then bin=$candidate; break; fi
    done
fi
printf 'step\texit\tseconds\n' > "$out/steps.tsv"
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
    echo "device-check: no microbench binary found (set MICROBENCH=...)" | tee "$out/error.txt" >&2
    printf 'find-binary\t127\t0\n' >> "$out/steps.tsv"
    exit 1
fi

# Library folders of the nvidia-* wheels (nvidia/nccl/lib, nvidia/cublas/lib, ...).
libs=$(python3 - <<'PY' 2>/dev/null
import glob, os
try:
    import nvidia
except ImportError:
    raise SystemExit(0)
for root in list(getattr(nvidia, "__path__", [])):
    for lib in sorted(glob.glob(os.path.join(root, "*", "lib"))):
        print(lib)
PY
)
links=$(mktemp -d)
trap 'rm -rf "$links"' EXIT
for dir in $libs; do
    for pattern in 'libnccl.so.*' 'libcublas.so.*' 'libcublasLt.so.*'; do
        for lib in "$dir"/$pattern; do
            [ -e "$lib" ] || continue
            base=$(basename "$lib")
            ln -sf "$lib" "$links/${base%%.so.*}.so"
        done
    done
done
export LD_LIBRARY_PATH="$links${libs:+:$(echo "$libs" | paste -sd: -)}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{
    echo "binary: $bin"
    echo "LD_LIBRARY_PATH: $LD_LIBRARY_PATH"
    ls -l "$links"
    nvidia-smi --query-gpu=index,name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv 2>&1
    nvidia-smi topo -m 2>&1
} > "$out/environment.txt"

# step NAME FILE ARGS...: runs microbench ARGS, stdout to FILE, stderr to NAME.err.
step() {
    local name=$1 file=$2
    shift 2
    local start end rc
    start=$(date +%s)
    timeout "$step_timeout" "$bin" "$@" > "$out/$file" 2> "$out/$name.err"
    rc=$?
    end=$(date +%s)
    printf '%s\t%s\t%s\n' "$name" "$rc" "$((end - start))" >> "$out/steps.tsv"
    if [ "$rc" -ne 0 ]; then
        echo "device-check: $name failed (exit $rc): $(head -c 400 "$out/$name.err")" >&2
    fi
}

step topo topo.txt topo
step topo-json topo.json --json topo
step gemm gemm.txt gemm --shape 8192x8192x8192 --dtype bf16 --gpu 0
step gemm-json gemm.jsonl --json gemm --shape 8192x8192x8192 --dtype bf16 --gpu 0
step hbm hbm.txt copy --path hbm --gpu 0 -b 64M -e 4G -f 4
step hbm-json hbm.jsonl --json copy --path hbm --gpu 0 -b 64M -e 4G -f 4
step h2d h2d.txt copy --path h2d,d2h --gpu 0 -b 64M -e 1G -f 4
step h2d-json h2d.jsonl --json copy --path h2d,d2h --gpu 0 -b 64M -e 1G -f 4
step all-reduce all_reduce.txt all-reduce -b 8 -e 8G -f 2 -n 20 -w 5
step all-reduce-json all_reduce.jsonl --json all-reduce -b 8 -e 8G -f 2 -n 20 -w 5

# job_step NAME FILE RANKS ARGS...: runs RANKS microbench processes as one job on this node, as
# torchrun would start them (RANK, WORLD_SIZE, LOCAL_RANK = the GPU, rank 0's rendezvous on
# 127.0.0.1); rank 0's stdout to FILE, rank r's stderr to NAME.rank<r>.err (and stdout, for
# r > 0, to NAME.rank<r>.out); the step's exit is the first non-zero rank's, in rank order.
job_step() {
    local name=$1 file=$2 ranks=$3
    shift 3
    local start end rc=0 r port pid dest pids=()
    port=$(( 20000 + RANDOM % 20000 ))
    start=$(date +%s)
    for ((r = 0; r < ranks; r++)); do
        dest="$out/$name.rank$r.out"
        [ "$r" -eq 0 ] && dest="$out/$file"
        RANK=$r WORLD_SIZE=$ranks LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
            timeout "$step_timeout" "$bin" "$@" > "$dest" 2> "$out/$name.rank$r.err" &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do
        wait "$pid"
        r=$?
        if [ "$rc" -eq 0 ] && [ "$r" -ne 0 ]; then rc=$r; fi
    done
    end=$(date +%s)
    printf '%s\t%s\t%s\n' "$name" "$rc" "$((end - start))" >> "$out/steps.tsv"
    if [ "$rc" -ne 0 ]; then
        echo "device-check: $name failed (exit $rc): $(cat "$out/$name".rank*.err | head -c 800)" >&2
    fi
}

# NCCL refuses two ranks on one GPU, and a world of one rank is not a job (microbench then runs
# alone, as the all-reduce step above already did): with one GPU the step is skipped, saying so.
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "$gpus" -ge 2 ]; then
    ranks=$(( gpus < 8 ? gpus : 8 ))
    job_step job-all-reduce job_all_reduce.txt "$ranks" all-reduce -b 1M -e 1G -f 4 -n 20 -w 5
    job_step job-all-reduce-json job_all_reduce.jsonl "$ranks" --json all-reduce -b 1M -e 1G -f 4 -n 20 -w 5
else
    echo "device-check: job-all-reduce skipped: $gpus GPU(s) here; a multi-process NCCL job needs one GPU per rank and 2 or more ranks" \
        | tee "$out/job-all-reduce.skipped" >&2
    printf 'job-all-reduce\tskip\t0\n' >> "$out/steps.tsv"
fi

# Best figures next to what an H200 should give (PyTorch bf16 8192^3 ~790 TFLOP/s; HBM copy
# ~4.3 TB/s counting reads and writes).
python3 - "$out" > "$out/summary.txt" 2>&1 <<'PY'
import json, os, sys
out = sys.argv[1]
def records(name):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]
def best(name, kind, field):
    values = [r[field] for r in records(name) if r["kind"] == kind and r.get(field)]
    return max(values) if values else None
rows = [
    ("gemm bf16 8192^3", best("gemm.jsonl", "gemm", "flops"), 1e12, "TFLOP/s", "~790 on H200 (PyTorch)"),
    ("hbm copy busbw", best("hbm.jsonl", "hbm_copy", "busbw"), 1e12, "TB/s", "~4.3 on H200 (reads + writes)"),
    ("h2d busbw", best("h2d.jsonl", "h2d", "busbw"), 1e9, "GB/s", "~55 on PCIe 5.0 x16"),
    ("d2h busbw", best("h2d.jsonl", "d2h", "busbw"), 1e9, "GB/s", "~55 on PCIe 5.0 x16"),
    ("all_reduce busbw", best("all_reduce.jsonl", "all_reduce", "busbw"), 1e9, "GB/s", "0 with one GPU (factor 2(n-1)/n)"),
    ("job all_reduce", best("job_all_reduce.jsonl", "all_reduce", "busbw"), 1e9, "GB/s", "as all_reduce above (one process per GPU); missing with one GPU"),
]
for name, value, scale, unit, expect in rows:
    shown = "missing" if value is None else "%.2f %s" % (value / scale, unit)
    print("%-18s %-20s expected %s" % (name, shown, expect))
PY
cat "$out/summary.txt"
cat "$out/steps.tsv"
# Non-zero when any step failed, so a caller sees it without reading steps.tsv; a skipped step
# (its reason in <step>.skipped) is not a failure.
awk -F'\t' 'NR > 1 && $2 != 0 && $2 != "skip" { failed = 1 } END { exit failed }' "$out/steps.tsv"
