#!/usr/bin/env bash
# What a checkpoint costs the training loop, saved at once and in the
# background (--checkpoint.async_mode async): llama3_100m (100.7M parameters:
# 1.2 GB of f32 masters and AdamW moments a checkpoint) trained for STEPS
# steps with a checkpoint every INTERVAL, each run's wall time against the
# same run without checkpoints, on one warm cache and tokenizer. The
# difference is the time the saves held training.
# Usage: bench/async_checkpoint.sh [build-dir] [steps] [interval]
set -euo pipefail
build=${1:-build}
steps=${2:-8}
interval=${3:-2}
dir=$(mktemp -d "${TMPDIR:-/tmp}/kiln-async-ckpt.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$build/kiln" info | grep -E '^  cpu:|cpu isa'
df -h "$dir" | awk 'NR == 2 { print "disk: " $1 " (" $2 ")" }'
common=(--config llama3_100m --training.steps "$steps" --validation.enable=false
        --metrics.enable_tensorboard=false --metrics.progress_bar=false
        --checkpoint.interval "$interval" --checkpoint.keep_latest_k 0)
# Learns the tokenizer and fills the compile cache for the timed runs.
"$build/kiln" train "${common[@]}" --training.steps 1 --checkpoint.enable=false \
  --job.dump_folder "$dir/warm" >/dev/null
tok=$(ls -d "$dir"/warm/tokenizer* | head -1)
run() {  # name, extra flags...; prints the wall seconds
  local name=$1
  shift
  local t0 t1
  t0=$(date +%s.%N)
  "$build/kiln" train "${common[@]}" --model.tokenizer_path "$tok" --job.dump_folder "$dir/$name" \
    "$@" >"$dir/$name.log"
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}
none=$(run none --checkpoint.enable=false)
sync=$(run sync --checkpoint.enable --checkpoint.async_mode disabled)
async=$(run async --checkpoint.enable --checkpoint.async_mode async)
saves=$(( steps / interval + (steps % interval ? 1 : 0) ))
cmp -s "$dir/sync/checkpoint/step-$steps/model.safetensors" \
  "$dir/async/checkpoint/step-$steps/model.safetensors" &&
  same="the same bytes" || same="DIFFERENT bytes"
echo "$steps steps, $saves checkpoints of $(du -sh "$dir/sync/checkpoint/step-$steps" | cut -f1) each ($same in both modes)"
printf '%-32s %8s %14s\n' run "wall s" "held s / save"
printf '%-32s %8.1f %14s\n' "no checkpoints" "$none" -
printf '%-32s %8.1f %14.2f\n' "checkpoints, at once" "$sync" "$(echo "($sync - $none) / $saves" | bc -l)"
printf '%-32s %8.1f %14.2f\n' "checkpoints, in the background" "$async" "$(echo "($async - $none) / $saves" | bc -l)"
