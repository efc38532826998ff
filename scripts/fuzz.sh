#!/usr/bin/env bash
# Fuzzes kiln's parsers of outside data (tests/fuzz/README.md): builds the
# libFuzzer targets with clang (build-fuzz/), then runs each for a fixed
# time, two at a time per core pair, starting from its seed corpus. Prints
# each target's executions, coverage and corpus; exits 1 when one finds a
# crash (its input is then under build-fuzz/crashes/<target>/).
#   scripts/fuzz.sh                       every target, 60 s each
#   scripts/fuzz.sh --seconds 3600 shard  one target for an hour
# CI runs every target for 20 s (scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=60
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="${2:?--seconds needs a number}"; shift 2 ;;
    --*) echo "fuzz.sh: unknown option '$1' (expected --seconds N and target names)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
command -v clang++-16 >/dev/null ||
  { echo "fuzz.sh: clang++-16 is missing; scripts/setup.sh installs it" >&2; exit 2; }
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-16 \
  -DKILN_FUZZ=ON -DKILN_TESTS=OFF -DKILN_BENCH=OFF -DKILN_CUDA=OFF ${KILN_CMAKE_ARGS:-} >/dev/null
cmake --build build-fuzz --target fuzz_targets
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/*_fuzz.cc; do n=$(basename "$f" _fuzz.cc); targets+=("$n"); done
fi
for t in "${targets[@]}"; do
  [ -x "build-fuzz/tests/fuzz/fuzz_$t" ] || { echo "fuzz.sh: no fuzz target '$t' (tests/fuzz/${t}_fuzz.cc)" >&2; exit 2; }
done

mkdir -p build-fuzz/logs
# Stack traces with function names and lines.
export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-16/bin/llvm-symbolizer
# One target: its working corpus grows in build-fuzz/corpus/<target>, the
# seeds are read from the repository (never written to).
run_one() {
  local t=$1 dict=()
  mkdir -p "build-fuzz/corpus/$t" "build-fuzz/crashes/$t"
  [ -f "tests/fuzz/corpus/$t.dict" ] && dict=(-dict="tests/fuzz/corpus/$t.dict")
  "build-fuzz/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 \
    -print_final_stats=1 "${dict[@]}" -artifact_prefix="build-fuzz/crashes/$t/" \
    "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" >"build-fuzz/logs/$t.log" 2>&1
}
export -f run_one
export seconds
status=0
printf '%s\n' "${targets[@]}" | xargs -P "$(nproc)" -I{} bash -c 'run_one {} || touch build-fuzz/logs/{}.failed' || true
for t in "${targets[@]}"; do
  log="build-fuzz/logs/$t.log"
  runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo "?")
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo "?")
  corp=$(grep -o 'corp: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo "?")
  if [ -e "build-fuzz/logs/$t.failed" ]; then
    rm -f "build-fuzz/logs/$t.failed"
    status=1
    echo "fuzz $t: FAILED after $runs executions; log: $log, input: $(ls build-fuzz/crashes/$t/ | head -1)"
    grep -m1 -A12 -E '==ERROR|runtime error|invariant broken|terminate called|deadly signal' "$log" || tail -20 "$log"
  else
    printf 'fuzz %-20s %9s executions in %ss, coverage %s edges (%s features), corpus %s inputs\n' \
      "$t" "$runs" "$seconds" "$cov" "$ft" "$corp"
  fi
done
exit $status
