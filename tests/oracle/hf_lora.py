#!/usr/bin/env python3
"""peft as the oracle for kiln's LoRA adapters (tests/models/lora_oracle_test.cc
runs this script).

  hf_lora.py --base DIR --adapter DIR --merged DIR --ids '[[ids], ...]' --out FILE

Loads the Hugging Face folder --base (f32) and puts the PEFT folder
--adapter on it with PeftModel.from_pretrained, checking that every tensor
of adapter_model.safetensors landed in a LoRA layer with its exact values
and that every LoRA layer got one. Writes to FILE (safetensors):
peft_logits, the adapted model's logits on --ids, and merged_logits, those
of the Hugging Face folder --merged (kiln's merge of the same adapters)
loaded as a plain transformers model. Exits 1 when the adapter does not
load whole.
"""
import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

try:
    import torch
    from peft import PeftModel
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM
except ImportError as e:
    raise SystemExit(f"hf_lora.py: {e}; install the pinned packages with scripts/setup.sh")


def main():
    p = argparse.ArgumentParser()
    for flag in ("--base", "--adapter", "--merged", "--ids", "--out"):
        p.add_argument(flag, required=True)
    a = p.parse_args()
    ids = torch.tensor(json.loads(a.ids))
    base = AutoModelForCausalLM.from_pretrained(a.base, dtype=torch.float32)
    model = PeftModel.from_pretrained(base, a.adapter).eval()

    # Every saved tensor must be a loaded LoRA weight: peft only warns about
    # keys it could not place.
    saved = load_file(os.path.join(a.adapter, "adapter_model.safetensors"))
    loaded = {}
    for name, param in model.named_parameters():
        if ".lora_" in name:
            loaded[name.replace(".default", "")] = param.detach()
    problems = [f"not loaded: {k}" for k in saved if k not in loaded]
    problems += [f"no saved value: {k}" for k in loaded if k not in saved]
    problems += [f"changed on load: {k}" for k in saved
                 if k in loaded and not torch.equal(saved[k].float(), loaded[k].float())]
    if problems or not saved:
        print("hf_lora.py: the adapter did not load whole:\n  " + "\n  ".join(problems or ["no tensors"]))
        sys.exit(1)

    with torch.no_grad():
        peft_logits = model(ids).logits
        merged = AutoModelForCausalLM.from_pretrained(a.merged, dtype=torch.float32).eval()
        merged_logits = merged(ids).logits
    save_file({"peft_logits": peft_logits.contiguous(), "merged_logits": merged_logits.contiguous()},
              a.out)
    print(f"hf_lora.py: {len(saved)} adapter tensors loaded; logits {tuple(peft_logits.shape)}")


if __name__ == "__main__":
    main()
