#!/usr/bin/env bash
# Time to first result of a compiled block: cold cache, L3-warm (a fresh
# process reusing the persistent cache), and L1-warm (a second call). Then
# the graph trainer's first step on the default recipe, the same three ways
# (L1-warm: the warm process's second step), timed by the profiler's step
# spans, with the tiers that answered its compiles, and the L3-warm first
# step's time beyond a steady step as a share of the cold one's.
# Usage: bench/first_result.sh [build-dir]
set -euo pipefail
build=${1:-build}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
run() {  # a fresh host-shared tier each run, so only L3 can be warm
  KILN_CACHE_DIR="$dir/l3" KILN_L2_CACHE_DIR="$dir/l2-$1" "$build/bench/first_result_bench"
}
"$build/kiln" info | grep -E '^  cpu:|cpu isa'
cold=$(run cold)
warm=$(run warm)
get() { echo "$1" | awk -v k="$2" '$1 == k { print $2 }'; }
c=$(get "$cold" first_call_ms); w=$(get "$warm" first_call_ms); l1=$(get "$warm" second_call_ms)
printf '%-22s %10s %8s\n' "first result" "ms" "vs cold"
printf '%-22s %10.2f %8.2f\n' "cold cache" "$c" 1
printf '%-22s %10.2f %8.2f\n' "L3-warm (new process)" "$w" "$(echo "$w / $c" | bc -l)"
printf '%-22s %10.2f %8.2f\n' "L1-warm (same process)" "$l1" "$(echo "$l1 / $c" | bc -l)"
echo "cold: $(get "$cold" l3_misses) L3 misses, $(get "$cold" compile_s) s compiling; warm: $(get "$warm" l3_hits) L3 hits"

# The graph trainer: steps 1 and 2 of the default recipe, both traced.
train() {
  KILN_CACHE_DIR="$dir/train-l3" KILN_L2_CACHE_DIR="$dir/train-l2-$1" "$build/kiln" train \
    --job.dump_folder "$dir/run-$1" --training.steps 2 --checkpoint.enable=false \
    --validation.enable=false --profiler.enable_profiling --profiler.profile_freq 2 \
    --profiler.active_steps 2 > "$dir/train-$1.log"
  python3 - "$dir/run-$1/profile_traces/step-2/trace.json" <<'PY'
import collections, json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
steps = sorted((e["ts"], e["dur"]) for e in events if e.get("cat") == "step")
tiers = collections.Counter(f'{e["name"]} {e["args"]["cache"]}' for e in events
                            if e.get("cat") == "compile" and e["ts"] < steps[0][0] + steps[0][1])
print(f"{steps[0][1] / 1e3:.2f} {steps[1][1] / 1e3:.2f} " + "; ".join(f"{k} x{n}" for k, n in sorted(tiers.items())))
PY
}
tcold=$(train cold)
twarm=$(train warm)
c=$(echo "$tcold" | cut -d' ' -f1); w=$(echo "$twarm" | cut -d' ' -f1); l1=$(echo "$twarm" | cut -d' ' -f2)
echo
printf '%-22s %10s %8s\n' "graph trainer step 1" "ms" "vs cold"
printf '%-22s %10.2f %8.2f\n' "cold cache" "$c" 1
printf '%-22s %10.2f %8.2f\n' "L3-warm (new process)" "$w" "$(echo "$w / $c" | bc -l)"
printf '%-22s %10.2f %8.2f\n' "L1-warm (step 2)" "$l1" "$(echo "$l1 / $c" | bc -l)"
# A first step cannot beat a steady one: what the caches can save is the
# first step's time beyond it (the warm process's step 2).
printf '%-22s %10.2f %8.2f\n' "L3-warm over steady" "$(echo "$w - $l1" | bc -l)" \
  "$(echo "($w - $l1) / ($c - $l1)" | bc -l)"
echo "(cold over steady: $(echo "$c - $l1" | bc -l) ms)"
echo "step 1 compiles, cold: $(echo "$tcold" | cut -d' ' -f3-)"
echo "step 1 compiles, warm: $(echo "$twarm" | cut -d' ' -f3-)"
