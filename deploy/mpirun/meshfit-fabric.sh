#!/usr/bin/env bash
# meshfit multi-node fabric calibration under Open MPI's mpirun (deploy/README.md,
# "Multi-node calibration"). One process per GPU; each learns its rank from Open MPI
# (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK) and meets the others at a TCP rendezvous hosted by
# rank 0 on the first host of the hostfile. microbench links no MPI library: mpirun only starts
# the processes.
#
#   deploy/mpirun/meshfit-fabric.sh HOSTFILE [`microbench fabric` sweep flags]
#
# HOSTFILE is Open MPI's: one host per line (`node1 slots=8`), the first one runs rank 0.
# Flags given replace the default sweep, `-b 8M -e 1G -f 2 -n 20 -w 5` (clap refuses a flag
# given twice, so they cannot be appended to it).
#
# Environment (all optional):
#   MPIRUN              the launcher (default: mpirun on PATH; Open MPI 4 or 5)
#   MICROBENCH          the microbench binary, at the same path on every host (default: on PATH)
#   GPUS_PER_NODE       processes, and GPUs, per host (default 8)
#   MASTER_PORT         rendezvous port on the first host (default 29500)
#   MESHFIT_RESULTS     directory, shared by the hosts, for the results (default ./meshfit-fabric);
#                       rank 0 writes $MESHFIT_RESULTS/<run>.jsonl for `tuner recommend --measurements`
#   MESHFIT_STATE_DIR   where each host's records go (fabric.jsonl). Default: a directory per host
#                       under $MESHFIT_RESULTS/<run>/nodes/. Set it to the agent's state
#                       directory (/var/lib/meshfit-agent) where the agent runs on the hosts
#                       and this user may write there: the agent then exports them.
#   RENDEZVOUS_TIMEOUT  seconds to wait for every rank (default 600)
#   NCCL_*              NCCL's settings (NCCL_IB_HCA, NCCL_SOCKET_IFNAME, ...), passed to every rank
set -euo pipefail

usage="usage: deploy/mpirun/meshfit-fabric.sh HOSTFILE [microbench fabric sweep flags]"
hostfile=${1:?$usage}
shift
[ -r "$hostfile" ] || { echo "meshfit-fabric: cannot read hostfile $hostfile; $usage" >&2; exit 2; }
if [ $# -eq 0 ]; then
  set -- -b 8M -e 1G -f 2 -n 20 -w 5
fi

mpirun=${MPIRUN:-mpirun}
microbench=${MICROBENCH:-microbench}
gpus=${GPUS_PER_NODE:-8}
results=${MESHFIT_RESULTS:-$PWD/meshfit-fabric}
run=fabric-$(date -u +%Y%m%dT%H%M%SZ)
# Hosts: the first word of every line that is not blank or a comment.
mapfile -t hosts < <(sed -e 's/#.*//' "$hostfile" | awk 'NF { print $1 }')
if [ "${#hosts[@]}" -lt 2 ]; then
  echo "meshfit-fabric: $hostfile names ${#hosts[@]} host(s); a fabric calibration needs 2 or more" >&2
  exit 2
fi
# --map-by ppr:N:node fills the first host with ranks 0..N-1, so rank 0 is there.
MASTER_ADDR=${hosts[0]}
MASTER_PORT=${MASTER_PORT:-29500}
export MASTER_ADDR MASTER_PORT
export MESHFIT_FABRIC_NODES_DIR=$results/$run/nodes
mkdir -p "$results"

# Every NCCL_* variable of this shell, and the ones the ranks need, go to every rank (-x).
forward=(-x MASTER_ADDR -x MASTER_PORT -x MESHFIT_FABRIC_NODES_DIR -x PATH)
for name in LD_LIBRARY_PATH MESHFIT_STATE_DIR $(compgen -e | grep '^NCCL_' || true); do
  if [ -n "${!name+set}" ]; then
    forward+=(-x "$name")
  fi
done

echo "meshfit-fabric: $run, ${#hosts[@]} hosts x $gpus ranks, rendezvous $MASTER_ADDR:$MASTER_PORT"
# --map-by ppr:N:node is `-npernode N` (deprecated in Open MPI 5). --bind-to none: each rank
# drives one GPU and NCCL places its own proxy threads; the default core binding would squeeze
# them onto the rank's core. Every rank sees all GPUs and drives GPU OMPI_COMM_WORLD_LOCAL_RANK,
# so GPU i keeps its physical index and its rail (NIC i) in the pairwise pass.
# shellcheck disable=SC2016 # $MESHFIT_* expand on each host, not here.
"$mpirun" -np $(( ${#hosts[@]} * gpus )) --hostfile "$hostfile" --map-by "ppr:$gpus:node" \
  --bind-to none "${forward[@]}" \
  bash -c 'state=${MESHFIT_STATE_DIR:-$MESHFIT_FABRIC_NODES_DIR/${MESHFIT_NODE_NAME:-$(hostname -s)}}
           mkdir -p "$state" && exec "$@" --state-dir="$state"' meshfit-fabric \
  "$microbench" fabric --launcher=mpi \
    --rendezvous-timeout="${RENDEZVOUS_TIMEOUT:-600}" \
    --out="$results/$run.jsonl" \
    "$@"

echo "meshfit-fabric: job-wide records in $results/$run.jsonl (tuner recommend --measurements FILE)"
