#!/usr/bin/env python3
"""Encodes texts with the Hugging Face `tokenizers` library, the reference
kiln's tokenizer and BPE trainer are checked against.

Reads a tokenizer.json and a JSONL file of {"text": ...} lines; writes one
{"ids": [...], "text": ...} line per input, where ids are
encode(text, add_special_tokens=False) and text is decode(ids) with special
tokens kept. tests/data/bpe_trainer_oracle_test.cc compares them with kiln.
"""
import argparse
import json

try:
    from tokenizers import Tokenizer
except ImportError as e:  # a failure, not a skip: the oracle tests need it
    raise SystemExit(f"check_tokenizer.py: {e}; install it with scripts/setup.sh")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--texts", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    tok = Tokenizer.from_file(args.tokenizer)
    with open(args.texts, encoding="utf-8") as f, open(args.out, "w", encoding="utf-8") as out:
        for line in f:
            if not line.strip():
                continue
            ids = tok.encode(json.loads(line)["text"], add_special_tokens=False).ids
            text = tok.decode(ids, skip_special_tokens=False)
            out.write(json.dumps({"ids": ids, "text": text}) + "\n")


if __name__ == "__main__":
    main()
