#!/usr/bin/env python3
"""PyTorch + transformers as the oracle for `kiln train`'s loss curve
(tests/train/train_loop_oracle_test.cc runs this script, then kiln).

  train_loop.py --data SHARDS --tokenizer TOKENIZER_JSON --out DIR --run NAME=CONFIG [--run ...]

CONFIG is kiln's effective configuration of one run (the output of
`kiln train --print-config` with that run's flags), so that both sides follow
the same recipe. SHARDS is the `kiln data prepare` folder the run trains on
and TOKENIZER_JSON the tokenizer it was prepared with (it names BOS and EOS).
For each run this script

  - builds the recipe's model (model.name, one of hf_models.CASES, whose sizes
    must equal the config's) in transformers with hf_models' seeded random f32
    weights, and saves it to DIR/NAME/hf: kiln trains from that folder
    (--checkpoint.initial_load_path), so both start from the same weights;
  - forms each step's batch as kiln's data pipeline documents it, written out
    here from those documents rather than taken from kiln:
      kiln/data/dataset.h  the shards' documents, document i held out for
                           validation when floor((i+1) f) > floor(i f);
      kiln/data/loader.h   epoch e packs the training documents in
                           shuffled_order(n, seed, e) (Fisher-Yates over a
                           SplitMix64 stream), or in order without shuffle;
                           sample n is window n % W of epoch n / W; step t takes
                           samples [t B, (t + 1) B);
      kiln/data/packing.h  documents as [BOS] tokens [EOS], concatenated and
                           cut into W windows of seq_len + 1 (tail dropped);
                           ids = window[:-1], targets = window[1:];
  - trains training.steps steps in f32: mean next-token cross-entropy (plus
    router_aux_loss_coef x the load-balancing loss for MoE, as transformers
    adds it), gradients clipped by global norm (clip_grad_norm_'s rule),
    torch.optim.AdamW with kiln's parameter groups (weight decay except on
    tensors of fewer than 2 dims and the token embedding, unless
    optimizer.decay_norms_and_embeddings) under TorchTitan's warmup / decay
    schedule through LambdaLR (gen_adamw.wsd_lambda);
  - writes DIR/NAME/torch.json: per step "loss", "grad_norm" (before
    clipping) and "lr", and "epochs", how many epochs of data the steps read.

Settings the replay does not reproduce (gradient accumulation, bf16, the
packed-document mask, ...) are refused, never ignored.
"""
import argparse
import json
import math
import os
import struct
import sys
import tomllib

import numpy as np

import hf_models  # exits with what to do when torch / transformers are missing
from gen_adamw import kiln_adamw, wsd_lambda

import torch
import torch.nn.functional as F
import transformers

# kiln model-section keys -> the transformers config values of hf_models' cases.
MODEL_KEYS = {"dim": "hidden_size", "n_layers": "num_hidden_layers",
              "n_heads": "num_attention_heads", "n_kv_heads": "num_key_value_heads",
              "head_dim": "head_dim", "ffn_dim": "intermediate_size", "vocab_size": "vocab_size",
              "rope_theta": "rope_theta", "norm_eps": "rms_norm_eps",
              "tie_embeddings": "tie_word_embeddings"}
MOE_KEYS = {"n_experts": "num_experts", "top_k": "num_experts_per_tok",
            "moe_ffn_dim": "moe_intermediate_size"}
# The trainer's BOS / EOS: the first of these names the tokenizer knows (kiln/train/trainer.cc).
BOS_NAMES = ["<|begin_of_text|>", "<s>"]
EOS_NAMES = ["<|end_of_text|>", "<|endoftext|>", "</s>"]


def refuse(run, what):
    raise SystemExit(f"train_loop.py: run {run}: {what} is not reproduced by this oracle")


