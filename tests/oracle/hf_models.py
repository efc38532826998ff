#!/usr/bin/env python3
"""Hugging Face transformers as the oracle for kiln's Llama 3, Qwen3 and
Qwen3-MoE models (tests/models/hf_interop_oracle_test.cc runs this script).

  make --out DIR [--case NAME ...]
      For each case (default: all), builds the case's model in transformers
      from a config with seeded random f32 weights, saves it with
      save_pretrained (safetensors) to DIR/NAME/hf, and writes
      DIR/NAME/reference.safetensors: input_ids, position_ids, logits, loss
      (labels = input_ids, which transformers shifts) and grad.<name> for
      every parameter (transformers >= 5 names: MoE experts stacked as
      mlp.experts.gate_up_proj / down_proj, as kiln's parameters are).
      The reference is computed in float64 from the f32 weights, so a
      tolerance measures kiln's f32 error alone; __metadata__ records how far
      transformers' own f32 run is from it, for comparison.

  check --pair MODEL_DIR INPUTS [--pair ...]
      Loads each kiln-saved model directory in transformers (every weight
      must load: no missing, unexpected or mis-shaped tensors) and compares
      its logits and loss on INPUTS' input_ids and position_ids with kiln's (INPUTS' logits,
      loss). Exits 1 if any pair mismatches.

One process does every case: importing transformers costs more than the
debug models themselves.

The debug configs are written out here from the published hyper-parameters
of kiln's registry (kiln/models/config.cc), not read from kiln, so that the
test also checks kiln's config.json parsing against transformers' own.
"""
import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is local; never wait on the network

try:
    import torch
    import transformers
    from safetensors.torch import load_file, save_file
    from transformers import AutoConfig, AutoModelForCausalLM
except ImportError as e:  # a failure, not a skip: the oracle tests need transformers
    raise SystemExit(f"hf_models.py: {e}; install the pinned packages with scripts/setup.sh")

DEBUG = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=192, vocab_size=2048, max_position_embeddings=2048,
             hidden_act="silu", attention_dropout=0.0, initializer_range=0.02)

CASES = {
    # kiln registry llama3_debug: Llama 3.1 RoPE scaling, untied head.
    "llama3_debug": dict(
        arch="LlamaForCausalLM", model_type="llama", head_dim=16, rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
        rms_norm_eps=1e-5, tie_word_embeddings=False),
    # kiln registry qwen3_debug: q/k norm, tied embeddings.
    "qwen3_debug": dict(
        arch="Qwen3ForCausalLM", model_type="qwen3", head_dim=32, rope_theta=1000000.0,
        rms_norm_eps=1e-6, tie_word_embeddings=True),
    # kiln registry qwen3_moe_debug: 8 experts, top 2, renormalised.
    "qwen3_moe_debug": dict(
        arch="Qwen3MoeForCausalLM", model_type="qwen3_moe", head_dim=32, rope_theta=1000000.0,
        rms_norm_eps=1e-6, tie_word_embeddings=False, num_experts=8, num_experts_per_tok=2,
        moe_intermediate_size=32, norm_topk_prob=True, router_aux_loss_coef=0.001,
        decoder_sparse_step=1, mlp_only_layers=[]),
    # Not in the registry: a dense first layer (mlp_only_layers), no top-k
    # renormalisation, attention biases.
    "qwen3_moe_mixed": dict(
        arch="Qwen3MoeForCausalLM", model_type="qwen3_moe", head_dim=32, rope_theta=1000000.0,
        rms_norm_eps=1e-6, tie_word_embeddings=False, num_experts=8, num_experts_per_tok=2,
        moe_intermediate_size=32, norm_topk_prob=False, router_aux_loss_coef=0.01,
        decoder_sparse_step=1, mlp_only_layers=[0], attention_bias=True),
}
BATCH, SEQ = 2, 12
# The reference implementations: plain attention, and the per-expert loop of
# Qwen3MoeExperts (the default grouped_mm kernel does not take float64).
# Rotary positions start here rather than at 0, so that RoPE (and Llama 3.1's
# frequency scaling, which changes only the low frequencies) shows in the
# logits; kiln's debug configs allow positions below 256.
POSITION_OFFSET = 200
EAGER = dict(attn_implementation="eager", experts_implementation="eager")
SEED = 1234


def build_config(case):
    spec = dict(CASES[case])
    arch, model_type = spec.pop("arch"), spec.pop("model_type")
    config = AutoConfig.for_model(model_type, **DEBUG, **spec)
    config.architectures = [arch]
    if model_type == "qwen3_moe":
        config.output_router_logits = True  # the loss includes the load-balancing term, as kiln's
    return config


