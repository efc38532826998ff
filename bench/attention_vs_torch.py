#!/usr/bin/env python3
"""kiln's flash attention against torch.nn.functional.scaled_dot_product_attention
on the CPU: causal, B=1, Hq=8, Hkv=2 (GQA), head_dim 128, f32, seq 512/2048/8192,
forward and forward + backward, on the same thread count.

kiln's numbers come from bench/fused_kernels_bench (its attention benchmarks:
flash attention and kiln's composite scaled_dot_product_attention, with
peak memory from kiln::memory_stats), one case per process; "OOM" marks a
composite that did not fit in memory (the fused op is then run alone). torch is timed here, each case in a
fresh subprocess: best of a few calls (wall and process CPU time), and peak
memory as the rise of the process's resident-set high-water mark over the
inputs (torch has no CPU allocator statistics; this also counts memory torch
frees back to the system, so it is an upper bound on what it held).

    python3 bench/attention_vs_torch.py --bench build/bench/fused_kernels_bench --threads 2
"""
import argparse
import json
import resource
import subprocess
import sys
import time

B, HQ, HKV, D = 1, 8, 2, 128
SEQS = [512, 2048, 8192]


def rss_kib():
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() // 1024


def torch_case(seq, backward, threads, reps):
    """Runs in a subprocess: prints one JSON line."""
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    q = torch.randn(B, HQ, seq, D, generator=g, requires_grad=backward)
    k = torch.randn(B, HKV, seq, D, generator=g, requires_grad=backward)
    v = torch.randn(B, HKV, seq, D, generator=g, requires_grad=backward)
    cot = torch.randn(B, HQ, seq, D, generator=g)

    def run():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        if backward:
            torch.autograd.grad((out * cot).sum(), [q, k, v])

    base = rss_kib()
    best_wall = best_cpu = float("inf")
    for _ in range(reps):
        w, c = time.perf_counter(), time.process_time()
        run()
        best_wall = min(best_wall, time.perf_counter() - w)
        best_cpu = min(best_cpu, time.process_time() - c)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
    print(json.dumps({"ms": best_wall * 1e3, "cpu_ms": best_cpu * 1e3, "MiB": max(peak, 0) / 1024}))


def kiln_case(bench, threads, seq, backward):
    """kiln's counters for one case, each in its own process; when the
    composite reference runs out of memory (the process is killed), the
    fused op alone (ref_* absent)."""
    name = f"attention/f32/causal/seq{seq}/{'fwd.bwd' if backward else 'fwd'}/"
    env = {"KILN_NUM_THREADS": str(threads), "PATH": "/usr/bin:/bin"}
    for fused_only in (False, True):
        if fused_only:
            env["KILN_BENCH_FUSED_ONLY"] = "1"
        r = subprocess.run([bench, f"--benchmark_filter={name}", "--benchmark_format=json"],
                           capture_output=True, text=True, env=env)
        if r.returncode == 0:
            return json.loads(r.stdout)["benchmarks"][0]
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", help="fused_kernels_bench binary (omit to time torch only)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--max-seq", type=int, default=8192)
    p.add_argument("--case", help=argparse.SUPPRESS)  # internal: seq,backward
    args = p.parse_args()
    if args.case:
        seq, bwd = args.case.split(",")
        torch_case(int(seq), bwd == "1", args.threads, 1 if int(seq) >= 8192 else 3)
        return
    print(f"causal attention, B={B} Hq={HQ} Hkv={HKV} D={D} f32, {args.threads} threads")
    print(f"{'seq':>5} {'pass':>8} | {'flash ms':>9} {'cpu ms':>8} {'MiB':>7} | "
          f"{'kiln sdpa ms':>12} {'MiB':>7} | {'torch ms':>9} {'cpu ms':>8} {'MiB':>7} | "
          f"{'torch/flash':>11} {'(cpu)':>6}")
    for seq in [s for s in SEQS if s <= args.max_seq]:
        for bwd in (False, True):
            r = subprocess.run([sys.executable, __file__, "--case", f"{seq},{int(bwd)}",
                                "--threads", str(args.threads)],
                               check=True, capture_output=True, text=True)
            t = json.loads(r.stdout.strip().splitlines()[-1])
            k = kiln_case(args.bench, args.threads, seq, bwd) if args.bench else None
            ref = (f"{k['ref_ms']:12.1f} {k['ref_MiB']:7.1f}" if k and "ref_ms" in k else
                   f"{'OOM' if k else '-':>12} {'-':>7}")
            kiln_cols = (f"{k['fused_ms']:9.1f} {k['fused_cpu_ms']:8.1f} {k['fused_MiB']:7.1f} | {ref}"
                         if k else f"{'-':>9} {'-':>8} {'-':>7} | {ref}")
            ratio = (f"{t['ms'] / k['fused_ms']:11.2f} {t['cpu_ms'] / k['fused_cpu_ms']:6.2f}"
                     if k else f"{'-':>11} {'-':>6}")
            print(f"{seq:5d} {'fwd+bwd' if bwd else 'fwd':>8} | {kiln_cols} | "
                  f"{t['ms']:9.1f} {t['cpu_ms']:8.1f} {t['MiB']:7.1f} | {ratio}")


if __name__ == "__main__":
    main()
