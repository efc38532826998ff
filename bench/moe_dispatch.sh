#!/usr/bin/env bash
# MoE token dispatch: one MoE layer (dim 256, 16 experts of width 256, top 2,
# f32, the grouped experts) forward + backward on 1, 2 and 4 ranks with its
# experts split over all of them, through the local, all_to_all and capacity
# (factor 1.25) dispatchers (bench/moe_dispatch_bench.cc): tokens/s per rank,
# the medians of the step and of dispatch + combine alone, the fraction of
# the step they take, and tokens/s against local on 1 rank, measured first
# in the same script. One kernel thread per rank; with fewer cores than
# ranks the ranks share cores, so per-rank throughput falls with the rank
# count on a small machine whatever the dispatcher. Nothing is asserted.
# Usage: bench/moe_dispatch.sh [build-dir] [tokens_per_rank] [iterations]
set -euo pipefail
build=${1:-build}
tokens=${2:-4096}
iterations=${3:-10}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader  # shared memory (its default single-copy mechanism)
export OMPI_MCA_orte_tmpdir_base="$dir/ompi" KILN_NUM_THREADS=1 OMP_WAIT_POLICY=passive

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
"$build/kiln" info | grep -E '^  cpu:|^cpu features|^oneDNN' | sed 's/^ *//'  # kiln's kernels and ISA
echo "one MoE layer, $tokens tokens per rank, forward + backward, median of $iterations"
printf '%-11s %5s %12s %10s %12s %10s %10s\n' dispatcher ranks "tokens/s" "step ms" \
  "exchange ms" "fraction" "vs local"
reference=
for ranks in 1 2 4; do
  for kind in local all_to_all capacity; do
    [[ $kind == local && $ranks != 1 ]] && continue  # local cannot split experts
    line=$(mpirun -n "$ranks" "$build/bench/moe_dispatch_bench" "$kind" "$tokens" "$iterations")
    tps=$(awk '{ print $3 }' <<< "$line")
    [[ -z $reference ]] && reference=$tps
    printf '%s %10s\n' "$line" "$(awk -v a="$tps" -v b="$reference" 'BEGIN { printf "%.2fx", a / b }')"
  done
done
