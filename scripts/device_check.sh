#!/usr/bin/env bash
# The GPU check, in two halves, for a GPU machine that is bare (CUDA, PyTorch,
# cmake and ninja, none of kiln's Debian packages, no installs) and lent for
# minutes at a time.
#
#   scripts/device_check.sh pack   here: builds the release tree (CUDA
#       backend on), writes the oracle data, and packs the cuda-labelled tests
#       (as ctest defines them: command, environment), the CUDA benchmarks,
#       the kiln CLI and every shared library they need that is not the C
#       library or CUDA's own into .device/kiln-device.tar.gz (ignored by git,
#       under 60 MiB). Prints the command to run there.
#   scripts/device_check.sh run    there, in the repository root: unpacks the
#       archive and runs each test and benchmark with a time limit (the
#       fused kernels' tests and benchmark first), writing
#       every log and a summary to $OUT (.device/out when unset), then
#       bench/gpu_train_vs_torch.py in the time left, all within 8 minutes
#       (what runs out of time is marked so). Exits
#       non-zero when a test failed. Run here, it checks the package itself:
#       every device test reports "skipped: no CUDA device".
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
pkg_dir=.device
archive=$pkg_dir/kiln-device.tar.gz
max_bytes=$((60 * 1024 * 1024))

# Libraries the GPU machine has itself: the C library and the CUDA toolkit's.
system_lib() {
  case "$(basename "$1")" in
    linux-vdso.so*|ld-linux*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*) return 0 ;;
    libstdc++.so*|libgcc_s.so*) return 0 ;;  # there: GCC 12's or newer, which PyTorch needs too
    libcuda.so*|libcudart.so*|libcublas*.so*|libnvrtc*.so*|libnvJitLink*.so*) return 0 ;;
    libnccl.so*) return 0 ;;  # loaded at run time, never linked; PyTorch's is there
  esac
  return 1
}

