#!/usr/bin/env bash
# Activation memory against speed: the ~100M model (recipes/llama3_100m,
# 12 layers, bf16 compute) in the graph trainer under each
# activation_checkpoint.mode (none, selective, full, offload): the device
# pool's peak (mem_peak_bytes), what the offload pool held, and tokens/s
# with its ratio to none, measured first in the same script. Steps 2.. are
# timed (step 1 compiles). On the CPU the offload pool is host memory like
# the device's, so offload's price here is the copies alone; on a GPU the
# copies cross PCIe on their own stream. Nothing is asserted.
# Usage: bench/offload_memory.sh [build-dir] [steps]
set -euo pipefail
build=${1:-build}
steps=${2:-4}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
"$build/kiln" info | grep -E '^  cpu:|^cpu features|^oneDNN' | sed 's/^ *//'
echo "llama3_100m, graph trainer, $steps steps of 4 x 256 tokens; tokens/s over steps 2..$steps"
printf '%-10s %14s %14s %10s %9s\n' mode "device MiB" "offload MiB" "tokens/s" "vs none"
reference=
for mode in none selective full offload; do
  "$build/kiln" train --config llama3_100m --compile.graph_trainer \
    --activation_checkpoint.mode "$mode" --training.steps "$steps" \
    --job.dump_folder "$dir/$mode" --metrics.enable_tensorboard false > "$dir/$mode.log"
  read -r device offload tps < <(python3 - "$dir/$mode/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
steady = rows[1:] or rows
device = max(r["mem_peak_bytes"] for r in rows) / 2**20
offload = max(r.get("mem_offload_peak_bytes", 0) for r in rows) / 2**20
print(f"{device:.1f} {offload:.1f} {sum(r['tps'] for r in steady) / len(steady):.1f}")
PY
)
  reference=${reference:-$tps}
  printf '%-10s %14s %14s %10s %9.2f\n' "$mode" "$device" "$offload" "$tps" \
    "$(echo "$tps / $reference" | bc -l)"
done
