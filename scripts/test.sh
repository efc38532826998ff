#!/usr/bin/env bash
# Installs and builds what is missing (scripts/setup.sh), then runs kiln's
# tests: every ctest label but `slow` on the release build (with the CUDA
# backend where the toolkit is installed; its device tests report "skipped"
# without a GPU; the fuzz targets' stored corpora replay there too), then
# the unit tests again under AddressSanitizer + LeakSanitizer + UBSan on a
# CPU-only build, which keeps that configuration tested too. `--full` then
# fuzzes every target for 20 s (scripts/fuzz.sh, clang) and runs the
# threaded code under ThreadSanitizer (scripts/tsan.sh): each is a build of
# the whole library of its own, which on a 2-core machine without their
# ccache takes over an hour apiece, past CI's time limit, so CI runs the
# default and a change to threads or parsers runs --full before it lands.
# `--quick` skips the sanitizers. Exits non-zero when any test fails, a fuzz
# target finds a crash or a sanitizer reports.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  ""|--quick|--full) ;;
  *) echo "test.sh: unknown argument '$1' (expected nothing, --quick or --full)" >&2; exit 2 ;;
esac
# Room for the builds not there yet, before an hour of building: build/
# (0.3 GiB; 1 asked) and build-asan/ (2.2 GiB; 3 asked). python_env.sh checks its own.
source scripts/disk_space.sh
gib=0 what=""
[ -d build ] || gib=1 what="the build (build/)"
if [ "${1:-}" != "--quick" ] && [ ! -d build-asan ]; then
  gib=$((gib + 3)) what="${what:+$what and }the AddressSanitizer build (build-asan/)"
fi
[ "$gib" -eq 0 ] || need_space "$gib" "$what"
bash scripts/setup.sh
# ccache keys on paths relative to the checkout, so a fresh clone (as CI
# makes) reuses what an earlier build compiled.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
# ctest runs tests side by side: idle OpenMP threads (kiln's, torch's) must
# sleep, not spin on the cores the other tests need.
export OMP_WAIT_POLICY=passive
jobs=$(nproc)

ctest --test-dir build -LE slow --output-on-failure -j "$jobs"

if [ "${1:-}" != "--quick" ]; then
  # Line tables only (-g1): what the sanitizers' reports print, in 60% of
  # the room full debug information takes.
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
    -DKILN_ASAN=ON -DKILN_BENCH=OFF -DKILN_CUDA=OFF ${KILN_CMAKE_ARGS:-} >/dev/null
  cmake --build build-asan --target kiln_unit_tests
  # UBSan's reports fail the test (gcc's UBSan only prints them by default).
  ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp" \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    ctest --test-dir build-asan -L unit --output-on-failure -j "$jobs"
fi
if [ "${1:-}" = "--full" ]; then
  bash scripts/fuzz.sh --seconds 20
  bash scripts/tsan.sh
fi
