#!/usr/bin/env bash
# ThreadSanitizer on the code that runs threads of its own: the device
# queue (runtime/queue) and the replayed programs' state it shares with the
# host (runtime/executable_replay), the compile pool that builds fused kernels in the
# background (runtime/compile_pool; fused_test's background-build tests),
# the compile cache's concurrent writers, the MPI engine's communication
# thread (tests/dist, under mpirun on 2 ranks; comm_failure_test's jobs, in
# which a rank times out, dies or calls another collective), joint setup's
# step thread, the tokenizer threads of `kiln data prepare`, checkpoints
# saved by several ranks together, and the thread of checkpoints saved in
# the background (checkpoint_test's, and a short `kiln train` with them). Builds them in build-tsan/ and fails on any report.
# Kernels run on one thread (KILN_NUM_THREADS=1): libgomp is not built with
# ThreadSanitizer, so its OpenMP regions would read as races.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
tests=(queue_test defer_test replay_test fused_test compile_cache_test shards_test
       collectives_mpi_test skinny_collectives_mpi_test simple_fsdp_mpi_test spmd_handshake_mpi_test
       joint_setup_mpi_test distributed_checkpoint_mpi_test comm_failure_test checkpoint_test)
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_TSAN=ON -DKILN_BENCH=OFF \
  -DKILN_CUDA=OFF ${KILN_CMAKE_ARGS:-} >/dev/null
cmake --build build-tsan --target kiln_cli comm_failure_worker "${tests[@]}"
names=$(printf '%s|' "${tests[@]}")
# ThreadSanitizer cannot follow a fork of a process that has threads, as
# the compile cache's multi-process writer test does (its threads are
# checked by the test of one process's writers).
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan.supp" \
  GTEST_FILTER=-CompileCache.ConcurrentWritersNeverTearReads KILN_NUM_THREADS=1 OMP_NUM_THREADS=1 \
  ctest --test-dir build-tsan -R "^(${names%|})(_2ranks)?\$" --output-on-failure -j "$(nproc)"
# A short run that saves every step's checkpoint in the background: alone,
# and on 2 ranks (the saves' collectives beside the training's; OpenMPI
# set as the MPI tests set it).
run=$(mktemp -d "${TMPDIR:-/tmp}/kiln-tsan-run.XXXXXX")
trap 'rm -rf "$run"' EXIT
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan.supp"
export KILN_NUM_THREADS=1 OMP_NUM_THREADS=1 KILN_CACHE=off
for launch in "" "mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -x TSAN_OPTIONS -x KILN_NUM_THREADS -x OMP_NUM_THREADS -x KILN_CACHE -n 2"; do
  rm -rf "$run/out"
  $launch build-tsan/kiln train --config llama3_debug --training.steps 3 --checkpoint.enable \
    --checkpoint.interval 1 --checkpoint.async_mode async --metrics.progress_bar=false \
    --job.dump_folder "$run/out" >"$run/log" 2>&1 || { cat "$run/log"; exit 1; }
  echo "kiln train with background checkpoints${launch:+ on 2 ranks}: no ThreadSanitizer report"
done
