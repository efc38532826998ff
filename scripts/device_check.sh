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
#   scripts/device_check.sh run [all|tests|train]    there, in the
#       repository root: unpacks the archive, checks that kiln sees the GPU
#       (else it says why, with the loader's view of the CUDA libraries, and
#       stops), and runs within 8 minutes: `tests` the device tests (the
#       fused kernels' first, train_cuda_test last) and the CUDA benchmarks,
#       each with a time limit; `train` bench/gpu_train_vs_torch.py alone
#       (kiln's graph trainer + fused kernels, plain and replayed, against
#       torch.compile on llama_1b); `all` (the default) both, the training
#       bench in the time left. $OUT (.device/out when unset) gets three
#       files: summary.txt (also printed), failures.txt (the end of each
#       failed step's log) and logs.tar.gz (every log). Exits non-zero when
#       a test failed or timed out, or, with a GPU there, reported
#       "skipped". Run here, it checks the package itself: every device
#       test reports "skipped: no CUDA device".
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
  # The binaries name this checkout's paths (recipes, bench scripts): run()
  # gives the checkout the same place there.
  echo "$root" >"$stage/pack_root"
  tar -C "$stage" -czf "$archive" .
  rm -rf "$stage"
  local bytes
  bytes=$(stat -c %s "$archive")
  if [ "$bytes" -gt "$max_bytes" ]; then
    echo "device_check.sh: $archive is $((bytes / 1048576)) MiB, over the 60 MiB limit" >&2
    exit 1
  fi
  echo "packed $archive ($((bytes / 1048576)) MiB, ${#binaries[@]} binaries)"
  echo "on the GPU machine (device tool): run command='bash scripts/device_check.sh run' carry=['$pkg_dir'] timeout_s=540"
}

