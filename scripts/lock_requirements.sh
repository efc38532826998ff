#!/usr/bin/env bash
# Remakes scripts/requirements.lock, every package the Python environment
# holds, pinned: what pip resolves for scripts/requirements.txt and
# bench/requirements.txt in an empty environment (the Python running this:
# CPython 3.11 on x86-64 Linux, as on Debian 12), less what the lock's
# header says is left out. Run it after changing either requirements file,
# then scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
python=.venv/bin/python
[ -x "$python" ] || python=python3
report=$(mktemp)
trap 'rm -f "$report"' EXIT
"$python" -m pip install --quiet --disable-pip-version-check --dry-run --ignore-installed \
  --report "$report" -r scripts/requirements.txt -r bench/requirements.txt
"$python" - "$report" <<'PY'
import json, pathlib, sys

# triton is torch's compiler of GPU kernels (1 GiB): the tests' oracles and
# the benchmarks' peers run torch on the CPU, where torch.compile does not use it.
LEFT_OUT = {"triton"}
HEADER = """\
# Every package of the Python environment (.venv), pinned: what pip resolves
# for scripts/requirements.txt and bench/requirements.txt, made by
# scripts/lock_requirements.sh (edit those, not this). scripts/setup.sh
# installs exactly these, without resolving again.
# Left out: triton, torch's compiler of GPU kernels (1 GiB): the tests'
# oracles and the benchmarks' peers run torch on the CPU.
"""
report = json.loads(pathlib.Path(sys.argv[1]).read_text())
pins = sorted(((i["metadata"]["name"], i["metadata"]["version"]) for i in report["install"]),
              key=lambda pin: pin[0].lower())
lines = [f"{name}=={version}" for name, version in pins if name.lower() not in LEFT_OUT]
pathlib.Path("scripts/requirements.lock").write_text(HEADER + "\n".join(lines) + "\n")
print(f"scripts/requirements.lock: {len(lines)} packages")
PY
