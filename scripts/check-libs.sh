#!/usr/bin/env bash
# The real GPU libraries, without a GPU: downloads NVIDIA's NCCL and cuBLAS wheels for CUDA 12
# and CUDA 13 into a cache outside the repository, and checks that `microbench libs` finds
# each under the name the wheel ships (libnccl.so.2, libcublasLt.so.12, libcublasLt.so.13),
# resolves every symbol microbench calls, reads ncclGetVersion and cublasLtGetVersion, and
# makes an NCCL unique id (which needs no GPU). Offline and without a cached copy, it says so
# and skips. scripts/test.sh runs it; it runs alone too.
#
#   scripts/check-libs.sh            cache: $MESHFIT_WHEELS, else ${XDG_CACHE_HOME:-~/.cache}/meshfit-wheels
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '== check-libs: %s\n' "$*" >&2; }
fail() { printf 'check-libs: %s\n' "$*" >&2; exit 1; }

cache=${MESHFIT_WHEELS:-${XDG_CACHE_HOME:-$HOME/.cache}/meshfit-wheels}
mkdir -p "$cache"

# One set per CUDA major: an NCCL wheel and a cuBLAS wheel, and the cuBLASLt name each ships.
sets=(
  "cuda12 nvidia-nccl-cu12 nvidia-cublas-cu12 libcublasLt.so.12"
  "cuda13 nvidia-nccl-cu13 nvidia-cublas>=13 libcublasLt.so.13"
)

# The wheel of `package` in the cache, downloaded when none is there yet.
wheel() {
  local package=$1 stem
  stem=$(printf '%s' "${package%%[<>=]*}" | tr - _)
  local found
  found=$(find "$cache" -maxdepth 1 -name "${stem}-*.whl" | sort | tail -n 1)
  if [ -z "$found" ]; then
    if ! python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$cache" "$package" >&2; then
      return 1
    fi
    found=$(find "$cache" -maxdepth 1 -name "${stem}-*.whl" | sort | tail -n 1)
  fi
  printf '%s\n' "$found"
}

# The wheel's NCCL and cuBLASLt files, unpacked into a directory of its own (wheels of both
# CUDA majors use nvidia/nccl/lib); the rest of the wheel (libcublas, 600 MB) is not needed.
unpacked() {
  local whl=$1 dir
  dir="$cache/unpacked/$(basename "$whl" .whl)"
  if [ ! -f "$dir/.done" ]; then
    rm -rf "$dir"
    mkdir -p "$dir"
    python3 - "$whl" "$dir" <<'PY'
import sys, zipfile
wheel = zipfile.ZipFile(sys.argv[1])
for name in wheel.namelist():
    if name.rsplit("/", 1)[-1].startswith(("libnccl.so", "libcublasLt.so")):
        wheel.extract(name, sys.argv[2])
PY
    touch "$dir/.done"
  fi
  printf '%s\n' "$dir"
}

command -v python3 >/dev/null || fail "python3 is needed to download and unpack the wheels"

start=$(date +%s)
declare -A dirs
for set in "${sets[@]}"; do
  read -r name nccl cublas _ <<<"$set"
  for package in "$nccl" "$cublas"; do
    if ! whl=$(wheel "$package"); then
      say "cannot download $package (offline?) and none is cached in $cache: skipped"
      exit 0
    fi
    dirs["$name $package"]=$(unpacked "$whl")
  done
done
mib() { du -scm "$@" | tail -n 1 | cut -f1; }
say "$cache: $(mib "$cache"/*.whl) MiB of wheels, $(mib "$cache/unpacked") MiB unpacked; fetched and unpacked in $(( $(date +%s) - start )) s"

cargo build --quiet --locked -p microbench
bin=${CARGO_TARGET_DIR:-target}/debug/microbench

for set in "${sets[@]}"; do
  read -r name nccl cublas lt <<<"$set"
  nccl_lib=$(dirname "$(find "${dirs["$name $nccl"]}" -name libnccl.so.2 | head -n 1)")
  lt_lib=$(dirname "$(find "${dirs["$name $cublas"]}" -name "$lt" | head -n 1)")
  [ -d "$nccl_lib" ] && [ -d "$lt_lib" ] || fail "$name: the wheels lack libnccl.so.2 or $lt"
  # libs exits 1 here when there is no driver; the document says what is usable.
  doc=$(LD_LIBRARY_PATH="$nccl_lib:$lt_lib" "$bin" libs --format json) || true
  text=$(LD_LIBRARY_PATH="$nccl_lib:$lt_lib" "$bin" libs) || true
  printf '%s\n' "$text" | sed "s/^/  $name: /" >&2
  NCCL_LIB=$nccl_lib LT_LIB=$lt_lib LT=$lt SET=$name python3 -c '
import json, os, sys
doc = json.loads(sys.stdin.read())
libs = {l["library"]: l for l in doc["libraries"]}
def check(ok, what):
    if not ok:
        sys.exit("check-libs: %s: %s\n%s" % (os.environ["SET"], what, json.dumps(doc, indent=1)))
for key, name, where, major in (("nccl", "libnccl.so.2", os.environ["NCCL_LIB"], "2."),
                                ("cublas_lt", os.environ["LT"], os.environ["LT_LIB"],
                                 os.environ["LT"].rsplit(".", 1)[1] + ".")):
    l = libs[key]
    check(l["name"] == name, "%s loaded as %r, not %s" % (key, l["name"], name))
    check((l["path"] or "").startswith(where), "%s from %r, not %s" % (key, l["path"], where))
    check(l["missing_symbols"] == [], "%s lacks %s" % (key, l["missing_symbols"]))
    check((l["version"] or "").startswith(major), "%s version %r" % (key, l["version"]))
    check(l["error"] is None, "%s: %s" % (key, l["error"]))
check(libs["nccl"]["unique_id_works"] is True, "ncclGetUniqueId failed")
# The driver is this machine'"'"'s: without one, only the driver'"'"'s two libraries are unusable.
if libs["cuda"]["name"] is None:
    check(doc["usable"] is False, "usable without a driver")
' <<<"$doc"
done
say "NCCL and cuBLASLt of CUDA 12 and 13 found by their shipped names, every symbol resolved"
