#!/usr/bin/env python3
"""Writes PyTorch reference data for whole functions rather than single ops:
view and in-place semantics (tests/runtime/views_oracle_test.cc) and the SwiGLU
MLP module (tests/ops/composites_oracle_test.cc). Each scenario is written out step by
step in torch here and in kiln in the C++ test; the results must agree.
"""
import argparse
import os

import torch

from gen_ops import write_safetensors


def views(out):
    base = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)

    b = base.clone()  # a write through a permuted, sliced view
    v = b.permute(2, 0, 1)[1:3]
    v.mul_(2)
    out["permute_slice_mul.base"], out["permute_slice_mul.view"] = b, v.contiguous()

    b = base.clone()  # copy_ broadcasts its source
    b.select(1, 2).copy_(torch.tensor([10.0, 20.0, 30.0, 40.0]))
    out["select_copy.base"] = b

    b = base.clone()  # stepped slice
    b[:, :, 0:4:2].add_(torch.full((2, 3, 2), 100.0))
    out["step_slice_add.base"] = b

    b = base.clone()  # fill through a transposed view
    b.transpose(0, 2)[0].fill_(-1.0)
    out["transpose_fill.base"] = b

    b = base.clone()  # reshape of a non-contiguous view copies: the base is untouched
    r = b.transpose(1, 2).reshape(2, 12)
    r.fill_(0.0)
    out["reshape_copy.base"], out["reshape_copy.reshaped"] = b, r

    b = base.clone()  # a chain of views
    w = b.unsqueeze(0).squeeze(0).select(0, 1).t().select(0, 2)
    w.copy_(torch.tensor([7.0, 8.0, 9.0]))
    out["view_chain.base"] = b

    b = base.clone()  # an expanded read feeding an in-place write of another view
    e = b[0, 0:1, :].expand(3, 4)
    b[1].add_(e)
    out["expand_add.base"] = b

    h = torch.zeros(3, dtype=torch.bfloat16)  # copy_ converts dtype, rounding to nearest even
    h.copy_(torch.tensor([1.00390625, 2.0, 3.0078125]))
    out["bf16_copy.dst"] = h


def swiglu(out):
    g = torch.Generator().manual_seed(7)
    x = torch.randn(2, 5, 8, generator=g, dtype=torch.float64)
    w_gate = torch.randn(16, 8, generator=g, dtype=torch.float64) * 0.3
    w_up = torch.randn(16, 8, generator=g, dtype=torch.float64) * 0.3
    w_down = torch.randn(8, 16, generator=g, dtype=torch.float64) * 0.3
    cot = torch.randn(2, 5, 8, generator=g, dtype=torch.float64)
    params = [t.clone().requires_grad_() for t in (x, w_gate, w_up, w_down)]
    px, pg, pu, pd = params
    y = (torch.nn.functional.silu(px @ pg.T) * (px @ pu.T)) @ pd.T
    (y * cot).sum().backward()
    for name, t in zip(["x", "w_gate", "w_up", "w_down"], params):
        out[f"swiglu.{name}"] = t.detach()
        out[f"swiglu.grad.{name}"] = t.grad
    out["swiglu.cot"], out["swiglu.y"] = cot, y.detach()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    args = p.parse_args()
    out = {}
    views(out)
    swiglu(out)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    write_safetensors(args.out, {k: v.contiguous() for k, v in out.items()}, {})


if __name__ == "__main__":
    main()
