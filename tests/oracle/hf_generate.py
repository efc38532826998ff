#!/usr/bin/env python3
"""transformers' greedy decoding as the oracle for kiln's generation
(tests/models/generate_oracle_test.cc runs this script).

  hf_generate.py --model DIR --prompts '[[ids], ...]' --max-new-tokens N --out FILE

Loads the Hugging Face folder DIR (f32) and, for each prompt alone, runs
model.generate(do_sample=False) for exactly N new tokens (no end-of-sequence
stop), writing JSON to FILE: {"ids": [[new ids]...], "logprobs": [[log p of
each chosen id under the model's distribution]...]}.
"""
import argparse
import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

try:
    import torch
    from transformers import AutoModelForCausalLM
except ImportError as e:
    raise SystemExit(f"hf_generate.py: {e}; install the pinned packages with scripts/setup.sh")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--prompts", required=True)
    p.add_argument("--max-new-tokens", type=int, required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32).eval()
    out = {"ids": [], "logprobs": []}
    for prompt in json.loads(a.prompts):
        ids = torch.tensor([prompt])
        with torch.no_grad():
            r = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                               max_new_tokens=a.max_new_tokens, min_new_tokens=a.max_new_tokens,
                               eos_token_id=None, pad_token_id=0, output_logits=True,
                               return_dict_in_generate=True)
        new = r.sequences[0, len(prompt):].tolist()
        logprobs = [torch.log_softmax(l[0].double(), -1)[t].item() for l, t in zip(r.logits, new)]
        out["ids"].append(new)
        out["logprobs"].append(logprobs)
    with open(a.out, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
