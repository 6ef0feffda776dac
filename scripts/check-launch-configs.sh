#!/usr/bin/env bash
# Runs the launch configs `tuner --emit` writes through each framework's own parser
# (scripts/launch_configs.py): torchtitan 0.3.0's and v0.2.2's ConfigManager and pipeline
# split, DeepSpeed 0.19.8's DeepSpeedConfig, Megatron-LM core_v0.19.0's parse_args and
# validate_args.
#
# The frameworks install into a virtual environment in the user's cache, outside the
# repository (MESHFIT_FRAMEWORKS overrides where): about 6 GB and 4 minutes the first time
# with PyPI's CUDA build of torch, much less with the CPU build, nothing after. Megatron-LM's
# training code is not on PyPI: it comes from GitHub's archive of the tag, or from a checkout
# named by MEGATRON_LM_SRC. Offline, each missing part is skipped with one line.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '== %s\n' "$*" >&2; }

cache=${MESHFIT_FRAMEWORKS:-${XDG_CACHE_HOME:-$HOME/.cache}/meshfit-frameworks}
venv=$cache/venv
megatron_tag=core_v0.19.0
pins="torchtitan==0.2.2 deepspeed==0.19.8"
python=${PYTHON:-python3}

online() { curl -sf --max-time 10 -o /dev/null "$1"; }

if [ "$(cat "$venv/.meshfit-pins" 2>/dev/null)" != "$pins" ]; then
  if ! online https://pypi.org/simple/pip/; then
    say "launch configs: skipped: PyPI unreachable, so the framework parsers are not installed"
    exit 0
  fi
  say "launch configs: installing $pins into $venv"
  rm -rf "$venv"
  "$python" -m venv "$venv"
  pip=("$venv/bin/pip" install -q --disable-pip-version-check)
  # The CPU build is a tenth of the size; PyPI's default build carries CUDA.
  "${pip[@]}" torch --index-url https://download.pytorch.org/whl/cpu 2>/dev/null || "${pip[@]}" torch
  # torchtitan's own pins pull its data and logging stacks, which reading a config never runs.
  "${pip[@]}" tyro tomli tokenizers torchdata tensorboard datasets einops numpy packaging
  "${pip[@]}" --no-deps torchtitan==0.2.2
  DS_BUILD_OPS=0 "${pip[@]}" deepspeed==0.19.8
  echo "$pins" >"$venv/.meshfit-pins"
fi

# torchtitan 0.3 beside 0.2.2, without a second torch: its own files first on PYTHONPATH,
# with the small packages it adds to 0.2.2's dependencies (torchao for its float8 configs).
titan03=$cache/torchtitan-0.3
titan03_pins="torchtitan==0.3.0 spmd_types==0.2.3 torch_checkpointing==0.1.1 torchao==0.18.0"
if [ "$(cat "$titan03/.meshfit-pins" 2>/dev/null)" != "$titan03_pins" ]; then
  if online https://pypi.org/simple/pip/; then
    say "launch configs: installing $titan03_pins into $titan03"
    rm -rf "$titan03"
    # shellcheck disable=SC2086 # the pins are words
    "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --target "$titan03" $titan03_pins
    echo "$titan03_pins" >"$titan03/.meshfit-pins"
  else
    say "launch configs: torchtitan 0.3 skipped: PyPI unreachable"
    titan03=
  fi
fi

megatron=${MEGATRON_LM_SRC:-$cache/megatron-lm-$megatron_tag}
if [ ! -d "$megatron/megatron/training" ]; then
  url=https://github.com/NVIDIA/Megatron-LM/archive/refs/tags/$megatron_tag.tar.gz
  if online "$url"; then
    mkdir -p "$megatron"
    curl -sfL "$url" | tar -xz -C "$megatron" --strip-components 1
  else
    say "launch configs: Megatron-LM skipped: $url unreachable (set MEGATRON_LM_SRC to a checkout of $megatron_tag)"
    megatron=
  fi
fi

