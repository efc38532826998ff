#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on the GPU, for
bench/cuda_fused_kernels_bench's attention shape: causal, B=4, Hq=32, Hkv=8
(GQA), S=2048, D=128, bf16 and f32, forward and forward + backward.

Prints one line per case, "torch DTYPE_fwd SECONDS" / "torch DTYPE_fwd_bwd
SECONDS" (cuda_elementwise_torch.best_seconds). torch picks its kernel (FlashAttention or
cuDNN for bf16, the efficient-attention kernel for f32).
"""
import torch
import torch.nn.functional as F

from cuda_elementwise_torch import DTYPES, best_seconds

B, HQ, HKV, S, D = 4, 32, 8, 2048, 128


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

        print(f"torch {name}_fwd {best_seconds(forward):.9f}")
        print(f"torch {name}_fwd_bwd {best_seconds(forward_backward):.9f}")


if __name__ == "__main__":
    main()
