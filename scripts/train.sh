#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: installs and builds what is
# missing (scripts/setup.sh --train; minutes the first time, about a second
# after), then runs `kiln train` with the arguments given, e.g.
#   scripts/train.sh
#   scripts/train.sh --config recipes/llama3_debug.toml --training.steps 50
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/setup.sh" --train
exec "$root/build/kiln" train "$@"