pack() {
  export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
  cmake -S . -B build -G Ninja -DKILN_CUDA=ON ${KILN_CMAKE_ARGS:-} >/dev/null
  cmake --build build
  # The oracle data the device tests compare with (written by PyTorch here).
  ctest --test-dir build -R '^oracle_data_' --output-on-failure >/dev/null

  local stage=$pkg_dir/stage
  rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib" "$stage/build/oracle"
  # The cuda tests as ctest runs them: one line each, name|env|command.
  ctest --test-dir build -L cuda --show-only=json-v1 >"$stage/tests.json"
  python3 - "$stage/tests.json" "$root/build" >"$stage/tests.tsv" <<'EOF'
import json, os, sys
data, build = json.load(open(sys.argv[1])), sys.argv[2]
for t in data["tests"]:
    if t["name"].startswith("oracle_data_"):
        continue  # the fixture's output is packed: PyTorch wrote it here
    env = []
    for p in t.get("properties", []):
        if p["name"] == "ENVIRONMENT":
            env = [e.replace(build, "@BUILD@") for e in p["value"]]
    cmd = [c.replace(build, "@BUILD@") for c in t["command"]]
    print(t["name"], " ".join(env), " ".join(cmd), sep="|")
EOF
  local binaries=(build/kiln)
  while IFS='|' read -r _ _ cmd; do
    binaries+=("${cmd%% *}")
  done <"$stage/tests.tsv"
  for b in build/bench/*cuda*; do
    [ -x "$b" ] && binaries+=("$b")
  done
  for b in "${binaries[@]}"; do
    b=${b/@BUILD@/build}
    mkdir -p "$stage/$(dirname "$b")"
    cp "$b" "$stage/$b"
    ldd "$b" | awk '/=> \// {print $3}' | while read -r lib; do
      system_lib "$lib" || cp -nL "$lib" "$stage/lib/"
    done
  done
  # Loaded, not linked (kiln/backend/cpu/isa.h): next to the CPU backend.
  for copy in build/libkiln_backend_cpu_x86_64_v4.so; do
    [ -f "$copy" ] && cp "$copy" "$stage/lib/"
  done
  cp build/oracle/*.safetensors "$stage/build/oracle/"
  cp bench/*cuda*.py "$stage/bin/" 2>/dev/null || true
  tar -C "$stage" -czf "$archive" .
  rm -rf "$stage"
  local bytes
  bytes=$(stat -c %s "$archive")
  if [ "$bytes" -gt "$max_bytes" ]; then
    echo "device_check.sh: $archive is $((bytes / 1048576)) MiB, over the 60 MiB limit" >&2
    exit 1
  fi
  echo "packed $archive ($((bytes / 1048576)) MiB, ${#binaries[@]} binaries)"
  echo "on the GPU machine (device tool): run command='bash scripts/device_check.sh run' carry=['$pkg_dir']"
}

run() {
  [ -f "$archive" ] || { echo "device_check.sh: no $archive; run 'scripts/device_check.sh pack' first" >&2; exit 2; }
  local out=${OUT:-$root/$pkg_dir/out}
  mkdir -p "$out"
  local work=/tmp/kiln-device
  rm -rf "$work" && mkdir -p "$work" && tar -C "$work" -xzf "$archive"
  # The test binaries' compiled-in paths name this checkout's place on the
  # packing machine (/work/main); give them the same place here.
  [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
  export LD_LIBRARY_PATH="$work/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # NCCL (kiln/backend/nccl/library.h dlopens it): the toolkit's, else PyTorch's wheel's.
  local nccl_dir
  nccl_dir=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0] + "/lib")' 2>/dev/null || true)
  [ -n "$nccl_dir" ] && [ -d "$nccl_dir" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl_dir"
  export KILN_FUSED_CODEGEN=0 OMP_WAIT_POLICY=passive  # CPU references: no system compiler needed
  local summary=$out/summary.txt failed=0 deadline=$((SECONDS + 470))
  # Seconds a step may take: at most `cap`, and never past the deadline.
  budget() {
    local left=$((deadline - SECONDS))
    echo $((left < $1 ? left : $1))
  }
  {
    echo "device check $(date -u +%FT%TZ)"
    command -v nvidia-smi >/dev/null &&
      nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1
    "$work/build/kiln" info 2>&1 || true
  } | tee "$summary"
  # One test (a tests.tsv line) within its budget.
  run_test() {
    local name=$1 env=$2 cmd=$3 log=$out/$1.log start=$SECONDS rc=0 limit
    limit=$(budget 150)
    if [ "$limit" -lt 10 ]; then
      printf '%-28s %-18s\n' "$name" "NOT RUN (time)" | tee -a "$summary"; failed=1; return
    fi
    env=${env//@BUILD@/$work/build}
    cmd=${cmd//@BUILD@/$work/build}
    mkdir -p "$work/build/test-cache"
    # shellcheck disable=SC2086
    (export $env; timeout "$limit" $cmd) >"$log" 2>&1 || rc=$?
    local verdict=passed
    if [ "$rc" -ne 0 ]; then verdict="FAILED (exit $rc)"; failed=1
    elif grep -q "skipped: no CUDA device" "$log"; then verdict=skipped; fi
    printf '%-28s %-18s %4ds\n' "$name" "$verdict" $((SECONDS - start)) | tee -a "$summary"
  }
  run_bench() {
    local b=$1 log=$out/$(basename "$1").log rc=0 limit
    limit=$(budget 90)
    [ "$limit" -ge 10 ] || { echo "$(basename "$b"): not run (time)" | tee -a "$summary"; return; }
    timeout "$limit" "$b" >"$log" 2>&1 || rc=$?
    printf '%-28s exit %d\n' "$(basename "$b")" "$rc" | tee -a "$summary"
    tail -n 20 "$log" >>"$summary"
  }
  # The fused kernels' tests and benchmark first (what is newest), then the rest.
  local first='^(cuda_graph|transfer|flash_attention|linear_cross_entropy|grouped_matmul|nccl)_cuda_test$'
  while IFS='|' read -r name env cmd; do
    [[ $name =~ $first ]] && run_test "$name" "$env" "$cmd"
  done <"$work/tests.tsv"
  [ -x "$work/build/bench/cuda_fused_kernels_bench" ] && run_bench "$work/build/bench/cuda_fused_kernels_bench"
  while IFS='|' read -r name env cmd; do
    [[ $name =~ $first ]] || run_test "$name" "$env" "$cmd"
  done <"$work/tests.tsv"
  for b in "$work"/build/bench/*; do
    [ -x "$b" ] && [ "$(basename "$b")" != cuda_fused_kernels_bench ] && run_bench "$b"
  done
  # Training against PyTorch on the GPU, in what time is left (torch is there).
  local limit rc=0
  limit=$(budget 300)
  if [ "$limit" -ge 60 ]; then
    timeout "$limit" python3 bench/gpu_train_vs_torch.py --kiln "$work/build/kiln" \
      --configs llama_1b --quick --timeout "$limit" >"$out/gpu_train_vs_torch.log" 2>&1 || rc=$?
    printf '%-28s exit %d\n' gpu_train_vs_torch.py "$rc" | tee -a "$summary"
    tail -n 25 "$out/gpu_train_vs_torch.log" >>"$summary"
  else
    echo "gpu_train_vs_torch.py: not run (time)" | tee -a "$summary"
  fi
  return $failed
}

case "${1:-}" in
  pack) pack ;;
  run) run ;;
  *) echo "usage: scripts/device_check.sh pack|run" >&2; exit 2 ;;
esac
