#!/usr/bin/env python3
"""Writes PyTorch reference data for kiln/optim (tests/optim/adamw_oracle_test.cc):
several torch.optim.AdamW steps with two parameter groups under a LambdaLR
schedule, TorchTitan's warmup-stable-decay schedules through LambdaLR, and
torch.nn.utils.clip_grad_norm_.
"""
import argparse
import math
import os

import torch

from gen_ops import write_safetensors

SHAPES = [(4, 5), (5,), (3, 4)]  # parameter 1 (a bias) is in the no-decay group
STEPS = 6


def kiln_adamw(model, o, **kwargs):
    """torch.optim.AdamW over `model` with kiln's default parameter groups
    (kiln/optim/adamw.h default_param_groups): weight decay except on
    parameters of fewer than 2 dims and the token embedding, unless
    decay_norms_and_embeddings. `o` is kiln's [optimizer] config section."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        skip = not o["decay_norms_and_embeddings"] and (
            p.ndim < 2 or name.endswith("embed_tokens.weight"))
        (no_decay if skip else decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": o["weight_decay"]},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"], **kwargs)


def wsd_lambda(steps, warmup, decay_ratio, decay_type, min_lr_factor):
    """TorchTitan's build_lr_schedulers + linear_warmup_stable_decay."""
    warmup = min(warmup, steps)
    if decay_ratio is not None:
        decay = round(steps * decay_ratio)
        if warmup + decay > steps:
            decay = steps - warmup
    else:
        decay = steps - warmup
    stable = steps + 1 - warmup - decay

    def f(t):
        if t < warmup:
            return float((t + 1) / warmup)
        if t < warmup + stable:
            return 1.0
        p = float(t + 1 - warmup - stable) / decay
        if decay_type == "linear":
            d = 1 - p
        elif decay_type == "sqrt":
            d = 1 - math.sqrt(p)
        else:
            d = 0.5 * (1.0 + math.cos(math.pi * p))
        return min_lr_factor + (1 - min_lr_factor) * d

    return f


# name -> (steps, warmup, decay_ratio, decay_type, min_lr_factor); mirrored in the C++ test.
SCHEDULES = {
    "linear": (20, 5, None, "linear", 0.0),
    "cosine_min": (30, 4, None, "cosine", 0.1),
    "wsd_sqrt": (25, 3, 0.4, "sqrt", 0.0),
    "wsd_cosine": (17, 2, 0.5, "cosine", 0.05),
    "no_warmup": (10, 0, None, "linear", 0.0),
    "warmup_past_end": (6, 10, None, "cosine", 0.0),
    "constant": (8, 3, 0.0, "linear", 0.0),
}


def lambdalr_lrs(lr, spec):
    steps = spec[0]
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, wsd_lambda(*spec))
    lrs = []
    for _ in range(steps):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return torch.tensor(lrs, dtype=torch.float64)


def adamw(out):
    g = torch.Generator().manual_seed(11)
    params = [torch.nn.Parameter(torch.randn(s, generator=g)) for s in SHAPES]
    for i, p in enumerate(params):
        out[f"adamw.init.{i}"] = p.detach().clone()
    opt = torch.optim.AdamW(
        [{"params": [params[0], params[2]], "weight_decay": 0.1},
         {"params": [params[1]], "weight_decay": 0.0, "lr": 0.5e-2}],
        lr=1e-2, betas=(0.9, 0.95), eps=1e-8)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, wsd_lambda(STEPS, 2, None, "cosine", 0.1))
    for step in range(STEPS):
        for i, p in enumerate(params):
            p.grad = torch.randn(p.shape, generator=g) * (0.1 + step)
            out[f"adamw.grad.{step}.{i}"] = p.grad.clone()
        opt.step()
        sched.step()
        for i, p in enumerate(params):
            out[f"adamw.param.{step}.{i}"] = p.detach().clone()
            st = opt.state[p]
            out[f"adamw.m.{step}.{i}"] = st["exp_avg"].clone()
            out[f"adamw.v.{step}.{i}"] = st["exp_avg_sq"].clone()


def clip(out):
    g = torch.Generator().manual_seed(5)
    for name, max_norm, scale in [("clipped", 1.0, 3.0), ("unclipped", 100.0, 1.0)]:
        grads = [torch.randn(s, generator=g) * scale for s in SHAPES]
        ps = [torch.nn.Parameter(torch.zeros(s)) for s in SHAPES]
        for i, (p, gr) in enumerate(zip(ps, grads)):
            p.grad = gr.clone()
            out[f"clip.{name}.grad.{i}"] = gr
        norm = torch.nn.utils.clip_grad_norm_(ps, max_norm)
        out[f"clip.{name}.norm"] = norm.reshape(())
        for i, p in enumerate(ps):
            out[f"clip.{name}.clipped.{i}"] = p.grad.clone()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    args = p.parse_args()
    out = {}
    adamw(out)
    clip(out)
    for name, spec in SCHEDULES.items():
        out[f"schedule.{name}"] = lambdalr_lrs(3e-4, spec)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    write_safetensors(args.out, {k: v.contiguous() for k, v in out.items()}, {})


if __name__ == "__main__":
    main()
