#!/usr/bin/env python3
"""transformers as the oracle for `kiln eval` (tests/e2e/eval_oracle_test.cc,
sft_e2e_test.cc and convert_oracle_test.cc run this script).

  hf_eval.py --model DIR --data FILE.jsonl --seq-len N --out FILE

Loads the Hugging Face folder DIR (model in float64) and sums the model's
next-token cross-entropy over each line of FILE, cut to its first N + 1
tokens:
  {"text": ...}          tokenized as DIR's tokenizer(text) does, every
                         next token a target (a document of fewer than two
                         tokens has none);
  {"ids": [...], "labels": [...]}
                         the given ids, the loss where labels are not -100
                         (transformers shifts them), as `kiln tokenizer
                         encode --chat` prints them.
Writes JSON to FILE: {"loss": mean over every target, "tokens": targets,
"sequences": lines evaluated}.
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
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float64).eval()
    tok = None
    total, tokens, sequences = 0.0, 0, 0
    with open(a.data) as f:
        for line in f:
            if not line.strip():
                continue
            j = json.loads(line)
            if "text" in j:
                tok = tok or AutoTokenizer.from_pretrained(a.model)
                ids = tok(j["text"])["input_ids"]
                labels = ids
            else:
                ids, labels = j["ids"], j["labels"]
            ids, labels = ids[: a.seq_len + 1], torch.tensor(labels[: a.seq_len + 1][1:])
            if len(ids) < 2:
                continue
            with torch.no_grad():
                logits = model(torch.tensor([ids])).logits[0, :-1]
            total += torch.nn.functional.cross_entropy(logits, labels, ignore_index=-100,
                                                       reduction="sum").item()
            tokens += int((labels != -100).sum())
            sequences += 1
    with open(a.out, "w") as f:
        json.dump({"loss": total / tokens, "tokens": tokens, "sequences": sequences}, f)


if __name__ == "__main__":
    main()
