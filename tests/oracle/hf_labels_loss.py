#!/usr/bin/env python3
"""transformers' masked loss as the oracle for kiln's chat evaluation
(tests/e2e/sft_e2e_test.cc runs this script).

  hf_labels_loss.py --model DIR --data FILE --seq-len N --out FILE

FILE holds JSON lines {"ids": [...], "labels": [...]} (labels -100 where no
loss is taken, as `kiln tokenizer encode --chat` prints them); each is cut to
its first N + 1 tokens and run through the model (float64) with those labels
(transformers shifts them). Writes {"loss": mean over every label,
"tokens": their number}.
"""
import argparse
import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

try:
    import torch
    from transformers import AutoModelForCausalLM
except ImportError as e:
    raise SystemExit(f"hf_labels_loss.py: {e}; install the pinned packages with scripts/setup.sh")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--seq-len", type=int, required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float64).eval()
    total, tokens = 0.0, 0
    for line in open(a.data):
        j = json.loads(line)
        ids = torch.tensor([j["ids"][: a.seq_len + 1]])
        labels = torch.tensor(j["labels"][: a.seq_len + 1][1:])
        with torch.no_grad():
            logits = model(ids).logits[0, :-1]
        total += torch.nn.functional.cross_entropy(logits, labels, ignore_index=-100,
                                                   reduction="sum").item()
        tokens += int((labels != -100).sum())
    with open(a.out, "w") as f:
        json.dump({"loss": total / tokens, "tokens": tokens}, f)


if __name__ == "__main__":
    main()