def check_config(run, cfg):
    """The case to build (the run's name when it is a case, as for a model
    the registry lacks, else the recipe's model); refuses settings the
    replay does not reproduce."""
    m, t, d = cfg["model"], cfg["training"], cfg["data"]
    case = run if run in hf_models.CASES else m["name"]
    if case not in hf_models.CASES:
        refuse(run, f"model.name = {case} (not in hf_models.CASES)")
    spec = {**hf_models.DEBUG, **hf_models.CASES[case]}
    keys = dict(MODEL_KEYS, **(MOE_KEYS if spec["model_type"] == "qwen3_moe" else {}))
    for kiln_key, hf_key in keys.items():
        if m[kiln_key] != spec[hf_key]:
            refuse(run, f"model.{kiln_key} = {m[kiln_key]} (hf_models' {case} has {spec[hf_key]})")
    if m["qk_norm"] != (spec["model_type"] != "llama"):
        refuse(run, f"model.qk_norm = {m['qk_norm']} (hf_models' {case} is {spec['model_type']})")
    if t["global_batch_size"] not in (-1, t["local_batch_size"]):
        refuse(run, "gradient accumulation (training.global_batch_size)")
    if t["mixed_precision_param"] != "float32":
        refuse(run, f"training.mixed_precision_param = {t['mixed_precision_param']}")
    if d["document_mask"]:
        refuse(run, "data.document_mask")
    if cfg["lr_scheduler"]["decay_type"] not in ("linear", "sqrt", "cosine"):
        refuse(run, f"lr_scheduler.decay_type = {cfg['lr_scheduler']['decay_type']}")
    return case


# ---- data: kiln/data/{shards,dataset,loader,packing}.h -------------------------------------

def read_shard(path):
    """The documents of one shard file (kiln/data/shards.h), each an int64 array."""
    with open(path, "rb") as f:
        b = f.read()
    magic, version, elem, ntok, ndoc, _vocab, _, _ = struct.unpack_from("<8sIIQQIIQ", b, 0)
    if magic != b"KILNTOK\0" or version != 1 or elem not in (2, 4):
        raise SystemExit(f"train_loop.py: {path} is not a version-1 kiln shard")
    tokens = np.frombuffer(b, np.uint16 if elem == 2 else np.uint32, ntok, 48).astype(np.int64)
    at = (48 + ntok * elem + 7) // 8 * 8
    offsets = np.frombuffer(b, np.uint64, ndoc + 1, at).astype(np.int64)
    return [tokens[offsets[i]:offsets[i + 1]] for i in range(ndoc)]


def training_documents(shards, val_fraction):
    with open(os.path.join(shards, "meta.json")) as f:
        meta = json.load(f)
    docs = [d for name in meta["train"] for d in read_shard(os.path.join(shards, name))]
    if meta.get("val"):  # prepared with its own validation split: no further split
        return docs
    return [d for i, d in enumerate(docs)
            if not math.floor((i + 1) * val_fraction) > math.floor(i * val_fraction)]


M64 = (1 << 64) - 1


def splitmix64(state):
    """(next state, output) of SplitMix64."""
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def shuffled_order(n, seed, epoch):
    order = list(range(n))
    _, first = splitmix64(seed)
    state = first ^ ((epoch * 0xD1B54A32D192ED03) & M64)
    for i in range(n - 1, 0, -1):
        state, r = splitmix64(state)
        j = (r * (i + 1)) >> 64  # Lemire's multiply-shift
        order[i], order[j] = order[j], order[i]
    return order


