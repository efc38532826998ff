#!/usr/bin/env python3
"""kiln's GEMM against torch.matmul on the same shapes and thread count.

For each shape this runs `kiln bench gemm` (which times kiln's matmul through
its Tensor API) and then times torch.matmul the same way in this process:
warm up, then the best of 5 batches of calls worth about 0.2 s each. Prints a
table with kiln/torch ratios (above 1: kiln is faster).

    python3 bench/gemm_vs_torch.py --kiln build/kiln --threads 2
"""
import argparse
import math
import os
import subprocess
import sys
import time

import torch

# M, N, K, A stored transposed ([K,M]), B stored transposed ([N,K]).
SHAPES = [
    (2048, 2048, 2048, False, False),
    (4096, 768, 3072, False, False),
    (4096, 768, 3072, False, True),
    (4096, 768, 3072, True, False),
]
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
BATCHES = 5
BATCH_SECONDS = 0.2


def kiln_gflops(cli, m, n, k, ta, tb, dtype, threads):
    cmd = [cli, "bench", "gemm", "--m", str(m), "--n", str(n), "--k", str(k),
           "--dtype", dtype, "--threads", str(threads)]
    if ta:
        cmd.append("--ta")
    if tb:
        cmd.append("--tb")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    last = out.strip().splitlines()[-1]
    if not last.startswith("GFLOP/s:"):
        sys.exit(f"unexpected output from {' '.join(cmd)}:\n{out}")
    return float(last.split()[1])


def torch_gflops(m, n, k, ta, tb, dtype):
    # Operands stored as kiln's are; the transposes are views, as in a model.
    a = torch.full((k, m) if ta else (m, k), 0.01, dtype=dtype)
    b = torch.full((n, k) if tb else (k, n), 0.01, dtype=dtype)
    a = a.t() if ta else a
    b = b.t() if tb else b

    def run(calls):
        start = time.perf_counter()
        for _ in range(calls):
            torch.matmul(a, b)
        return time.perf_counter() - start

    warm = run(2) / 2
    calls = max(1, min(10000, math.ceil(BATCH_SECONDS / warm)))
    best = min(run(calls) / calls for _ in range(BATCHES))
    return 2.0 * m * n * k / best / 1e9


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kiln", default=os.environ.get("KILN_CLI", "build/kiln"),
                        help="the kiln executable (default: $KILN_CLI or build/kiln)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dtypes", default="f32,bf16", help="comma-separated: f32,bf16")
    args = parser.parse_args()
    if not os.access(args.kiln, os.X_OK):
        sys.exit(f"kiln executable not found at {args.kiln}; build it or pass --kiln")
    torch.set_num_threads(args.threads)

    print(f"threads: {args.threads}; torch {torch.__version__}")
    header = f"{'shape (MxNxK)':<16} {'op':<3} {'dtype':<5} {'kiln GFLOP/s':>13} " \
             f"{'torch GFLOP/s':>14} {'kiln/torch':>10}"
    print(header)
    print("-" * len(header))
    for dtype in args.dtypes.split(","):
        for m, n, k, ta, tb in SHAPES:
            ours = kiln_gflops(args.kiln, m, n, k, ta, tb, dtype, args.threads)
            theirs = torch_gflops(m, n, k, ta, tb, DTYPES[dtype])
            op = ("T" if ta else "N") + ("T" if tb else "N")
            print(f"{f'{m}x{n}x{k}':<16} {op:<3} {dtype:<5} {ours:>13.1f} {theirs:>14.1f} "
                  f"{ours / theirs:>10.2f}", flush=True)


if __name__ == "__main__":
    main()
