#!/usr/bin/env python3
"""A model of data-parallel scaling beyond one machine, from a measured step.

Measures (or takes) the compute time of one training step per rank, takes the
collective sizes from the model's parameter count (`kiln info --model NAME
--json`), and predicts the weak-scaling efficiency (fixed tokens per rank) at
8, 64 and 512 ranks for SimpleFSDP and HSDP, with and without overlap of
communication and compute, and for a mixture-of-experts model the same two
with expert parallelism (EP). Prints the assumptions with the table.

  bench/scaling_model.py                       # measure llama3_debug here (graph trainer)
  bench/scaling_model.py --model llama3_8b --tflops-per-rank 400 \\
      --tokens-per-rank 8192 --intra-gbs 400 --inter-gbs 50   # an H100-class cluster
  bench/scaling_model.py --model qwen3_30b_a3b --ep 8 --tflops-per-rank 400 \\
      --tokens-per-rank 8192 --intra-gbs 400 --inter-gbs 50   # MoE, experts over 8 ranks

KILN_BIN names the kiln binary (default build/kiln).

Compute per rank: kiln info's flops_per_token (6 x the active parameters less
the embedding table, plus attention) x tokens per rank / achieved TFLOP/s; EP
does not change it (routing assumed balanced).

The communication model, per optimizer step and rank (ring algorithms):
  SimpleFSDP over n ranks: all_gather of the bf16 parameters for the forward,
    again for the backward (SimpleFSDP re-gathers rather than keep them), and
    reduce_scatter of the f32 gradients: (n-1)/n * P * (2 + 2 + 4) bytes over
    the slowest link of the ring (the inter-host link once n > ranks/host).
  HSDP: the same within a host (h ranks, intra-host links), then an
    all_reduce of each rank's f32 gradient shard across the n/h replicas:
    2 (r-1)/r * P/h * 4 bytes over the inter-host link.
  Latency: alpha per ring step, (ring size - 1) steps per collective, three
    collectives per parameter tensor.
  + EP over groups of ep consecutive ranks (rank j of a group holds 1/ep of
    each MoE layer's experts):
    the dense parameters (all but the experts: attention, norms, embeddings,
      routers) are sharded as above over all n ranks;
    the expert parameters E = n_moe_layers * n_experts * 3 * dim * moe_ffn_dim
      are sharded over the n/ep ranks holding the same experts: the same
      SimpleFSDP / HSDP collectives of E/ep parameters over a ring of n/ep
      (max(1, ranks/host / ep) of them per host);
    per MoE layer, the dispatch all_to_all sends each token's hidden state to
      its top_k experts' ranks, (ep-1)/ep of them off the rank, the combine
      brings them back, and the backward does both again:
      4 * tokens * top_k * dim * 2 (bf16) * (ep-1)/ep bytes over the
      intra-host link when ep <= ranks/host, else the inter-host link, plus
      alpha * (ep-1) per all_to_all (4 per MoE layer; the small exchange of
      per-expert counts before each dispatch is left out).
  Efficiency: compute / (compute + comm) without overlap, compute / max(compute,
    comm) with perfect overlap; real runs land in between.
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KILN = os.environ.get("KILN_BIN", os.path.join(ROOT, "build", "kiln"))

Links = collections.namedtuple("Links", "intra inter a_intra a_inter")  # bytes/s, s


def kiln(args):
    return subprocess.run([KILN] + args, check=True, capture_output=True, text=True).stdout


def measure(recipe, steps):
    """Median steady-state tokens/s and achieved TFLOP/s of a graph-trainer run here."""
    with tempfile.TemporaryDirectory() as dump:
        kiln(["train", "--config", recipe, "--compile.graph_trainer", "--training.steps", str(steps),
              "--metrics.log_freq", "1", "--checkpoint.enable", "false",
              "--validation.enable", "false", "--metrics.enable_tensorboard", "false",
              "--job.dump_folder", dump])
        rows = [json.loads(line) for line in open(os.path.join(dump, "metrics.jsonl"))]
        config = kiln(["train", "--config", recipe, "--print-config"])
    steady = rows[len(rows) // 2:]  # the first steps compile
    training = tomllib.loads(config)["training"]
    tokens = training["local_batch_size"] * training["seq_len"]
    return (statistics.median(r["tps"] for r in steady),
            statistics.median(r["tflops"] for r in steady), tokens)


def link(links, local):
    return (links.intra, links.a_intra) if local else (links.inter, links.a_inter)


def comm_seconds(kind, n, per_host, params, tensors, links):
    """SimpleFSDP ("fsdp") or HSDP parameter collectives of `params` over n ranks."""
    if n == 1:
        return 0.0
    if kind == "fsdp":
        bw, alpha = link(links, n <= per_host)
        return (n - 1) / n * params * 8 / bw + 3 * tensors * (n - 1) * alpha
    h = min(n, per_host)
    r = n // h
    t = (h - 1) / h * params * 8 / links.intra + 3 * tensors * (h - 1) * links.a_intra
    if r > 1:
        t += 2 * (r - 1) / r * (params / h) * 4 / links.inter + tensors * 2 * (r - 1) * links.a_inter
    return t


def moe_layers(info):
    if not info.get("n_experts"):
        return 0
    return sum((l + 1) % info["decoder_sparse_step"] == 0 and l not in info["mlp_only_layers"]
               for l in range(info["n_layers"]))


def a2a_seconds(ep, per_host, tokens, info, links):
    """Dispatch + combine all_to_alls, forward and backward, of every MoE layer."""
    bw, alpha = link(links, ep <= per_host)
    sent = 4 * tokens * info["top_k"] * info["dim"] * 2 * (ep - 1) / ep
    return moe_layers(info) * (sent / bw + 4 * (ep - 1) * alpha)


def ep_comm_seconds(kind, n, ep, per_host, info, tensors, a2a, links):
    """Dense parameters over n ranks, experts over n/ep, plus the all_to_alls."""
    n_moe = moe_layers(info)
    experts = n_moe * info["n_experts"] * 3 * info["dim"] * info["moe_ffn_dim"]
    expert_tensors = 2 * n_moe  # gate_up_proj, down_proj
    dense = comm_seconds(kind, n, per_host, info["params"] - experts, tensors - expert_tensors, links)
    return dense + comm_seconds(kind, n // ep, max(1, per_host // ep), experts / ep,
                                expert_tensors, links) + a2a


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama3_debug", help="registered model (kiln info --model)")
    p.add_argument("--recipe", default="llama3_debug", help="recipe to measure when no --tflops-per-rank")
    p.add_argument("--steps", type=int, default=12, help="steps of the measured run")
    p.add_argument("--tflops-per-rank", type=float, help="achieved TFLOP/s per rank (skips measuring)")
    p.add_argument("--tokens-per-rank", type=int, help="tokens per rank per step (with --tflops-per-rank)")
    p.add_argument("--ep", type=int, help="expert-parallel degree (default: 8 for MoE models, 1 for dense)")
    p.add_argument("--ranks-per-host", type=int, default=8)
    p.add_argument("--intra-gbs", type=float, default=100.0, help="intra-host GB/s per rank")
    p.add_argument("--inter-gbs", type=float, default=12.5, help="inter-host GB/s per rank (100 Gb/s)")
    p.add_argument("--alpha-intra-us", type=float, default=5.0)
    p.add_argument("--alpha-inter-us", type=float, default=20.0)
    a = p.parse_args()

    info = json.loads(kiln(["info", "--model", a.model, "--json"]))
    n_moe = moe_layers(info)
    if a.ep is None:
        a.ep = 8 if n_moe else 1
    if a.ep != 1 and not n_moe:
        sys.exit(f"--ep {a.ep} needs an MoE model; {a.model} is dense")
    if n_moe and (a.ep < 1 or info["n_experts"] % a.ep):
        sys.exit(f"--ep must divide n_experts ({info['n_experts']}), got {a.ep}")
    if a.tflops_per_rank is None:
        tps, tflops, tokens = measure(a.recipe, a.steps)
        source = f"measured here: {a.recipe}, graph trainer, {tps:.0f} tokens/s, {tflops:.4f} TFLOP/s"
        a.tflops_per_rank = tflops
        a.tokens_per_rank = a.tokens_per_rank or tokens
    else:
        if a.tokens_per_rank is None:
            sys.exit("--tflops-per-rank needs --tokens-per-rank")
        source = f"given: {a.tflops_per_rank} TFLOP/s per rank"
    compute = info["flops_per_token"] * a.tokens_per_rank / (a.tflops_per_rank * 1e12)
    tensors = 2 + info["n_layers"] * 9  # embeddings + norm/head, ~9 tensors per block
    links = Links(a.intra_gbs * 1e9, a.inter_gbs * 1e9, a.alpha_intra_us * 1e-6, a.alpha_inter_us * 1e-6)
    layouts = ["fsdp", "hsdp"] + (["fsdp+ep", "hsdp+ep"] if a.ep > 1 else [])

    print(f"model {a.model}: {info['params'] / 1e6:.1f}M parameters ({info['active_params'] / 1e6:.1f}M "
          f"active), {info['flops_per_token'] / 1e9:.3f} GFLOP/token; {a.tokens_per_rank} tokens per "
          f"rank per step")
    print(f"compute per step and rank: {compute * 1e3:.2f} ms ({source})")
    print(f"links: {a.intra_gbs} GB/s intra-host, {a.inter_gbs} GB/s inter-host per rank, "
          f"alpha {a.alpha_intra_us}/{a.alpha_inter_us} us; {a.ranks_per_host} ranks per host")
    if a.ep > 1:
        a2a = a2a_seconds(a.ep, a.ranks_per_host, a.tokens_per_rank, info, links)
        where = "intra" if a.ep <= a.ranks_per_host else "inter"
        print(f"ep {a.ep}: {n_moe} MoE layers x {info['n_experts']} experts (top {info['top_k']}) over "
              f"{a.ep} ranks; all_to_all {a2a * 1e3:.2f} ms per step and rank ({where}-host), "
              f"experts sharded over n/{a.ep} ranks")
    print()
    print(f"{'ranks':>6} {'layout':>8} {'comm ms':>10} {'eff. no overlap':>16} {'eff. overlap':>13}")
    for n in (8, 64, 512):
        for kind in layouts:
            if kind.endswith("+ep"):
                if n % a.ep:
                    continue
                t = ep_comm_seconds(kind[:4], n, a.ep, a.ranks_per_host, info, tensors, a2a, links)
            else:
                t = comm_seconds(kind, n, a.ranks_per_host, info["params"], tensors, links)
            print(f"{n:>6} {kind:>8} {t * 1e3:>10.2f} {compute / (compute + t):>16.1%} "
                  f"{compute / max(compute, t):>13.1%}")


if __name__ == "__main__":
    main()
