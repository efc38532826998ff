#!/usr/bin/env python3
"""kiln training on a GPU against PyTorch eager and torch.compile on the same GPU.

The same Llama architecture in bf16 (bf16 compute, f32 master weights and AdamW
state; torch: f32 weights under bf16 autocast), the same batch and sequence
length, through bench/ladder_vs_torch.py --device: tokens/s and MFU of kiln's
strict eager, graph trainer, and graph trainer with the fused kernels
(attention=flash, loss=fused_ce), plain and replayed as a CUDA graph
(--compile.replay), against PyTorch eager and torch.compile.
Two configurations:

    llama_1b        Llama 3.2 1B's shape (dim 2048, 16 layers, 32/8 heads,
                    ffn 8192, vocab 128256, tied embeddings), batch 4 x 2048
    llama_8b_4l     Llama 3.1 8B's shape with 4 of its 32 layers (to fit one
                    GPU with the other runs' memory freed), batch 2 x 4096

kiln reads a synthetic text corpus (random words, written here; throughput
does not depend on the text) with a tokenizer it learns from it, and keeps
the model's 128256-entry vocabulary; torch trains on random ids of the same
shape. Targets: graph trainer + fused kernels >= 1.2x torch.compile tokens/s
and >= 50% MFU on llama_1b; the summary says whether each was reached.

    .venv/bin/python bench/gpu_train_vs_torch.py                  # both, on cuda
    .venv/bin/python bench/gpu_train_vs_torch.py --configs llama_1b --quick
    KILN_CPU_DEVICES=2 .venv/bin/python bench/gpu_train_vs_torch.py --device cpu:1 --smoke
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RUNGS = "strict,graph,graph_fused,graph_fused_replay,torch,torch_compile"
LLAMA_1B = ("--model.dim 2048 --model.n_layers 16 --model.n_heads 32 --model.n_kv_heads 8 "
            "--model.head_dim 64 --model.ffn_dim 8192 --model.vocab_size 128256 "
            "--model.tie_embeddings true")
CONFIGS = {
    "llama_1b": ("llama3_8b", LLAMA_1B + " --training.local_batch_size 4 --training.seq_len 2048"),
    "llama_8b_4l": ("llama3_8b", "--model.n_layers 4 --training.local_batch_size 2 "
                                 "--training.seq_len 4096"),
    # A check of this script on any device: the debug model, a few seconds a run.
    "smoke": ("llama3_debug", "--training.local_batch_size 2 --training.seq_len 64"),
}


def write_corpus(path, lines=20000, seed=0):
    """Random sentences over a 2000-word vocabulary, one per line."""
    rng = random.Random(seed)
    words = ["".join(rng.choice("etaoinshrdlucmfwypvbgkqjxz") for _ in range(rng.randint(2, 9)))
             for _ in range(2000)]
    with open(path, "w") as f:
        for _ in range(lines):
            f.write(" ".join(rng.choice(words) for _ in range(rng.randint(8, 30))) + ".\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kiln", default=os.environ.get("KILN_CLI", "build/kiln"))
    parser.add_argument("--device", default="cuda", help="kiln's and torch's device (default cuda)")
    parser.add_argument("--configs", default="llama_1b,llama_8b_4l",
                        help=f"comma-separated subset of {','.join(CONFIGS)}")
    parser.add_argument("--rungs", default=RUNGS, help=f"default {RUNGS}")
    parser.add_argument("--quick", action="store_true", help="2 warm-up + 4 measured steps")
    parser.add_argument("--smoke", action="store_true",
                        help="the debug model only, quick: checks the script, measures nothing")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per run")
    args = parser.parse_args()
    configs = ["smoke"] if args.smoke else args.configs.split(",")
    for c in configs:
        if c not in CONFIGS:
            sys.exit(f"unknown config '{c}'; choose from {','.join(CONFIGS)}")
    failed_targets = []
    with tempfile.TemporaryDirectory(prefix="kiln-gpu-bench-") as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        write_corpus(corpus)
        for name in configs:
            recipe, flags = CONFIGS[name]
            out = os.path.join(tmp, f"{name}.json")
            # The plain rungs compose attention and the loss from basic ops; the
            # fused rungs' --override flags come later and win.
            kiln_flags = (f"{flags} --override attention=composite --override loss=composite "
                          f"--data.path {corpus} --data.text_split line --model.tokenizer_path ''")
            cmd = [sys.executable, os.path.join(HERE, "ladder_vs_torch.py"), "--kiln", args.kiln,
                   "--models", recipe, "--rungs", args.rungs, "--device", args.device,
                   "--precision", "bfloat16", "--kiln-flags", kiln_flags, "--json", out,
                   "--timeout", str(args.timeout)]
            if args.quick or args.smoke:
                cmd.append("--quick")
            print(f"\n== {name}: {recipe} {flags}", flush=True)
            if subprocess.run(cmd).returncode != 0:
                sys.exit(f"{name}: bench/ladder_vs_torch.py failed")
            with open(out) as f:
                rows = json.load(f)[recipe]
            # The graph trainer with the fused kernels, plain or as a CUDA graph: the faster.
            fused = max((rows.get(r, {}) for r in ("graph_fused", "graph_fused_replay")),
                        key=lambda row: row.get("tps", 0))
            compiled = rows.get("torch_compile", {})
            if name == "llama_1b":
                speedup = (fused.get("tps", 0) / compiled["tps"]) if compiled.get("tps") else None
                mfu = fused.get("mfu")
                for what, value, target, text in (
                        ("graph trainer + fused vs torch.compile", speedup, 1.2, "{:.2f}x"),
                        ("graph trainer + fused MFU", mfu, 0.5, "{:.1%}")):
                    shown = text.format(value) if value is not None else "not measured"
                    met = value is not None and value >= target
                    print(f"target: {what}: {shown} (target {text.format(target)}): "
                          f"{'reached' if met else 'NOT reached'}")
                    if not met:
                        failed_targets.append(what)
    if failed_targets:
        print(f"\ntargets not reached: {', '.join(failed_targets)} "
              "(kiln profile summarize on a --profiler.enable_profiling run names the top costs)")


if __name__ == "__main__":
    main()