def randomize(model, gen):
    """Seeded random weights: matrices normal(0, 0.1), norm scales 1 + normal(0, 0.1)
    (so a swapped norm shows), biases normal(0, 0.1); routers normal(0, 0.3), so that the
    router logits spread (std ~2.4) and the top-k choice is decisive."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            if name.endswith("norm.weight"):
                value = 1 + 0.1 * r
            elif name.endswith("mlp.gate.weight"):
                value = 0.3 * r
            else:
                value = 0.1 * r
            p.copy_(value.to(p.dtype))


def forward(model, ids, positions):
    out = model(input_ids=ids, position_ids=positions, labels=ids)
    return out.logits, out.loss


def topk_gap(model, ids, positions):
    """Smallest gap, over tokens and MoE layers, between the k-th and (k+1)-th
    largest router logit (softmax keeps the order): how far the expert choice
    is from being decided by rounding."""
    if model.config.model_type != "qwen3_moe":
        return float("inf")
    with torch.no_grad():
        out = model(input_ids=ids, position_ids=positions, output_router_logits=True)
    k = model.config.num_experts_per_tok
    gap = float("inf")
    for logits in out.router_logits:
        s = logits.double().sort(-1, descending=True).values
        gap = min(gap, (s[:, k - 1] - s[:, k]).min().item())
    return gap


def build_model(case):
    """The case's f32 model with seeded random weights (randomize), and the
    generator, to draw further data from."""
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    model = AutoModelForCausalLM.from_config(build_config(case), dtype=torch.float32, **EAGER)
    randomize(model, gen)
    return model, gen


def make(case, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    model, gen = build_model(case)
    config = model.config
    model.eval()
    hf_dir = os.path.join(out_dir, "hf")
    # Small shards for the Llama case, so that kiln reads a sharded directory.
    shard = "200KB" if case == "llama3_debug" else "5GB"
    model.save_pretrained(hf_dir, safe_serialization=True, max_shard_size=shard)

    ids = torch.randint(0, config.vocab_size, (BATCH, SEQ), generator=gen, dtype=torch.int64)
    positions = POSITION_OFFSET + torch.arange(SEQ).expand(BATCH, SEQ).contiguous()
    gap = topk_gap(model, ids, positions)
    if gap < 1e-3:
        raise SystemExit(f"{case}: router top-k gap {gap:.2e} is too small for a stable oracle")

    f32_logits, f32_loss = forward(model, ids, positions)
    model64 = model.double()
    logits, loss = forward(model64, ids, positions)
    loss.backward()
    tensors = {"input_ids": ids, "position_ids": positions, "logits": logits.detach(), "loss": loss.detach()}
    for name, p in model64.named_parameters():
        tensors["grad." + name] = p.grad.detach()
    meta = {
        "case": case,
        "transformers": transformers.__version__,
        "hf_f32_logits_max_err": f"{(f32_logits.double() - logits).abs().max().item():.3e}",
        "hf_f32_loss_err": f"{abs(f32_loss.item() - loss.item()):.3e}",
        "topk_gap": f"{gap:.3e}",
    }
    save_file({k: v.contiguous() for k, v in tensors.items()},
              os.path.join(out_dir, "reference.safetensors"), metadata=meta)
    print(json.dumps(meta))


def check(model_dir, inputs):
    ref = load_file(inputs)
    model, info = AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=torch.float64, output_loading_info=True, **EAGER)
    problems = {k: v for k, v in info.items() if v and k != "error_msgs"}
    if info.get("error_msgs"):
        problems["error_msgs"] = info["error_msgs"]
    if problems:
        print(f"transformers did not load every weight of {model_dir}: {problems}")
        return 1
    if model.config.model_type == "qwen3_moe":
        model.config.output_router_logits = True
    ids = ref["input_ids"].long()
    with torch.no_grad():
        logits, loss = forward(model, ids, ref["position_ids"].long())
    d_logits = (logits - ref["logits"].double()).abs()
    tol = 1e-4 + 1e-4 * ref["logits"].double().abs()
    d_loss = abs(loss.item() - ref["loss"].double().item())
    print(json.dumps({"model": model_dir, "model_type": model.config.model_type,
                      "logits_max_abs_diff": f"{d_logits.max().item():.3e}",
                      "loss_abs_diff": f"{d_loss:.3e}"}))
    if (d_logits > tol).any() or d_loss > 1e-4 * (1 + abs(loss.item())):
        print("kiln's logits or loss differ from transformers' on kiln's saved model")
        return 1
    return 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--out", required=True)
    m.add_argument("--case", action="append", choices=sorted(CASES))
    c = sub.add_parser("check")
    c.add_argument("--pair", nargs=2, action="append", required=True,
                   metavar=("MODEL_DIR", "INPUTS"))
    a = p.parse_args()
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    if a.cmd == "make":
        for case in a.case or sorted(CASES):
            make(case, os.path.join(a.out, case))
        return 0
    failed = [model for model, inputs in a.pair if check(model, inputs) != 0]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
