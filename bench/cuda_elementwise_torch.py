#!/usr/bin/env python3
"""PyTorch eager's time on the GPU for bench/cuda_elementwise_bench's chain.

Arguments: the element count, then dtype names ("bf16", "f32"). The chain is
the bench's: y = silu(x*1.5 + 0.25) * tanh(x) - sigmoid(x^2), one kernel per
op as eager runs it. Prints "device NAME", then one line per dtype,
"torch DTYPE SECONDS" (the best of 5 batches of calls worth about 0.2 s
each, timed with CUDA events after warm-up).
"""
import sys

import torch
import torch.nn.functional as F

BATCHES = 5
BATCH_SECONDS = 0.2
DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32}


def chain(x):
    return F.silu(x * 1.5 + 0.25) * torch.tanh(x) - torch.sigmoid(torch.square(x))


def best_seconds(fn):
    """GPU seconds per call of fn: the best of BATCHES batches of calls worth
    about BATCH_SECONDS each, timed with CUDA events after warm-up (the rule
    of bench/cuda_timing.h)."""

    def run(calls):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    run(3)
    warm = run(3) / 3
    calls = max(1, min(1000, int(BATCH_SECONDS / warm)))
    return min(run(calls) / calls for _ in range(BATCHES))


def seconds_per_call(n, dtype):
    x = torch.empty(n, dtype=dtype, device="cuda").uniform_(-2, 2)
    return best_seconds(lambda: chain(x))


def main():
    n = int(sys.argv[1])
    print("device", torch.cuda.get_device_name(0), flush=True)
    for name in sys.argv[2:]:
        print("torch", name, seconds_per_call(n, DTYPES[name]), flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
