#!/usr/bin/env bash
# Runs the prebuilt microbench on a machine with an NVIDIA GPU and writes what it saw to a
# folder: first `microbench libs` (which NVML, driver, cuBLASLt and NCCL files load, their
# versions, any symbol missing), then topology, GEMM 8192^3 bf16, HBM, host-to-device and
# device-to-host copies, an NCCL all-reduce over the GPUs present (one GPU gives a one-rank
# communicator), peer copies and the same all-reduce as a job of one process per GPU where
# there are 2 or more GPUs. Every step writes JSON (the tables are what `microbench` prints
# from the same records); a failed step is recorded in steps.tsv with its exit code and the
# next one still runs. Ends with a one-screen summary (summary.txt): the figures against the
# datasheet, the topology NVML saw, and each failed step with the first line of its error.
#
# Usage: scripts/device-check.sh [OUT_DIR]      OUT_DIR defaults to $OUT
#   MICROBENCH=path/to/microbench  the binary (default: the first built one under target*/)
#   STEP_TIMEOUT=seconds           limit per step (default 300)
# Build the binary first on the x86-64 build machine: cargo build --release -p microbench
#
# cuBLASLt and NCCL come from the library path, or else from the Python environment's nvidia-*
# wheels (nvidia/nccl/lib, nvidia/cublas/lib, CUDA 13's nvidia/cu13/lib), added to
# LD_LIBRARY_PATH: microbench opens them by the names the wheels ship (libnccl.so.2,
# libcublasLt.so.12 or .13).
set -u

out=${1:-${OUT:-}}
if [ -z "$out" ]; then
    echo "usage: scripts/device-check.sh OUT_DIR (or set OUT)" >&2
    exit 2
fi
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

# Library folders of the nvidia-* wheels, when the Python environment has them.
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
if [ -n "$libs" ]; then
    export LD_LIBRARY_PATH="$(echo "$libs" | paste -sd: -)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
{
    echo "binary: $bin"
    echo "LD_LIBRARY_PATH: ${LD_LIBRARY_PATH:-}"
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

step libs libs.json libs --format json
step topo topo.json --json topo
step gemm gemm.jsonl --json gemm --shape 8192x8192x8192 --dtype bf16 --gpu 0
step hbm hbm.jsonl --json copy --path hbm --gpu 0 -b 64M -e 4G -f 4
step host-copy host_copy.jsonl --json copy --path h2d,d2h --gpu 0 -b 64M -e 1G -f 4
step all-reduce all_reduce.jsonl --json all-reduce -b 8 -e 8G -f 2 -n 20 -w 5

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
            TORCHELASTIC_RUN_ID="device-check-$name-$port" timeout "$step_timeout" "$bin" "$@" > "$dest" 2> "$out/$name.rank$r.err" &
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
        cat "$out/$name".rank*.err > "$out/$name.err"
        echo "device-check: $name failed (exit $rc): $(head -c 800 "$out/$name.err")" >&2
    fi
}

# skip NAME WHY: a step this machine cannot run, with the reason in NAME.skipped.
skip() {
    echo "device-check: $1 skipped: $2" | tee "$out/$1.skipped" >&2
    printf '%s\tskip\t0\n' "$1" >> "$out/steps.tsv"
}

# Peer copies and a multi-process job need two GPUs: NCCL refuses two ranks on one GPU, and a
# world of one rank is not a job (microbench then runs alone, as the all-reduce step did).
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "$gpus" -ge 2 ]; then
    ranks=$(( gpus < 8 ? gpus : 8 ))
    step p2p p2p.jsonl --json copy --path p2p,p2p-bidir --gpu 0,1 -b 64M -e 1G -f 4
    job_step job-all-reduce job_all_reduce.jsonl "$ranks" --json all-reduce -b 1M -e 1G -f 4 -n 20 -w 5
else
    why="$gpus GPU(s) here; it needs 2 or more"
    skip p2p "$why"
    skip job-all-reduce "$why"
fi

python3 "$repo/scripts/device-summary.py" "$out" > "$out/summary.txt" 2>&1
cat "$out/summary.txt"
# Non-zero when any step failed, so a caller sees it without reading steps.tsv; a skipped step
# (its reason in <step>.skipped) is not a failure.
awk -F'\t' 'NR > 1 && $2 != 0 && $2 != "skip" { failed = 1 } END { exit failed }' "$out/steps.tsv"
