#!/usr/bin/env python3
"""transformers as the oracle for `kiln eval` on JSONL documents
(tests/e2e/eval_oracle_test.cc runs this script).

  hf_eval.py --model DIR --data FILE.jsonl --seq-len N --out FILE

Loads the Hugging Face folder DIR (model in float64, tokenizer) and, for
each document ({"text": ...} per line), tokenizes it as tokenizer(text)
does, keeps its first N + 1 tokens and sums the next-token cross-entropy of
the model over them (documents of fewer than two tokens have no target).
Writes JSON to FILE: {"loss": mean over every target, "tokens": targets,
"sequences": documents evaluated}.
"""
import argparse
import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

try:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
except ImportError as e:
    raise SystemExit(f"hf_eval.py: {e}; install the pinned packages with scripts/setup.sh")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--seq-len", type=int, required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float64).eval()
    total, tokens, sequences = 0.0, 0, 0
    with open(a.data) as f:
        for line in f:
            if not line.strip():
                continue
            ids = tok(json.loads(line)["text"])["input_ids"][: a.seq_len + 1]
            if len(ids) < 2:
                continue
            x = torch.tensor([ids])
            with torch.no_grad():
                logits = model(x).logits[0, :-1]
            total += torch.nn.functional.cross_entropy(logits, x[0, 1:], reduction="sum").item()
            tokens += len(ids) - 1
            sequences += 1
    with open(a.out, "w") as f:
        json.dump({"loss": total / tokens, "tokens": tokens, "sequences": sequences}, f)


if __name__ == "__main__":
    main()
