#!/usr/bin/env bash
# Installs what kiln needs on Debian 12 (bookworm) and is missing, then
# builds it. Run as root (or with sudo available). Safe to run again: what
# is installed and built already is skipped.
#   scripts/setup.sh           everything: Debian packages, the pinned Python
#                              oracles of the tests and the benchmarks'
#                              peers (.venv), every target, and the Python
#                              package kiln installed into .venv
#   scripts/setup.sh --train   what training needs: Debian packages and the
#                              kiln command (build/kiln); no Python
# Debian packages: compilers, CMake/ninja/ccache, oneDNN, OpenMPI, JSON,
# TOML, CLI11, xxHash, ICU, GoogleTest, Google Benchmark, Python; fortunes
# (English text: the default training corpus, kiln/data/default_corpus.cc);
# clang with its libFuzzer and OpenMP runtimes and llvm-symbolizer (the
# parsers' fuzz targets, tests/fuzz). gcc builds use gcc's own OpenMP
# (libgomp); LLVM's is clang's, and its versions conflict with each other.
set -euo pipefail
cd "$(dirname "$0")/.."
scope=all
case "${1:-}" in
  "") ;;
  --train) scope=train ;;
  *) echo "setup.sh: unknown argument '$1' (expected nothing or --train)" >&2; exit 2 ;;
esac
# ccache keys on paths relative to the checkout, so a fresh clone (as CI
# makes) reuses what an earlier build compiled.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
# One compiler for the build and for pip's build of the Python package in it:
# scikit-build-core would take Python's (g++, or x86_64-linux-gnu-g++ on
# Debian) where CMake takes c++, and compile everything a second time.
export CC="${CC:-gcc}" CXX="${CXX:-g++}"
source scripts/disk_space.sh

# Installed without recommends: every package the build needs is named here,
# so a fresh machine fails the same way a developer's machine does.
APT_PACKAGES=(
  g++ cmake ninja-build ccache pkg-config git
  libdnnl-dev
  libopenmpi-dev openmpi-bin
  nlohmann-json3-dev libtomlplusplus-dev libcli11-dev libxxhash-dev libicu-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-venv python3-pip python3-dev
  fortunes fortunes-min
  clang-16 libclang-rt-16-dev libomp-16-dev llvm-16
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: run as root (or install sudo) to install: ${missing[*]}" >&2; exit 1; }
    SUDO="sudo"
  fi
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi

if [ "$scope" = all ]; then
  bash scripts/python_env.sh
fi

[ -d build ] || need_space 1 "the build (build/)"
# KILN_CMAKE_ARGS: extra configure arguments (CI disables OpenCL with them).
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${KILN_CMAKE_ARGS:-} >/dev/null
if [ "$scope" = all ]; then
  cmake --build build
  # The Python package into .venv (`import kiln`), from the build above:
  # pip's build reuses build/ (nothing compiles twice) and keeps its tests.
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-build-isolation \
    --no-deps --config-settings=build-dir=build \
    --config-settings=cmake.define.KILN_TESTS=ON --config-settings=cmake.define.KILN_BENCH=ON .
else
  cmake --build build --target kiln_cli
fi
