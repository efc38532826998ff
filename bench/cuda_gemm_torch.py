#!/usr/bin/env python3
"""torch.matmul's time on the GPU for bench/cuda_gemm_bench (bf16).

Each argument is one product "M,N,K,ta,tb" (ta: a stored [K,M]; tb: b stored
[N,K]; the transposes are views, as in a model). Prints one line per
product, "torch M N K ta tb SECONDS" (the best of 5 batches of calls worth
about 0.2 s each, timed with CUDA events), after a "device NAME" line.
"""
import sys

import torch

BATCHES = 5
BATCH_SECONDS = 0.2


def seconds_per_call(m, n, k, ta, tb):
    a = torch.randn((k, m) if ta else (m, k), dtype=torch.bfloat16, device="cuda")
    b = torch.randn((n, k) if tb else (k, n), dtype=torch.bfloat16, device="cuda")
    a = a.t() if ta else a
    b = b.t() if tb else b

    def run(calls):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            torch.matmul(a, b)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    run(3)
    warm = run(3) / 3
    calls = max(1, min(10000, int(BATCH_SECONDS / warm)))
    return min(run(calls) / calls for _ in range(BATCHES))


def main():
    print("device", torch.cuda.get_device_name(0), flush=True)
    for spec in sys.argv[1:]:
        m, n, k, ta, tb = (int(x) for x in spec.split(","))
        print("torch", m, n, k, ta, tb, seconds_per_call(m, n, k, bool(ta), bool(tb)), flush=True)


if __name__ == "__main__":
    main()
