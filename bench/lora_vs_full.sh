#!/usr/bin/env bash
# LoRA against a full fine-tune of the same model in the same script: the
# default recipe's model is trained briefly and exported as a Hugging Face
# folder, then fine-tuned from it both ways (graph trainer). Prints the
# steady tokens/s of each (steps after the first log window), their ratio,
# and the step's expected memory for parameters, optimizer state and batch.
# Usage: bench/lora_vs_full.sh [build-dir] [lora rank] [steps]
set -euo pipefail
build=${1:-build}
rank=${2:-16}
steps=${3:-40}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$build/kiln" info | grep -E '^  cpu:|cpu isa'
"$build/kiln" train --job.dump_folder "$dir/base" --training.steps 5 --checkpoint.enable=false \
  --checkpoint.last_save_in_hf > "$dir/base.log"
run() {  # name, flags -> "tokens/s  inputs-memory" over the logged steps after the first window
  "$build/kiln" train --job.dump_folder "$dir/$1" --training.steps "$steps" --metrics.log_freq 10 \
    --checkpoint.enable=false --validation.enable=false \
    --checkpoint.initial_load_path "$dir/base/hf" $2 > "$dir/$1.log"
  awk '/^step / && $2 > 10 { for (i = 1; i < NF; i++) if ($i == "tps") { s += $(i + 1); n++ } }
       /^expected peak memory/ { sub(/.*\(/, ""); sub(/ parameters.*/, ""); mem = $0 }
       END { printf "%.0f %s\n", s / n, mem }' "$dir/$1.log"
}
full=$(run full "")
lora=$(run lora "--lora.rank $rank --lora.targets q,k,v,o,gate,up,down")
grep '^lora:' "$dir/lora.log"
printf '%-28s %12s %10s  %s\n' "fine-tune" "tokens/s" "vs full" "parameters + optimizer state + batch"
printf '%-28s %12s %10.2f  %s\n' "full" "${full%% *}" 1 "${full#* }"
printf '%-28s %12s %10.2f  %s\n' "LoRA r$rank (7 targets)" "${lora%% *}" \
  "$(echo "${lora%% *} / ${full%% *}" | bc -l)" "${lora#* }"
