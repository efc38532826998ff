#!/usr/bin/env python3
"""Elementwise GB/s: kiln (bench/elementwise_bench) against PyTorch on the
same machine in the same script, 16M float32 elements, same thread count.

Usage: bench/elementwise_vs_torch.py [--build build] [--threads 2]
"""
import argparse
import json
import os
import subprocess
import time

import torch

N = 16 << 20


def torch_gbps(fn, nbytes, reps=20):
    fn()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return nbytes / best / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    a, b = torch.ones(N), torch.ones(N)
    ref = {
        "add": torch_gbps(lambda: torch.add(a, b), 12 * N),
        "silu": torch_gbps(lambda: torch.nn.functional.silu(a), 8 * N),
    }
    env = dict(os.environ, KILN_NUM_THREADS=str(args.threads))
    out = subprocess.run(
        [os.path.join(args.build, "bench", "elementwise_bench"), "--benchmark_format=json",
         "--benchmark_repetitions=5", "--benchmark_report_aggregates_only=true"],
        check=True, capture_output=True, text=True, env=env).stdout
    kiln = {}
    for r in json.loads(out)["benchmarks"]:
        if r.get("aggregate_name") == "median":
            kiln[r["run_name"].split("/")[0]] = r["bytes_per_second"] / 1e9
    print(f"{'op':6} {'kiln GB/s':>10} {'loop GB/s':>10} {'torch GB/s':>11} {'kiln/torch':>10}")
    for op, k, loop in [("add", "BM_KilnAdd", "BM_LoopAdd"), ("silu", "BM_KilnSilu", "BM_LoopSilu")]:
        print(f"{op:6} {kiln[k]:10.2f} {kiln[loop]:10.2f} {ref[op]:11.2f} {kiln[k] / ref[op]:10.2f}")


if __name__ == "__main__":
    main()
