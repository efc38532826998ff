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
skip=5  # steps left out of a run's median
local_batch=4
seq_len=128
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# As the mpi tests run it (tests/CMakeLists.txt KILN_MPI_TEST_ENV): root,
# oversubscription, shared memory only, one kernel thread per rank.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_orte_tmpdir_base="$dir/ompi" KILN_NUM_THREADS=1 OMP_WAIT_POLICY=passive
export KILN_CACHE_DIR="$dir/l3" KILN_L2_CACHE_DIR="$dir/l2"

# Configurations: name, ranks, mesh flags, label.
configs=(
  "one 1 - one_rank"
  "fsdp2 2 --parallelism.data_parallel_shard_degree=-1 FSDP_2"
  "fsdp4 4 --parallelism.data_parallel_shard_degree=-1 FSDP_4"
  "hsdp 4 --parallelism.data_parallel_replicate_degree=2 HSDP_2x2"
)

# run NAME RANKS FLAGS...: one training run; appends its median tps to $dir/NAME.tps.
run() {
  local name=$1 ranks=$2
  shift 2
  local tok=()
  [[ -f $dir/tokenizer.json ]] && tok=(--model.tokenizer_path "$dir/tokenizer.json")
  rm -rf "${dir:?}/$name"
  mpirun -n "$ranks" "$build/kiln" train --config llama3_debug --job.dump_folder "$dir/$name" \
    --training.steps "$steps" --training.local_batch_size "$local_batch" \
    --training.seq_len "$seq_len" --runtime.num_threads 1 --metrics.log_freq 1 \
    --metrics.enable_tensorboard false "${tok[@]}" "$@" > "$dir/$name.log" 2>&1 ||
    { cat "$dir/$name.log" >&2; exit 1; }
  [[ -f $dir/tokenizer.json ]] || cp "$dir/$name/tokenizer.json" "$dir/tokenizer.json"
  python3 -c '
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(statistics.median(r["tps"] for r in rows if "tps" in r and r["step"] > int(sys.argv[2])))
' "$dir/$name/metrics.jsonl" "$skip" >> "$dir/$name.tps"
}

median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

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