run() {
  local what=${1:-all}
  case "$what" in all|tests|train) ;; *) echo "device_check.sh run: all, tests or train, not '$what'" >&2; exit 2 ;; esac
  [ -f "$archive" ] || { echo "device_check.sh: no $archive; run 'scripts/device_check.sh pack' first" >&2; exit 2; }
  local out=${OUT:-$root/$pkg_dir/out}
  mkdir -p "$out"
  local work=/tmp/kiln-device
  rm -rf "$work" && mkdir -p "$work" && tar -C "$work" -xzf "$archive"
  local logs=$work/logs
  mkdir -p "$logs"
  local summary=$logs/summary.txt failures=$logs/failures.txt failed=0 deadline=$((SECONDS + 470))
  : >"$failures"
  # $OUT brings back a few files: the summary, the failures and one archive of the logs.
  # shellcheck disable=SC2064  # expanded now: the trap runs after run() returns
  trap "cp '$summary' '$failures' '$out/' 2>/dev/null; tar -C '$work' -czf '$out/logs.tar.gz' logs 2>/dev/null" EXIT
  local pack_root
  pack_root=$(cat "$work/pack_root")
  [ -e "$pack_root" ] || { mkdir -p "$(dirname "$pack_root")" && ln -s "$root" "$pack_root"; }
  # kiln's libraries for kiln's binaries only (the wrapper, the tests'
  # environment), never for the machine's Python and PyTorch. CUDA's: the
  # toolkit's, then those of PyTorch's nvidia wheels (NCCL among them).
  local python_ld=${LD_LIBRARY_PATH:-} wheels
  wheels=$(python3 -c 'import glob, os, nvidia; print(":".join(sorted(glob.glob(os.path.join(list(nvidia.__path__)[0], "*", "lib")))))' 2>/dev/null || true)
  local kiln_ld="$work/lib:/usr/local/cuda/lib64${wheels:+:$wheels}${python_ld:+:$python_ld}"
  mkdir -p "$work/bin"
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "'$kiln_ld'" "$work/build/kiln" >"$work/bin/kiln"
  chmod +x "$work/bin/kiln"
  export KILN_PYTHON="env LD_LIBRARY_PATH='$python_ld' python3" PYTHONUNBUFFERED=1
  export KILN_FUSED_CODEGEN=0 OMP_WAIT_POLICY=passive  # CPU references: no system compiler needed
  # One compile cache for the tests and the benchmarks.
  export KILN_CACHE_DIR=$work/build/test-cache/l3 KILN_L2_CACHE_DIR=$work/build/test-cache/l2
  mkdir -p "$work/build/test-cache"
  # Seconds a step may take: at most `cap`, and never past the deadline.
  budget() {
    local left=$((deadline - SECONDS))
    echo $((left < $1 ? left : $1))
  }
  local gpu=0
  {
    echo "device check ($what) $(date -u +%FT%TZ)"
    if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
      nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1
    fi
    "$work/bin/kiln" info 2>&1 || true
  } | tee "$summary"
  command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 && gpu=1
  if [ "$gpu" = 1 ] && ! grep -q '^ *cuda:0' "$summary"; then
    {
      echo "kiln does not see the GPU nvidia-smi lists: stopping. The loader's view:"
      LD_LIBRARY_PATH=$kiln_ld ldd "$work/build/kiln" | grep -E 'not found|cuda|cublas|nvrtc' || true
      ldconfig -p | grep -E 'libcuda\.|cudart|cublasLt|nvrtc' || true
      ls -d /usr/local/cuda* 2>&1
      ldd --version 2>&1 | head -1
    } | tee -a "$summary"
    return 3
  fi
  # A failed step: its verdict in the summary, the end of its log in failures.txt.
  failure() {
    failed=1
    { echo "== $1 ($2)"; tail -n 40 "$3"; echo; } >>"$failures"
  }
  # One test (a tests.tsv line) within its budget.
  run_test() {
    local name=$1 env=$2 cmd=$3 cap=$4 log=$logs/$1.log start=$SECONDS rc=0 limit
    limit=$(budget "$cap")
    if [ "$limit" -lt 10 ]; then
      printf '%-28s %-18s\n' "$name" "NOT RUN (time)" | tee -a "$summary"; failed=1; return
    fi
    env=${env//@BUILD@/$work/build}
    cmd=${cmd//@BUILD@/$work/build}
    # shellcheck disable=SC2086
    (export $env LD_LIBRARY_PATH="$kiln_ld"; timeout "$limit" $cmd) >"$log" 2>&1 || rc=$?
    local verdict=passed
    if [ "$rc" -eq 124 ]; then verdict="TIMED OUT (${limit}s)"; failure "$name" "$verdict" "$log"
    elif [ "$rc" -ne 0 ]; then verdict="FAILED (exit $rc)"; failure "$name" "$verdict" "$log"
    elif grep -q "skipped: no CUDA device" "$log"; then
      verdict=skipped
      if [ "$gpu" = 1 ]; then verdict="SKIPPED with a GPU"; failure "$name" "$verdict" "$log"; fi
    fi
    printf '%-28s %-18s %4ds\n' "$name" "$verdict" $((SECONDS - start)) | tee -a "$summary"
  }
  run_bench() {
    local b=$1 log=$logs/$(basename "$1").log rc=0 limit
    limit=$(budget 90)
    [ "$limit" -ge 10 ] || { echo "$(basename "$b"): not run (time)" | tee -a "$summary"; return; }
    LD_LIBRARY_PATH=$kiln_ld timeout "$limit" "$b" >"$log" 2>&1 || rc=$?
    printf '%-28s exit %d\n' "$(basename "$b")" "$rc" | tee -a "$summary"
    tail -n 20 "$log" | tee -a "$summary"
  }
  run_tests() {
    # The fused kernels' tests and benchmark first (what is newest), then
    # the rest, the long ladder test last.
    local first='^(cuda_graph|transfer|flash_attention|linear_cross_entropy|grouped_matmul|nccl)_cuda_test$'
    local last='^train_cuda_test$' name env cmd b
    while IFS='|' read -r name env cmd; do
      if [[ $name =~ $first ]]; then run_test "$name" "$env" "$cmd" 150; fi
    done <"$work/tests.tsv"
    if [ -x "$work/build/bench/cuda_fused_kernels_bench" ]; then
      run_bench "$work/build/bench/cuda_fused_kernels_bench"
    fi
    while IFS='|' read -r name env cmd; do
      if ! [[ $name =~ $first || $name =~ $last ]]; then run_test "$name" "$env" "$cmd" 150; fi
    done <"$work/tests.tsv"
    for b in "$work"/build/bench/*; do
      if [ -x "$b" ] && [ "$(basename "$b")" != cuda_fused_kernels_bench ]; then run_bench "$b"; fi
    done
    while IFS='|' read -r name env cmd; do
      if [[ $name =~ $last ]]; then run_test "$name" "$env" "$cmd" 300; fi
    done <"$work/tests.tsv"
  }
  # Training against PyTorch on the GPU (torch is there): the fused graph
  # trainer, plain and replayed, and torch.compile, each run a third of the time.
  run_train() {
    local limit rc=0 log=$logs/gpu_train_vs_torch.log
    limit=$(budget 470)
    if [ "$limit" -lt 90 ]; then
      echo "gpu_train_vs_torch.py: not run (time)" | tee -a "$summary"
      return
    fi
    env LD_LIBRARY_PATH="$python_ld" timeout "$limit" python3 bench/gpu_train_vs_torch.py \
      --kiln "$work/bin/kiln" --configs llama_1b --quick \
      --rungs graph_fused_replay,torch_compile,graph_fused --timeout $((limit / 3)) >"$log" 2>&1 || rc=$?
    printf '%-28s exit %d\n' gpu_train_vs_torch.py "$rc" | tee -a "$summary"
    tail -n 25 "$log" | tee -a "$summary"
  }
  case "$what" in
    tests) run_tests ;;
    train) run_train ;;
    all) run_tests; run_train ;;
  esac
  return $failed
}

case "${1:-}" in
  pack) pack ;;
  run) run "${2:-all}" ;;
  *) echo "usage: scripts/device_check.sh pack | run [all|tests|train]" >&2; exit 2 ;;
esac
