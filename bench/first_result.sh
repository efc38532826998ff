#!/usr/bin/env bash
# Time to first result of a compiled block: cold cache, L3-warm (a fresh
# process reusing the persistent cache), and L1-warm (a second call).
# Usage: bench/first_result.sh [build-dir]
set -euo pipefail
build=${1:-build}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
run() {  # a fresh host-shared tier each run, so only L3 can be warm
  KILN_CACHE_DIR="$dir/l3" KILN_L2_CACHE_DIR="$dir/l2-$1" "$build/bench/first_result_bench"
}
cold=$(run cold)
warm=$(run warm)
get() { echo "$1" | awk -v k="$2" '$1 == k { print $2 }'; }
c=$(get "$cold" first_call_ms); w=$(get "$warm" first_call_ms); l1=$(get "$warm" second_call_ms)
printf '%-22s %10s %8s\n' "first result" "ms" "vs cold"
printf '%-22s %10.2f %8.2f\n' "cold cache" "$c" 1
printf '%-22s %10.2f %8.2f\n' "L3-warm (new process)" "$w" "$(echo "$w / $c" | bc -l)"
printf '%-22s %10.2f %8.2f\n' "L1-warm (same process)" "$l1" "$(echo "$l1 / $c" | bc -l)"
echo "cold: $(get "$cold" l3_misses) L3 misses, $(get "$cold" compile_s) s compiling; warm: $(get "$warm" l3_hits) L3 hits"
