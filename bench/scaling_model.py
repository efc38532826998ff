#!/usr/bin/env python3
"""A model of data-parallel scaling beyond one machine, from a measured step.

Measures (or takes) the compute time of one training step per rank, takes the
collective sizes from the model's parameter count (`kiln info --model NAME
--json`), and predicts the weak-scaling efficiency (fixed tokens per rank) at
8, 64 and 512 ranks for SimpleFSDP and HSDP, with and without overlap of
communication and compute. Prints the assumptions with the table.

  bench/scaling_model.py                       # measure llama3_debug here (graph trainer)
  bench/scaling_model.py --model llama3_8b --tflops-per-rank 400 \\
      --tokens-per-rank 8192 --intra-gbs 400 --inter-gbs 50   # an H100-class cluster

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
  Efficiency: compute / (compute + comm) without overlap, compute / max(compute,
    comm) with perfect overlap; real runs land in between.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def kiln(args):
    return subprocess.run([os.path.join(ROOT, "build", "kiln")] + args, check=True,
                          capture_output=True, text=True).stdout


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


def comm_seconds(kind, n, per_host, params, tensors, intra, inter, a_intra, a_inter):
    if n == 1:
        return 0.0
    if kind == "fsdp":
        bw, alpha = (intra, a_intra) if n <= per_host else (inter, a_inter)
        return (n - 1) / n * params * 8 / bw + 3 * tensors * (n - 1) * alpha
    h = min(n, per_host)
    r = n // h
    t = (h - 1) / h * params * 8 / intra + 3 * tensors * (h - 1) * a_intra
    if r > 1:
        t += 2 * (r - 1) / r * (params / h) * 4 / inter + tensors * 2 * (r - 1) * a_inter
    return t


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama3_debug", help="registered model (kiln info --model)")
    p.add_argument("--recipe", default="llama3_debug", help="recipe to measure when no --tflops-per-rank")
    p.add_argument("--steps", type=int, default=12, help="steps of the measured run")
    p.add_argument("--tflops-per-rank", type=float, help="achieved TFLOP/s per rank (skips measuring)")
    p.add_argument("--tokens-per-rank", type=int, help="tokens per rank per step (with --tflops-per-rank)")
    p.add_argument("--ranks-per-host", type=int, default=8)
    p.add_argument("--intra-gbs", type=float, default=100.0, help="intra-host GB/s per rank")
    p.add_argument("--inter-gbs", type=float, default=12.5, help="inter-host GB/s per rank (100 Gb/s)")
    p.add_argument("--alpha-intra-us", type=float, default=5.0)
    p.add_argument("--alpha-inter-us", type=float, default=20.0)
    a = p.parse_args()

    info = json.loads(kiln(["info", "--model", a.model, "--json"]))
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
    params = info["params"]
    tensors = 2 + info["n_layers"] * 9  # embeddings + norm/head, ~9 tensors per block

    print(f"model {a.model}: {params / 1e6:.1f}M parameters, {info['flops_per_token'] / 1e9:.3f} "
          f"GFLOP/token; {a.tokens_per_rank} tokens per rank per step")
    print(f"compute per step and rank: {compute * 1e3:.2f} ms ({source})")
    print(f"links: {a.intra_gbs} GB/s intra-host, {a.inter_gbs} GB/s inter-host per rank, "
          f"alpha {a.alpha_intra_us}/{a.alpha_inter_us} us; {a.ranks_per_host} ranks per host")
    print()
    print(f"{'ranks':>6} {'layout':>8} {'comm ms':>10} {'eff. no overlap':>16} {'eff. overlap':>13}")
    for n in (8, 64, 512):
        for kind in ("fsdp", "hsdp"):
            t = comm_seconds(kind, n, a.ranks_per_host, params, tensors, a.intra_gbs * 1e9,
                             a.inter_gbs * 1e9, a.alpha_intra_us * 1e-6, a.alpha_inter_us * 1e-6)
            print(f"{n:>6} {kind:>8} {t * 1e3:>10.2f} {compute / (compute + t):>16.1%} "
                  f"{compute / max(compute, t):>13.1%}")


if __name__ == "__main__":
    main()
