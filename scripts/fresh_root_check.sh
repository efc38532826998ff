#!/usr/bin/env bash
# Runs the README's quick start on a machine that has nothing installed: a
# minimal Debian 12 root made by debootstrap (from the Debian mirror this
# machine's apt uses), the checkout copied in (tracked and untracked files
# that git does not ignore, as a clone plus your changes) with the tests'
# ../shared/assets beside it (read-only), and this machine's DNS and TLS
# trust (its network), then inside it, with a clean environment:
#   scripts/train.sh --training.steps 5     (always)
#   scripts/python_env.sh, then the oracles imported from .venv
#                                           (with --python; downloads PyTorch)
#   scripts/fuzz.sh --seconds 5 shard       (with --fuzz: the clang build)
#   scripts/test.sh --quick                 (with --tests; downloads PyTorch)
# Any install step setup.sh lacks fails here, however much this machine has.
# With --device-pack it instead checks the GPU package (scripts/device_check.sh
# pack, made here beforehand) on the bare root, as bare as the GPU machine
# (nothing of kiln's installed, CUDA's toolkit mounted from this machine):
#   scripts/device_check.sh run tests       (every device test "skipped")
# so a library the package lacks fails here, not in a GPU session.
#
# Usage (as root): scripts/fresh_root_check.sh [--tests] [--python] [--fuzz] [--keep]
#                  [--device-pack] [--ccache DIR] [--mirror URL] [--root DIR]
#   --ccache DIR  share a ccache directory with the root (compiles the same,
#                 faster); default: the root compiles everything itself
#   --keep        leave the root in place (default: removed at the end)
# Takes about 10 minutes with --ccache on a warm cache, 30+ without, on 2 cores.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
root=/var/tmp/kiln-fresh-root
tests=0 python=0 fuzz=0 keep=0 device=0 ccache_dir="" mirror=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tests) tests=1 ;;
    --python) python=1 ;;
    --fuzz) fuzz=1 ;;
    --keep) keep=1 ;;
    --device-pack) device=1 ;;
    --ccache) ccache_dir="$2"; shift ;;
    --mirror) mirror="$2"; shift ;;
    --root) root="$2"; shift ;;
    *) echo "fresh_root_check: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" -eq 0 ] || { echo "fresh_root_check: run as root (debootstrap and chroot need it)" >&2; exit 2; }

if [ -z "$mirror" ]; then
  # The first Debian archive this machine's apt uses for bookworm.
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $3 ~ /^bookworm$/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [ -n "$mirror" ] || { echo "fresh_root_check: no Debian mirror found in /etc/apt; pass --mirror URL" >&2; exit 2; }
fi
if ! command -v debootstrap >/dev/null; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap
fi

mounts=()
cleanup() {
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[i]}" 2>/dev/null || true; done
  if [ "$keep" = 0 ]; then rm -rf --one-file-system "$root"; fi
}
trap cleanup EXIT
bind() { mkdir -p "$root$2"; mount "${@:3}" "$1" "$root$2"; mounts+=("$root$2"); }

phase() { echo "fresh_root_check: [$(date +%T)] $*"; }
t0=$(date +%s)
rm -rf --one-file-system "$root"
phase "debootstrap bookworm (minbase) into $root"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 ||
  { tail -20 "$root.debootstrap.log"; exit 1; }
# This machine's network, as the root's: its DNS, and the CAs it trusts for
# TLS (where an egress proxy re-signs traffic, its CA is among them), so
# that pip's downloads go through as they do here. Debian's own store in the
# root is left as installed.
cp /etc/resolv.conf "$root/etc/resolv.conf"
host_ca=/etc/ssl/certs/ca-certificates.crt
bind proc /proc -t proc
bind sysfs /sys -t sysfs
bind /dev /dev --bind
bind devpts /dev/pts -t devpts
bind tmpfs /dev/shm -t tmpfs
env_vars=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 TERM=dumb)
if [ -f "$host_ca" ]; then
  cp "$host_ca" "$root/etc/host-ca-certificates.crt"
  env_vars+=(PIP_CERT=/etc/host-ca-certificates.crt)
fi
if [ -n "$ccache_dir" ]; then
  bind "$ccache_dir" /var/cache/kiln-ccache --bind
  env_vars+=(CCACHE_DIR=/var/cache/kiln-ccache)
fi

# The tests' data (../shared/assets beside the checkout: tokenizers, texts),
# read-only; the product never needs it.
if [ -d "$repo/../shared/assets" ]; then
  bind "$repo/../shared/assets" /shared/assets --bind -o ro
fi

phase "copying the checkout to /kiln"
mkdir -p "$root/kiln"
git -C "$repo" ls-files -z --cached --others --exclude-standard |
  (cd "$repo" && tar --null -T - -cf -) | tar -xf - -C "$root/kiln"

run_in_root() { chroot "$root" env -i "${env_vars[@]}" bash -c "cd /kiln && $1"; }
if [ "$device" = 1 ]; then
  pack=$repo/.device/kiln-device.tar.gz
  [ -f "$pack" ] || { echo "fresh_root_check: no $pack: run scripts/device_check.sh pack first" >&2; exit 2; }
  mkdir -p "$root/kiln/.device" && cp "$pack" "$root/kiln/.device/"
  cuda=$(readlink -f /usr/local/cuda)
  bind "$cuda" /usr/local/cuda --bind -o ro
  phase "scripts/device_check.sh run tests (the GPU package on the bare root)"
  run_in_root "OUT=/tmp/device-out bash scripts/device_check.sh run tests"
  phase "passed in $(( $(date +%s) - t0 )) s"
  exit 0
fi
phase "scripts/train.sh --training.steps 5"
run_in_root "scripts/train.sh --training.steps 5"
if [ "$python" = 1 ]; then
  phase "scripts/python_env.sh and the oracles' imports"
  run_in_root "bash scripts/python_env.sh && .venv/bin/python -m pip --version &&
    .venv/bin/python -c 'import torch, transformers, peft, tokenizers, tensorboard, jax, nanobind, pytest
print(\"torch\", torch.__version__, \"sum\", torch.ones(3).sum().item())'"
fi
if [ "$fuzz" = 1 ]; then
  phase "scripts/fuzz.sh --seconds 5 shard"
  run_in_root "scripts/fuzz.sh --seconds 5 shard"
fi
if [ "$tests" = 1 ]; then
  phase "scripts/test.sh --quick"
  run_in_root "scripts/test.sh --quick"
fi
phase "passed in $(( $(date +%s) - t0 )) s"
