#!/usr/bin/env python3
"""transformers reads a folder's generation_config.json
(tests/e2e/convert_oracle_test.cc runs this script).

  hf_generation_config.py --model DIR --out FILE

Loads DIR's generation config on its own (GenerationConfig.from_pretrained,
which fails on a malformed file) and as the model's (what generate() uses)
and writes their bos and eos ids to FILE as JSON: {"file": {...}, "model":
{...}}, each {"bos_token_id": ..., "eos_token_id": ...}.
"""
import argparse
import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

try:
    from transformers import AutoModelForCausalLM, GenerationConfig
except ImportError as e:
    raise SystemExit(f"hf_generation_config.py: {e}; install the pinned packages with scripts/setup.sh")


def ids(config):
    return {"bos_token_id": config.bos_token_id, "eos_token_id": config.eos_token_id}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    model = AutoModelForCausalLM.from_pretrained(a.model)
    out = {"file": ids(GenerationConfig.from_pretrained(a.model)), "model": ids(model.generation_config)}
    with open(a.out, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
