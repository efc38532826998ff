#!/usr/bin/env python3
"""Writes PyTorch reference data for in-place writes through views, replayed
by tests/runtime/view_writes_oracle_test.cc in every kiln mode (eager, defer,
compile, value_and_grad). Each pattern takes x (the base's source) and s (the
written source): b = x * 1, writes through views of b, returns some tensors.
The loss is the sum of each result times a fixed cotangent; its gradients wrt
x and s go through the writes.
"""
import argparse
import os

import torch

from gen_ops import write_safetensors


def slice_add(b, s):  # s: [2, 2, 4]
    v = b[:, 1:3]
    v.add_(s)
    return [b, v]


def select_copy_broadcast(b, s):  # s: [4], broadcast into a [2, 4] view
    b.select(1, 2).copy_(s)
    return [b]


def transpose_mul_broadcast(b, s):  # s: [4, 3, 1]
    v = b.transpose(0, 2)
    v.mul_(s)
    return [b, v]


def reshape_mul(b, s):  # s: [4]
    r = b.reshape(6, 4)
    r.mul_(s)
    return [b, r]


def reshape_step_fill(b, s):  # s: [1], unused by the write
    b.reshape(24)[3:20:5].fill_(-1.0)
    return [b, b * s]


def slice_of_transpose_copy(b, s):  # s: [2, 2, 3]
    v = b.transpose(1, 2)[:, 1:3]
    v.copy_(s)
    return [b, v]


def view_chain_copy(b, s):  # s: [3]
    w = b.unsqueeze(0).squeeze(0).select(0, 1).t().select(0, 2)
    w.copy_(s)
    return [b, w]


def overlapping_sibling_read(b, s):  # s: [2, 2, 4]
    a, c = b[:, 0:2], b[:, 1:3]
    a.add_(s)
    return [b, a, c]


def write_then_another_write(b, s):  # s: [2, 3]
    a, c = b.select(2, 0), b[:, :, 0:2]
    a.copy_(s)
    c.mul_(3.0)
    return [b, a, c]


def copy_from_overlapping_sibling(b, s):  # s: [1]; torch refuses the overlap, so clone
    t = b.transpose(1, 2)  # a copy in index order would read elements it already wrote
    a, c = t[:, :, 1:3], t[:, :, 0:2]
    a.copy_(c.clone())
    return [b * s, a, c]


def base_write_then_view_read(b, s):  # s: [3, 4]
    v = b[1]
    b.mul_(s)
    return [v, b]


def view_write_then_base_write(b, s):  # s: [2, 4]
    v = b[:, 2]
    v.copy_(s)
    b.add_(1.0)
    return [b, v]


def reshape_of_transpose_copies(b, s):  # s: [1]; the reshape copies, b is untouched
    r = b.transpose(1, 2).reshape(2, 12)
    r.fill_(0.0)
    return [b * s, r]


def contiguous_of_dense_view_aliases(b, s):  # s: [3, 4]
    v = b.select(0, 1).contiguous()
    v.mul_(s)
    return [b, v]


def contiguous_of_strided_view_copies(b, s):  # s: [1]
    v = b.transpose(1, 2).contiguous()
    v.fill_(0.0)
    return [b * s, v]


PATTERNS = [
    (slice_add, [2, 2, 4]),
    (select_copy_broadcast, [4]),
    (transpose_mul_broadcast, [4, 3, 1]),
    (reshape_mul, [4]),
    (reshape_step_fill, [1]),
    (slice_of_transpose_copy, [2, 2, 3]),
    (view_chain_copy, [3]),
    (overlapping_sibling_read, [2, 2, 4]),
    (write_then_another_write, [2, 3]),
    (copy_from_overlapping_sibling, [1]),
    (base_write_then_view_read, [3, 4]),
    (view_write_then_base_write, [2, 4]),
    (reshape_of_transpose_copies, [1]),
    (contiguous_of_dense_view_aliases, [3, 4]),
    (contiguous_of_strided_view_copies, [1]),
]


def run(fn, s_shape, seed, out):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 3, 4, generator=g, dtype=torch.float64)
    s = torch.randn(*s_shape, generator=g, dtype=torch.float64)
    px, ps = x.clone().requires_grad_(), s.clone().requires_grad_()
    results = fn(px * 1.0, ps)
    cots = [torch.randn(*r.shape, generator=g, dtype=torch.float64) for r in results]
    sum((r * c).sum() for r, c in zip(results, cots)).backward()
    name = fn.__name__
    out[f"{name}.x"], out[f"{name}.s"] = x, s
    for i, (r, c) in enumerate(zip(results, cots)):
        out[f"{name}.out.{i}"], out[f"{name}.cot.{i}"] = r.detach(), c
    out[f"{name}.grad.x"] = px.grad
    out[f"{name}.grad.s"] = ps.grad if ps.grad is not None else torch.zeros_like(s)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    args = p.parse_args()
    out = {}
    for seed, (fn, s_shape) in enumerate(PATTERNS):
        run(fn, s_shape, seed, out)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    write_safetensors(args.out, {k: v.contiguous() for k, v in out.items()}, {})


if __name__ == "__main__":
    main()
