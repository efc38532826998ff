#!/usr/bin/env bash
# Installs everything kiln needs to build and test on Debian 12 (bookworm),
# then builds it. Run as root (or with sudo). Safe to run again.
#   Debian packages: compilers, CMake/ninja/ccache, oneDNN, OpenMPI, JSON,
#   TOML, CLI11, xxHash, GoogleTest, Google Benchmark, Python; fortunes
#   (English text: the default training corpus, kiln/data/default_corpus.cc).
#   Python packages (pinned, in .venv): PyTorch and NumPy, the test oracles.
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache keys on paths relative to the checkout, so a fresh clone (as CI
# makes) reuses what an earlier build compiled.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1

APT_PACKAGES=(
  g++ cmake ninja-build ccache pkg-config git
  libdnnl-dev libomp-dev
  libopenmpi-dev openmpi-bin
  nlohmann-json3-dev libtomlplusplus-dev libcli11-dev libxxhash-dev libicu-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-venv python3-pip
  fortunes fortunes-min
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi

# The oracles' Python environment. --system-site-packages lets an existing
# matching install be reused instead of downloaded again.
if [ ! -x .venv/bin/python ]; then
  python3 -m venv --system-site-packages .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r scripts/requirements.txt

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build
echo "setup: done. Try: build/kiln info"
