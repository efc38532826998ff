#!/usr/bin/env bash
# Communication/compute overlap in the graph trainer: `kiln train` on the
# llama3 debug recipe under mpirun with the whole step compiled, its
# collectives scheduled for overlap (--compile.overlap_collectives true:
# started early on the communication thread, waited for late) against the
# same program with every collective blocking where it was traced (false),
# both with the collectives inside the step's program (--compile.spmd_safe),
# and the default skinny collectives (each collective a program of its own).
# Prints the steady-state tokens/s (rank 0's, the median of the logged
# steps after the first few) of the three, for SimpleFSDP over 2 ranks and, with
# a fourth argument "hsdp", HSDP 2 x 2 too. Runs are repeated in rounds, the
# two of a round back to back; the ratio printed is the median of the
# rounds' paired ratios to the blocking run, so a burst of other load on the
# machine skews one round, not the figure. Nothing is asserted. With fewer cores than
# ranks x 2 the communication thread competes with compute for a core, so
# expect small or noisy gains on a small machine.
# Usage: bench/overlap_collectives.sh [build-dir] [steps] [rounds] [hsdp]
set -euo pipefail
build=${1:-build}
steps=${2:-30}
rounds=${3:-3}
with_hsdp=${4:-}
# shellcheck source=bench/mpi_train_runs.sh
source "$(dirname "$0")/mpi_train_runs.sh"  # run, median, the mpirun environment

common=(--compile.graph_trainer)
# name suffix and flags of each variant
variants=("overlap --compile.spmd_safe=true --compile.overlap_collectives=true"
          "blocking --compile.spmd_safe=true --compile.overlap_collectives=false"
          "skinny --compile.spmd_safe=false")

configs=("fsdp2 2 --parallelism.data_parallel_shard_degree=-1 FSDP_2")
[[ $with_hsdp == hsdp ]] &&
  configs+=("hsdp 4 --parallelism.data_parallel_replicate_degree=2 HSDP_2x2")


for ((round = 1; round <= rounds; ++round)); do
  for c in "${configs[@]}"; do
    read -r name ranks mesh _ <<< "$c"
    for v in "${variants[@]}"; do
      read -r suffix flags <<< "$v"
      # shellcheck disable=SC2086  # flags: several words
      run "$name-$suffix" "$ranks" "$mesh" "${common[@]}" $flags
    done
  done
done

# How many collectives the compiled step starts asynchronously (from the
# cached program text; 0 would mean nothing was scheduled).
started=$(grep -rhaoE '[a-z_]+_start\(' "$dir/l3" 2>/dev/null | wc -l || true)
echo "llama3_debug graph trainer, $local_batch x $seq_len tokens per rank per step, $steps steps" \
  "(median of steps > $skip; median of $rounds rounds), 1 thread per rank, $(nproc) cores;" \
  "flags: ${common[*]}; collective starts in the cached programs: $started"
printf '%-10s %6s %12s %12s %12s %17s %17s\n' mesh ranks "tps overlap" "tps blocking" \
  "tps skinny" "overlap/blocking" "skinny/blocking"
# Each round's runs ran back to back: their ratios are paired.
paired() {
  paste "$dir/$1.tps" "$dir/$2.tps" | awk '{ printf "%.3f\n", $1 / $2 }' > "$dir/$1.ratio"
  median "$dir/$1.ratio"
}
for c in "${configs[@]}"; do
  read -r name ranks _ label <<< "$c"
  printf '%-10s %6s %12.0f %12.0f %12.0f %17.3f %17.3f\n' "${label//_/ }" "$ranks" \
    "$(median "$dir/$name-overlap.tps")" "$(median "$dir/$name-blocking.tps")" \
    "$(median "$dir/$name-skinny.tps")" "$(paired "$name-overlap" "$name-blocking")" \
    "$(paired "$name-skinny" "$name-blocking")"
done