cargo build -q --locked --bin tuner
tuner=$(cargo metadata -q --format-version 1 --no-deps | "$python" -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/debug/tuner
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# One framework's parser over one emitted file; its output is shown only when it refuses.
check() {
  local name=$1 kind=$2 file=$3
  shift 3
  if ! PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$megatron "$venv/bin/python" scripts/launch_configs.py "$kind" "$file" "$@" >"$out/log" 2>&1; then
    cat "$file" "$out/log" >&2
    say "launch configs: $kind refused $name"
    exit 1
  fi
  sed -n "s|^read: |$name $kind: |p" "$out/log" >&2
}

# Layouts that exercise each mapping: an interleaved pipeline, an uneven split (126 layers on
# 16 stages, and on 8 x 8 virtual stages; DeepSeek-V3's 61 on 4 x 4 with edge stages of 16
# and 13), an MoE model with leading dense layers, fp8, combined 1F1B, GPT-OSS (sliding-window
# attention on every other layer, YaRN, attention sinks, biases, clamped QuickGELU gating),
# Qwen3's MoE with per-head query and key norms, with and without a pipeline, and the search's
# own choices.
layouts=(
  "70b-interleaved|explain --model 70b --gpus 512 --tp 8 --pp 8 --dp 8 --zero 1"
  "405b-uneven|explain --model 405b --gpus 2048 --tp 8 --pp 16 --dp 16 --virtual-stages 1"
  "405b-uneven-interleaved|explain --model 405b --gpus 1024 --tp 8 --pp 8 --dp 8 --cp 2 --virtual-stages 8"
  "deepseek-v3-interleaved-edges|explain --model deepseek-v3 --gpus 256 --cluster gb200-nvl72 --tp 1 --pp 4 --dp 64 --ep 64 --virtual-stages 4 --first-stage-layers 16 --last-stage-layers 13 --global-batch 4096"
  "gpt-oss-window|explain --model gpt-oss-120b --gpus 64 --tp 1 --pp 4 --dp 16 --ep 8 --global-batch 1280 --moe-dispatch all-to-all"
  "gpt-oss-20b|explain --model gpt-oss-20b --gpus 8 --tp 1 --pp 1 --dp 8 --ep 8 --global-batch 256 --moe-dispatch all-to-all"
  "405b-fp8-rowwise|explain --model 405b --gpus 2048 --tp 8 --pp 16 --dp 16 --virtual-stages 1 --precision fp8-rowwise"
  "8b-fp8|recommend --model 8b --gpus 64 --precision fp8"
  "8b|recommend --model 8b --gpus 64"
  "deepseek-v3|recommend --model deepseek-v3 --gpus 1024"
  "mixtral-combined|explain --model 8x7b --gpus 32 --tp 1 --pp 1 --dp 32 --ep 8 --schedule combined-1f1b"
  "qwen3-moe|explain --model qwen3-30b-a3b --gpus 16 --tp 1 --pp 1 --dp 16 --ep 16 --global-batch 1024 --moe-dispatch all-to-all"
  "qwen3-moe-pipelined|explain --model qwen3-30b-a3b --gpus 16 --tp 1 --pp 2 --dp 8 --ep 8 --global-batch 1024 --moe-dispatch all-to-all"
)
declare -A refusals=(
  [405b-uneven:torchtitan]="not emitted: bf16 was priced"
  [405b-uneven-interleaved:torchtitan]="not emitted: bf16 was priced"
  [405b-uneven-interleaved:deepspeed]="deepspeed runs no interleaved pipeline schedule"
  [deepseek-v3-interleaved-edges:deepspeed]="deepspeed runs no interleaved pipeline schedule"
  [gpt-oss-window:torchtitan-0.2]="torchtitan v0.2 splits no gpt_oss model into"
  [8b-fp8:torchtitan]="not emitted: tensorwise fp8 was priced"
  [mixtral-combined:torchtitan]="fsdp runs no combined 1F1B"
  [mixtral-combined:torchtitan-0.2]="fsdp runs no combined 1F1B"
  [mixtral-combined:deepspeed]="deepspeed runs no combined 1F1B"
  [qwen3-moe-pipelined:torchtitan-0.2]="torchtitan v0.2 splits no qwen3 model into"
)
for entry in "${layouts[@]}"; do
  name=${entry%%|*}
  read -ra args <<<"${entry#*|}"
  for kind in torchtitan torchtitan-0.2 deepspeed megatron; do
    [ "$kind" = megatron ] && [ -z "$megatron" ] && continue
    [ "$kind" = torchtitan ] && [ -z "$titan03" ] && continue
    file=$out/$name.$kind
    if ! "$tuner" "${args[@]}" --emit "$kind" >"$file" 2>"$out/notes"; then
      # torchtitan 0.3 ships 405B in rowwise fp8 only and scales fp8 per row only, and only
      # Megatron-LM runs combined 1F1B: those are refused by design.
      expected=${refusals["$name:$kind"]:-}
      if [ -n "$expected" ] && grep -qF "$expected" "$out/notes"; then
        say "launch configs: $name $kind: refused as expected ($expected)"
        continue
      fi
      cat "$out/notes" >&2
      say "launch configs: tuner ${args[*]} --emit $kind failed"
      exit 1
    fi
    # Megatron and torchtitan 0.3 take the world size from the launcher.
    world=$(sed -n 's/.*--gpus \([0-9]*\).*/\1/p' <<<"${args[*]}")
    case $kind in
      megatron) check "$name" "$kind" "$file" "$world" ;;
      torchtitan) PYTHONPATH=$titan03 check "$name" "$kind" "$file" "$world" ;;
      *) check "$name" "$kind" "$file" ;;
    esac
  done
done
say "launch configs: every emitted file read by its framework's parser"
