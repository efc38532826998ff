#!/usr/bin/env python3
"""transformers' apply_chat_template(tokenize=True) as the oracle for kiln's
chat data (tests/data/chat_data_oracle_test.cc runs this script).

  hf_chat_ids.py --tokenizer DIR --conversations FILE --out FILE

FILE holds a JSON list of conversations (lists of messages); the output is
a JSON list of the token ids transformers renders and tokenizes for each
(add_generation_prompt=False).
"""
import argparse
import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

try:
    from transformers import AutoTokenizer
except ImportError as e:
    raise SystemExit(f"hf_chat_ids.py: {e}; install the pinned packages with scripts/setup.sh")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--conversations", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    tok = AutoTokenizer.from_pretrained(a.tokenizer)
    out = []
    for messages in json.load(open(a.conversations)):
        ids = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=False)
        out.append(list(ids if isinstance(ids, list) else ids["input_ids"]))
    with open(a.out, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