class Loader:
    def __init__(self, docs, seq_len, batch, bos, eos, shuffle, seed):
        self.docs, self.seq_len, self.batch = docs, seq_len, batch
        self.bos, self.eos, self.shuffle, self.seed = bos, eos, shuffle, seed
        self.windows = sum(len(d) + len(bos) + len(eos) for d in docs) // (seq_len + 1)
        self.epochs = {}

    def epoch(self, e):
        """Epoch e's windows, [W, seq_len + 1]."""
        if e not in self.epochs:
            n_docs = len(self.docs)
            order = shuffled_order(n_docs, self.seed, e) if self.shuffle else range(n_docs)
            stream = np.concatenate(
                [np.concatenate([self.bos, self.docs[k], self.eos]) for k in order])
            n = self.seq_len + 1
            self.epochs[e] = stream[:self.windows * n].reshape(self.windows, n)
        return self.epochs[e]

    def step(self, t):
        """Step t's (ids, targets), each [batch, seq_len]."""
        rows = [self.epoch(s // self.windows)[s % self.windows]
                for s in range(t * self.batch, (t + 1) * self.batch)]
        w = torch.from_numpy(np.stack(rows))
        return w[:, :-1], w[:, 1:]


def special_ids(tokenizer_json, names):
    with open(tokenizer_json, encoding="utf-8") as f:
        tok = json.load(f)
    ids = dict(tok["model"]["vocab"])
    ids.update({t["content"]: t["id"] for t in tok.get("added_tokens", [])})
    return next(([ids[n]] for n in names if n in ids), [])


# ---- training ------------------------------------------------------------------------------

def replay(run, cfg, docs, tokenizer_json, out_dir):
    case = check_config(run, cfg)
    t, o, s, d = cfg["training"], cfg["optimizer"], cfg["lr_scheduler"], cfg["data"]
    model, _ = hf_models.build_model(case)
    model.save_pretrained(os.path.join(out_dir, "hf"), safe_serialization=True)
    model.train()
    as_ids = lambda names: np.array(special_ids(tokenizer_json, names), np.int64)
    loader = Loader(docs, t["seq_len"], t["local_batch_size"],
                    as_ids(BOS_NAMES) if d["add_bos"] else np.zeros(0, np.int64),
                    as_ids(EOS_NAMES) if d["add_eos"] else np.zeros(0, np.int64),
                    d["shuffle"], t["seed"])

    params = [p for _, p in model.named_parameters()]  # a tied head appears once
    opt = kiln_adamw(model, o)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, wsd_lambda(
        t["steps"], s["warmup_steps"], s.get("decay_ratio"), s["decay_type"], s["min_lr_factor"]))

    moe = model.config.model_type == "qwen3_moe"
    log = {"case": case, "loss": [], "grad_norm": [], "lr": []}
    for step in range(t["steps"]):
        ids, targets = loader.step(step)
        log["lr"].append(opt.param_groups[0]["lr"])
        out = model(input_ids=ids)
        loss = F.cross_entropy(out.logits.reshape(-1, out.logits.shape[-1]), targets.reshape(-1))
        if moe:
            loss = loss + model.config.router_aux_loss_coef * out.aux_loss
        opt.zero_grad(set_to_none=False)
        loss.backward()
        for p in params:  # kiln decays every parameter, used or not; torch skips grad-less ones
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        # clip_grad_norm_ with the norm taken in float64: torch's f32 norm of
        # the 131k-entry embedding gradient is ~3e-5 off here, which would
        # measure torch's error rather than kiln's.
        norm = torch.linalg.vector_norm(torch.stack([p.grad.double().norm() for p in params]))
        if t["max_norm"] > 0:
            torch.nn.utils.clip_grads_with_norm_(params, t["max_norm"], norm)
        opt.step()
        sched.step()
        log["loss"].append(loss.item())
        log["grad_norm"].append(norm.item())
    log["epochs"] = (t["steps"] * t["local_batch_size"] - 1) // loader.windows + 1
    with open(os.path.join(out_dir, "torch.json"), "w") as f:
        json.dump(log, f)
    print(json.dumps({"run": run, "case": case, "windows_per_epoch": loader.windows,
                      "epochs": log["epochs"], "first_loss": log["loss"][0],
                      "last_loss": log["loss"][-1]}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True, help="a `kiln data prepare` folder")
    p.add_argument("--tokenizer", required=True, help="the tokenizer.json it was prepared with")
    p.add_argument("--out", required=True)
    p.add_argument("--run", action="append", required=True, metavar="NAME=CONFIG")
    a = p.parse_args()
    # The debug models are too small to gain from threads, and spinning
    # OpenMP threads slow to a crawl when tests share the cores (ctest -j).
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    for spec in a.run:
        name, config_path = spec.split("=", 1)
        with open(config_path, "rb") as f:
            cfg = tomllib.load(f)
        docs = training_documents(a.data, cfg["data"]["val_fraction"])
        out_dir = os.path.join(a.out, name)
        os.makedirs(out_dir, exist_ok=True)
        replay(name, cfg, docs, a.tokenizer, out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
