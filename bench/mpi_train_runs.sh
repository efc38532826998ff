# Shared by the multi-process benchmarks (weak_scaling.sh,
# overlap_collectives.sh); sourced, not run, after `build` and `steps` are
# set. Every run trains local_batch x seq_len tokens per rank per step in a
# scratch folder `dir`, removed at exit.
skip=5  # steps left out of a run's median
local_batch=4
seq_len=128
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
#
# mpirun as the mpi tests run it (tests/CMakeLists.txt KILN_MPI_TEST_ENV):
# root, oversubscription, shared memory only, one kernel thread per rank.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_orte_tmpdir_base="$dir/ompi" KILN_NUM_THREADS=1 OMP_WAIT_POLICY=passive
export KILN_CACHE_DIR="$dir/l3" KILN_L2_CACHE_DIR="$dir/l2"

# run NAME RANKS FLAGS...: one `kiln train` of the llama3 debug recipe on
# RANKS ranks; appends the median tps of its steps after `skip` to
# $dir/NAME.tps. The tokenizer the first run learns is reused.
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

# median FILE: the median of the numbers in FILE, one per line.
median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
