#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on the GPU, for
bench/cuda_fused_kernels_bench's attention shape: causal, B=4, Hq=32, Hkv=8
(GQA), S=2048, D=128, bf16 and f32, forward and forward + backward.

Prints one line per case, "torch DTYPE_fwd SECONDS" / "torch DTYPE_fwd_bwd
SECONDS" (the best of 5 batches of calls worth about 0.2 s each, timed with
CUDA events after warm-up). torch picks its kernel (FlashAttention or
cuDNN for bf16, the efficient-attention kernel for f32).
"""
import torch
import torch.nn.functional as F

BATCHES = 5
BATCH_SECONDS = 0.2
B, HQ, HKV, S, D = 4, 32, 8, 2048, 128
DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32}


def seconds_per_call(fn):
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


def main():
    for name, dtype in DTYPES.items():
        q = torch.randn(B, HQ, S, D, dtype=dtype, device="cuda", requires_grad=True)
        k = torch.randn(B, HKV, S, D, dtype=dtype, device="cuda", requires_grad=True)
        v = torch.randn(B, HKV, S, D, dtype=dtype, device="cuda", requires_grad=True)

        def forward():
            with torch.no_grad():
                F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

        def forward_backward():
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            out.float().sum().backward()

        print(f"torch {name}_fwd {seconds_per_call(forward):.9f}")
        print(f"torch {name}_fwd_bwd {seconds_per_call(forward_backward):.9f}")


if __name__ == "__main__":
    main()
