#!/usr/bin/env bash
# Weak scaling of data parallelism on this machine: `kiln train` on the
# llama3 debug recipe under mpirun on 1, 2 and 4 ranks (one thread each) at
# a fixed per-rank batch, for SimpleFSDP over all ranks and HSDP 2 x 2, in
# eager mode and in the graph trainer. Prints tokens/s per rank (the
# trainer's tps is per rank, rank 0's) relative to 1 rank in the same mode:
# 1.00 is perfect weak scaling. A run's figure is the median of its logged
# tps over the steps after the first few (compile, warm-up); the runs are
# repeated in interleaved rounds and the median round is printed, so a
# burst of other load on the machine hits every configuration alike. With
# more ranks than cores the ranks share cores, which the ratio includes.
# Usage: bench/weak_scaling.sh [build-dir] [steps] [rounds]
set -euo pipefail
build=${1:-build}
steps=${2:-30}
rounds=${3:-3}
# shellcheck source=bench/mpi_train_runs.sh
source "$(dirname "$0")/mpi_train_runs.sh"  # run, median, the mpirun environment

# Configurations: name, ranks, mesh flags, label.
configs=(
  "one 1 - one_rank"
  "fsdp2 2 --parallelism.data_parallel_shard_degree=-1 FSDP_2"
  "fsdp4 4 --parallelism.data_parallel_shard_degree=-1 FSDP_4"
  "hsdp 4 --parallelism.data_parallel_replicate_degree=2 HSDP_2x2"
)


for ((round = 1; round <= rounds; ++round)); do
  for mode in eager graph; do
    for c in "${configs[@]}"; do
      read -r name ranks mesh _ <<< "$c"
      flags=()
      [[ $mode == graph ]] && flags+=(--compile.graph_trainer)
      [[ $mesh != - ]] && flags+=("$mesh")
      run "$mode-$name" "$ranks" "${flags[@]}"
    done
  done
done

cores=$(nproc)
echo "llama3_debug, $local_batch x $seq_len tokens per rank per step, $steps steps" \
  "(median of steps > $skip; median of $rounds rounds), 1 thread per rank, $cores cores"
(( cores < 4 )) && echo "note: 4 ranks on $cores cores oversubscribe: ranks share cores"
printf '%-6s %-10s %6s %10s %10s\n' mode mesh ranks tps/rank "vs 1 rank"
for mode in eager graph; do
  base=$(median "$dir/$mode-one.tps")
  for c in "${configs[@]}"; do
    read -r name ranks _ label <<< "$c"
    t=$(median "$dir/$mode-$name.tps")
    printf '%-6s %-10s %6s %10.0f %10.2f\n' "$mode" "${label//_/ }" "$ranks" "$t" \
      "$(echo "$t / $base" | bc -l)"
  done
done
