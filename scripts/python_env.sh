#!/usr/bin/env bash
# Makes the checkout's Python environment, .venv: the tests' oracles
# (scripts/requirements.txt) and the benchmarks' peers (bench/requirements.txt:
# JAX), every package pinned in scripts/requirements.lock. Run by setup.sh.
#
# The pinned packages take 5.2 GiB (PyTorch's PyPI build brings the CUDA
# libraries it links), so they are installed once per machine, in a shared
# environment named by the Python version and the lock's hash under
# $KILN_PYTHON_CACHE (default ~/.cache/kiln/python). A checkout's .venv is a
# small environment that reads them through a .pth file and holds only what
# is its own: the package kiln of its build (setup.sh installs it). A fresh
# clone, as CI makes, then costs no download and no room for them.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/disk_space.sh

python3 scripts/install_requirements.py --check
root="${KILN_PYTHON_CACHE:-${XDG_CACHE_HOME:-${HOME:?no HOME: set KILN_PYTHON_CACHE to where the Python packages go}/.cache}/kiln/python}"
version=$(python3 -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
shared="$root/$version-$(sha256sum scripts/requirements.lock | cut -c1-12)"
mkdir -p "$root"
if [ ! -e "$shared/complete" ]; then
  # One setup installs at a time; another checkout's may be on the same one.
  exec 9>"$root/.lock"
  flock 9
  if [ ! -e "$shared/complete" ]; then
    if [ ! -x "$shared/bin/python" ]; then
      need_space 6 "the pinned Python packages (PyTorch with its CUDA libraries, JAX: 5.2 GiB)" "$root"
      python3 -m venv "$shared"
    fi
    # Installs what an interrupted run left out; `complete` marks the end.
    "$shared/bin/python" scripts/install_requirements.py
    touch "$shared/complete"
    others=$(find "$root" -mindepth 1 -maxdepth 1 -type d ! -path "$shared" -printf '%f ')
    [ -z "$others" ] || echo "setup: $root also holds the environments of other locks" \
      "($others); remove those no checkout uses"
  fi
  exec 9>&-
fi

# Without pip of its own: the shared environment's runs in it (`python -m pip`).
[ -x .venv/bin/python ] || python3 -m venv --without-pip .venv
site_of() { "$1" -c 'import sysconfig; print(sysconfig.get_path("purelib"))'; }
pth="$(site_of .venv/bin/python)/kiln-requirements.pth"
site_of "$shared/bin/python" > "$pth.tmp"
mv "$pth.tmp" "$pth"
