#!/usr/bin/env python3
"""kiln's tokenizer against Hugging Face `tokenizers` on the same text, one
thread each.

Runs `kiln tokenizer encode --stats` (encoding time only, not loading or
printing) on the whole corpus as one text and as one JSONL line per
paragraph, times HF's encode / encode_batch the same two ways in this
process (best of 3), checks both give the same ids, and prints MB/s with the
kiln/HF ratio (above 1: kiln is faster). Speeds are per CPU-second (kiln's
thread time, this process's CPU time), so a busy machine skews them less.

    RAYON_NUM_THREADS=1 python3 bench/tokenizer_vs_hf.py --kiln build/kiln \
        --tokenizer ../shared/assets/tokenizers/llama3/tokenizer.json \
        --corpus ../shared/assets/corpus/emma.txt
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
from tokenizers import Tokenizer  # noqa: E402  (after pinning HF to one thread)


def kiln_run(cli, tokenizer, stdin, jsonl):
    cmd = [cli, "tokenizer", "encode", "--stats", "--tokenizer", tokenizer] + (["--jsonl"] if jsonl else [])
    best, ids = 0.0, None
    for _ in range(3):
        r = subprocess.run(cmd, input=stdin.encode(), capture_output=True, check=True)
        m = re.search(r"\(([0-9.e+-]+) MB/s of CPU time", r.stderr.decode())
        if not m:
            sys.exit(f"unexpected stderr from {' '.join(cmd)}:\n{r.stderr.decode()}")
        best = max(best, float(m.group(1)))
        lines = r.stdout.decode().splitlines()
        ids = [json.loads(l)["ids"] for l in lines] if jsonl else json.loads(lines[0])
    return best, ids


def hf_run(tok, texts, nbytes):
    best, ids = 0.0, None
    for _ in range(3):
        t = time.process_time()
        if len(texts) == 1:
            ids = tok.encode(texts[0], add_special_tokens=False).ids
        else:
            ids = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
        best = max(best, nbytes / 1e6 / (time.process_time() - t))
    return best, ids


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--corpus", required=True)
    args = ap.parse_args()
    text = open(args.corpus, encoding="utf-8").read()
    paragraphs = [p for p in text.split("\n\n") if p.strip()]
    tok = Tokenizer.from_file(args.tokenizer)
    print(f"{'input':<28}{'kiln MB/s':>12}{'HF MB/s':>12}{'kiln/HF':>10}")
    cases = [("whole file", text, False, [text], len(text.encode())),
             (f"{len(paragraphs)} paragraphs (JSONL)", "".join(json.dumps({"text": p}) + "\n" for p in paragraphs),
              True, paragraphs, sum(len(p.encode()) for p in paragraphs))]
    for name, stdin, jsonl, texts, nbytes in cases:
        k, kids = kiln_run(args.kiln, args.tokenizer, stdin, jsonl)
        h, hids = hf_run(tok, texts, nbytes)
        if kids != hids:
            sys.exit(f"{name}: kiln and HF ids differ")
        print(f"{name:<28}{k:>12.2f}{h:>12.2f}{k / h:>10.2f}")


if __name__ == "__main__":
    main()
