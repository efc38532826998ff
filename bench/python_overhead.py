#!/usr/bin/env python3
"""What driving kiln from Python costs, measured against references in the
same run:

1. Per-op dispatch on small tensors (where the overhead is all there is):
   `a + b` from Python (the Tensor operator), through kiln.ops.add (the
   registry's generic path), and the same loop from C++ (kiln._kiln.
   _dispatch_loop: no Python per op), against torch eager's `a + b`.
2. The graph trainer's tokens/s on the default recipe driven by kiln.train
   from Python, against the `kiln train` CLI with the same flags (they should
   be equal within noise: the step is one program either way).

    PYTHONPATH=build/python .venv/bin/python bench/python_overhead.py [--kiln build/kiln]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

os.environ.setdefault("KILN_NUM_THREADS", "1")  # small tensors: one thread, as torch below

import kiln  # noqa: E402
from ladder_vs_torch import cpu_name  # noqa: E402  (beside this script)


def best_of(fn, rounds=5):
    """The fastest of `rounds` timings of fn() (seconds): the least disturbed."""
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def dispatch(n, iters):
    import torch
    torch.set_num_threads(1)
    a, b = kiln.ones([n]), kiln.ones([n])
    ta, tb = torch.ones(n), torch.ones(n)

    def py_operator():
        for _ in range(iters):
            a + b
        kiln.synchronize()

    def py_generic():
        for _ in range(iters):
            kiln.ops.add(a, b)
        kiln.synchronize()

    def torch_eager():
        for _ in range(iters):
            ta + tb

    rows = [("kiln from C++ (reference)", best_of(lambda: kiln._kiln._dispatch_loop(a, b, iters))),
            ("kiln from Python, a + b", best_of(py_operator)),
            ("kiln from Python, kiln.ops.add", best_of(py_generic)),
            ("torch eager, a + b", best_of(torch_eager))]
    ref = rows[0][1]
    print(f"\nper-op time, add of two f32[{n}] ({iters} ops, best of 5; kiln 1 thread, torch 1 thread):")
    for name, t in rows:
        print(f"  {name:34s} {t / iters * 1e6:8.2f} us/op  {t / ref:6.2f}x the C++ loop")


def trainer(kiln_cli, steps, rounds):
    flags = {"training": {"steps": steps}, "metrics": {"log_freq": 1, "enable_tensorboard": False,
                                                       "progress_bar": False},
             "checkpoint": {"enable": False}, "validation": {"enable": False}}

    def tps(dump):  # median over the steps after the first two (compilation)
        with open(os.path.join(dump, "metrics.jsonl")) as f:
            return statistics.median(r["tps"] for r in map(json.loads, f) if r["step"] > 2)

    py, cli = [], []
    with tempfile.TemporaryDirectory() as d:
        for r in range(rounds):  # alternated, so drift in the machine's load hits both
            dump = f"{d}/cli{r}"
            subprocess.run([kiln_cli, "train", f"--job.dump_folder={dump}", *kiln.train_flags(flags)],
                           check=True, stdout=subprocess.DEVNULL)
            cli.append(tps(dump))
            dump = f"{d}/py{r}"
            kiln.train(quiet=True, job={"dump_folder": dump}, **flags)
            py.append(tps(dump))
    c, p = statistics.median(cli), statistics.median(py)
    print(f"\ngraph trainer, default recipe, {steps} steps x {rounds} rounds each, "
          f"KILN_NUM_THREADS={os.environ['KILN_NUM_THREADS']} for both "
          f"(median tokens/s of steps 3..{steps}):")
    print(f"  kiln train (CLI)         {c:9.0f} tokens/s")
    print(f"  kiln.train from Python   {p:9.0f} tokens/s  {p / c:.3f}x the CLI")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kiln", default=os.environ.get("KILN_CLI", "build/kiln"))
    p.add_argument("--size", type=int, default=16, help="elements of the small tensors")
    p.add_argument("--iters", type=int, default=20000)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    info = subprocess.run([args.kiln, "info"], capture_output=True, text=True).stdout
    features = next((l.split(":", 1)[1].strip() for l in info.splitlines()
                     if l.startswith("cpu features")), "?")
    print(f"cpu: {cpu_name()}, {os.cpu_count()} logical cores; {features}")
    dispatch(args.size, args.iters)
    trainer(args.kiln, args.steps, args.rounds)


if __name__ == "__main__":
    main()
