#!/usr/bin/env python3
"""Training tokens/s and peak memory of each rung of kiln's ladder against PyTorch and JAX.

Steady-state tokens/s and peak memory of each rung of kiln's execution ladder,
against PyTorch (eager and torch.compile) and JAX (jax.jit) training the same model.

For each recipe (default: llama3_debug and llama3_100m) this runs `kiln train`
once per rung, each in a fresh dump folder with the same batch, sequence length,
thread count and precision:

    strict          --runtime.eager_mode=strict (the default)
    defer           --runtime.eager_mode=defer_and_fuse
    compile         --compile.enable (each transformer block compiled once)
    graph           --compile.graph_trainer (the whole step as one program)
    strict_fused    strict + --override attention=flash --override loss=fused_ce
    graph_fused     graph + the same fused kernels
    graph_fused_full, graph_fused_selective
                    graph_fused + --activation_checkpoint.mode=full|selective
    graph_fused_replay
                    graph_fused + --compile.replay (a CUDA graph on a GPU)

and then trains the same architecture with PyTorch: transformers'
LlamaForCausalLM, Qwen3ForCausalLM or Qwen3MoeForCausalLM (SDPA attention;
transformers' default experts kernel; the load-balancing loss added as kiln adds
it) built from kiln's model (its registry entry, `kiln info --model NAME --json`,
under the effective config's [model]; a run whose parameter count differs from
kiln's is reported, not measured), AdamW with
the recipe's hyper-parameters and parameter groups (no decay on norms and
embeddings unless the recipe decays them; fused=True), gradient clipping to
max_norm and a LambdaLR warm-up, on random tokens of the same [batch, seq_len]
shape (throughput does not depend on the data). bf16 means kiln's
mixed_precision_param=bfloat16 (bf16 compute, f32 master weights and AdamW state)
and, for torch, f32 weights and AdamW state under torch.autocast(bfloat16): the
same policy. torch.compile compiles the model (forward and backward through
AOTAutograd and Inductor); AdamW stays eager.

The jax rung (Llama models only) trains the same model in plain jax.numpy (bench/jax_llama.py:
LlamaForCausalLM's parameters, names and shapes, SDPA's causal softmax attention
written out, Llama 3.1 RoPE) with the same AdamW update, parameter groups,
clipping and warm-up, the whole step (forward, backward, clipping, AdamW) under
one jax.jit with the parameters and AdamW state donated, on random tokens of the
same shape; its bf16 casts the f32 master weights to bf16 inside the step (bf16
matmuls and activations, RMSNorm statistics, attention softmax and the loss in
f32; f32 gradients, clipping and AdamW state). Each step's time ends with
jax.block_until_ready on the new parameters, state and loss. Threads: XLA's CPU
client sizes its thread pools from the process's CPU affinity, and with jaxlib
0.10.2 XLA_FLAGS=--xla_cpu_multi_thread_eigen=false did not limit them (XLA has
no intra-op thread-count flag), so the JAX worker restricts its affinity to the
first --threads CPUs it may use, as taskset would (kiln and torch set their
thread counts and are not pinned). --check-jax checks the JAX model against the
torch one instead of measuring: the same parameters, and the same losses over 3
training steps from the same weights on the same batches (float32 to 1e-4,
bfloat16 to 1e-2). jax and jaxlib are pinned in bench/requirements.txt.

A failing rung is reported in the table, not raised.

Tokens/s is the median over the steps after the first --warmup steps (which
hold compilation, fused-kernel code generation and cache warm-up): kiln's from
the per-step `tps` of metrics.jsonl, torch's and JAX's from the wall time of each step.
kiln runs with KILN_FUSED_CODEGEN=sync, so generated fused kernels are built
during the warm-up steps instead of running interpreted while they build
(--codegen async measures kiln's default). Memory: "expected" is the peak kiln
predicts before the first step, "kiln alloc" is kiln's
allocator high-water mark over the measured steps (mem_peak_bytes; torch and JAX have
no CPU allocator statistics), "max RSS" the peak resident set of the training
process (its VmHWM, sampled until it exits; compiler subprocesses not counted),
which counts code, libraries and data loading as well. Recipes under 10M
parameters run 10x --warmup and --steps: their steps take milliseconds, and on a
loaded machine a few of them say little. "tok/CPU-s" divides the measured
steps' tokens by the CPU time the process spent on them (kiln: sampled from
/proc as metrics.jsonl grows; torch, JAX: time.process_time): with --threads 1 it
barely moves when other processes load the machine, unlike tokens/s (with more
threads, OpenMP barrier spinning counts as CPU time).

    .venv/bin/python bench/ladder_vs_torch.py                 # both models, 10 steps after 3
    .venv/bin/python bench/ladder_vs_torch.py --quick         # 4 steps after 2
    .venv/bin/python bench/ladder_vs_torch.py --models llama3_debug --rungs strict,graph,torch,jax
    .venv/bin/python bench/ladder_vs_torch.py --models llama3_debug --check-jax

--device cuda runs kiln (--training.device) and PyTorch on the GPU (JAX stays
on the CPU and is skipped), with an mfu column: tokens/s x kiln's FLOPs per token
over the peak kiln divides by (its data sheet's), for every rung alike;
bench/gpu_train_vs_torch.py runs it on the GPU's configurations. KILN_CPU_DEVICES=2
with --device cpu:1 runs kiln on a second host device (PyTorch on the CPU).
"""
import argparse
import copy
import json
import math
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib

FUSED = ["--override", "attention=flash", "--override", "loss=fused_ce"]
KILN_RUNGS = {
    "strict": ("kiln strict eager", ["--runtime.eager_mode=strict"]),
    "defer": ("kiln defer_and_fuse", ["--runtime.eager_mode=defer_and_fuse"]),
    "compile": ("kiln per-block compile", ["--compile.enable"]),
    "graph": ("kiln graph trainer", ["--compile.graph_trainer"]),
    "strict_fused": ("kiln strict + flash/fused_ce", ["--runtime.eager_mode=strict"] + FUSED),
    "graph_fused": ("kiln graph trainer + flash/fused_ce", ["--compile.graph_trainer"] + FUSED),
    "graph_fused_full": ("kiln graph+fused, AC full",
                         ["--compile.graph_trainer", "--activation_checkpoint.mode=full"] + FUSED),
    "graph_fused_selective": ("kiln graph+fused, AC selective",
                              ["--compile.graph_trainer",
                               "--activation_checkpoint.mode=selective"] + FUSED),
    "graph_fused_replay": ("kiln graph+fused, replayed",
                           ["--compile.graph_trainer", "--compile.replay"] + FUSED),
}
TORCH_RUNGS = {"torch": "PyTorch eager", "torch_compile": "PyTorch torch.compile"}
JAX_RUNGS = {"jax": "JAX jit (whole step)"}
ALL_RUNGS = list(KILN_RUNGS) + list(TORCH_RUNGS) + list(JAX_RUNGS)


# ---- kiln ---------------------------------------------------------------------------------------

def vm_hwm(pid):
    """The process's peak resident set so far (bytes), or 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def cpu_seconds(pid):
    """User + system CPU seconds of the process so far (readable until it is reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class StepCpu:
    """Watches a running kiln's metrics.jsonl and notes the process's CPU time when
    the warm-up steps are logged and when the last step is: CPU seconds per measured
    step, which, with one thread, barely moves when other processes load the machine."""

    def __init__(self, path, warmup, total):
        self.path, self.warmup, self.total = path, warmup, total
        self.size, self.start, self.end = -1, None, None

    def __call__(self, pid):
        try:
            size = os.path.getsize(self.path)
        except OSError:
            return
        if size == self.size:
            return
        self.size = size
        with open(self.path) as f:
            lines = sum(1 for line in f if line.endswith("\n"))
        cpu = cpu_seconds(pid)
        if cpu is None:
            return
        if lines >= self.warmup and self.start is None:
            self.start = (lines, cpu)
        if lines >= self.total and self.start and lines > self.start[0]:
            self.end = (lines, cpu)

    def per_step(self):
        if not (self.start and self.end):
            return None
        return (self.end[1] - self.start[1]) / (self.end[0] - self.start[0])


def run_measured(cmd, log_path, timeout, env=None, watch=None):
    """Runs cmd with output to log_path; returns (exit status, wall s, peak RSS bytes).
    Status None means it was killed after `timeout` seconds. The peak RSS is the
    process's own VmHWM, sampled until it exits (rusage would also count the
    compiler processes that kiln and Inductor start). watch(pid) is called at every
    sample, before the process is reaped."""
    start = time.perf_counter()
    rss = 0
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        while True:
            rss = max(rss, vm_hwm(proc.pid))
            if watch:
                watch(proc.pid)
            if proc.poll() is not None:
                break
            if time.perf_counter() - start > timeout:
                proc.kill()
                proc.wait()
                return None, time.perf_counter() - start, rss
            time.sleep(0.01)
    return proc.returncode, time.perf_counter() - start, rss


def last_error_line(log_path):
    with open(log_path, errors="replace") as f:
        lines = [l.strip() for l in f if l.strip()]
    for l in reversed(lines):
        if "error" in l.lower() or "not implemented" in l or "failed" in l.lower():
            return l
    return lines[-1] if lines else "no output"


def kiln_config(kiln, recipe, precision, flags=()):
    r = subprocess.run([kiln, "train", "--config", recipe, "--print-config",
                        "--training.mixed_precision_param", precision, *flags],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{kiln} train --config {recipe} --print-config failed:\n{r.stderr.strip()}")
    cfg = tomllib.loads(r.stdout)
    cfg["arch"] = architecture(kiln, cfg["model"])
    return cfg


def architecture(kiln, model):
    """The model kiln builds: its registry entry (`kiln info --model NAME --json`:
    the family, RoPE scaling, MoE routing, ...) under the effective config's
    [model] values (the recipe's and --model.* flags')."""
    out = subprocess.run([kiln, "info", "--model", model["name"], "--json"],
                         check=True, capture_output=True, text=True).stdout
    arch = json.loads(out)
    for derived in ("params", "active_params", "flops_per_token", "seq_len"):
        del arch[derived]  # of the registry's sizes, not the effective ones
    arch.update({k: v for k, v in model.items() if k in arch})
    return arch


def run_kiln(args, recipe, key, workdir):
    label, flags = KILN_RUNGS[key]
    dump = os.path.join(workdir, f"{recipe}-{key}-{args.round}")
    cmd = [args.kiln, "train", "--config", recipe, "--job.dump_folder", dump,
           "--training.steps", str(args.warmup + args.steps),
           "--training.mixed_precision_param", args.precision,
           "--runtime.num_threads", str(args.threads),
           "--metrics.log_freq", "1", "--metrics.enable_tensorboard=false",
           "--metrics.progress_bar=false", "--checkpoint.enable=false",
           "--validation.enable=false", "--training.device", args.device,
           *args.kiln_flag_list] + flags
    env = dict(os.environ, KILN_FUSED_CODEGEN=args.codegen)
    if args.cold_cache:
        env["KILN_CACHE"] = "off"
    os.makedirs(dump, exist_ok=True)
    log = os.path.join(dump, "stdout.log")
    watch = StepCpu(os.path.join(dump, "metrics.jsonl"), args.warmup, args.warmup + args.steps)
    rc, wall, rss = run_measured(cmd, log, args.timeout, env, watch)
    row = {"rung": label, "wall_s": wall, "rss": rss}
    if rc != 0:
        row["note"] = (f"timed out after {args.timeout} s" if rc is None
                       else f"failed (exit {rc}): {last_error_line(log)}")
        return row
    with open(os.path.join(dump, "metrics.jsonl")) as f:
        metrics = [json.loads(l) for l in f if l.strip()]
    measured = [m for m in metrics if m["step"] > args.warmup]
    if not measured:
        row["note"] = "no steps after the warm-up in metrics.jsonl"
        return row
    with open(log, errors="replace") as f:
        expected = re.search(r"expected peak memory: ([\d.]+) ([KMG])iB", f.read())
    if expected:
        row["expected"] = float(expected[1]) * 2 ** (10 * " KMG".index(expected[2]))
    tps = [m["tps"] for m in measured]
    row.update(tps=statistics.median(tps), best=max(tps),
               spread=(max(tps) - min(tps)) / statistics.median(tps),
               alloc=max(m["mem_peak_bytes"] for m in measured),
               flops_per_token=statistics.median(m["tflops"] * 1e12 / m["tps"] for m in measured),
               first_s=tokens_per_step(args.config) / metrics[0]["tps"])
    if all("mfu" in m for m in measured):
        row["mfu"] = statistics.median(m["mfu"] for m in measured)
        row["peak"] = statistics.median(m["tflops"] * 1e12 / m["mfu"] for m in measured)
    if watch.per_step():
        row["tok_cpu"] = tokens_per_step(args.config) / watch.per_step()
    return row


def param_count(arch):
    """Parameters of the model (as `kiln info --model` counts them)."""
    a = arch
    d, q, kv = a["dim"], a["n_heads"] * a["head_dim"], a["n_kv_heads"] * a["head_dim"]
    total = a["vocab_size"] * d * (1 if a["tie_embeddings"] else 2) + d
    for i in range(a["n_layers"]):
        total += d * (q + 2 * kv) + q * d + 2 * d
        total += (q + 2 * kv + d) if a.get("attention_bias") else 0
        total += 2 * a["head_dim"] if a["qk_norm"] else 0
        total += (d * a["n_experts"] * (1 + 3 * a["moe_ffn_dim"]) if is_moe_layer(a, i)
                  else 3 * d * a["ffn_dim"])
    return total


def is_moe_layer(arch, i):
    return (arch.get("n_experts", 0) > 0 and i not in arch["mlp_only_layers"]
            and (i + 1) % arch["decoder_sparse_step"] == 0)


def tokens_per_step(cfg):
    return cfg["training"]["local_batch_size"] * cfg["training"]["seq_len"]


# ---- PyTorch (in a subprocess, so each run's RSS and failures are its own) -----------------------

def torch_model(spec):
    """transformers' model of kiln's architecture spec["arch"]: LlamaForCausalLM,
    Qwen3ForCausalLM or Qwen3MoeForCausalLM (with its router logits, for the
    load-balancing loss), SDPA attention."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    torch.manual_seed(0)
    a, t = spec["arch"], spec["training"]
    common = dict(
        vocab_size=a["vocab_size"], hidden_size=a["dim"], intermediate_size=a["ffn_dim"],
        num_hidden_layers=a["n_layers"], num_attention_heads=a["n_heads"],
        num_key_value_heads=a["n_kv_heads"], head_dim=a["head_dim"], hidden_act="silu",
        # max_position_embeddings only bounds positions, 8192 keeps HF from warning.
        max_position_embeddings=max(8192, t["seq_len"]), rms_norm_eps=a["norm_eps"],
        initializer_range=a["init_std"], tie_word_embeddings=a["tie_embeddings"],
        rope_theta=a["rope_theta"], attention_bias=a["attention_bias"])
    if a["family"] == "llama3":
        config = AutoConfig.for_model("llama", **common, mlp_bias=False,
                                      rope_scaling=a["rope_scaling"])
    elif a["family"] == "qwen3":
        config = AutoConfig.for_model("qwen3", **common)
    else:
        config = AutoConfig.for_model(
            "qwen3_moe", **common, num_experts=a["n_experts"], num_experts_per_tok=a["top_k"],
            moe_intermediate_size=a["moe_ffn_dim"], norm_topk_prob=a["norm_topk_prob"],
            router_aux_loss_coef=a["router_aux_loss_coef"],
            decoder_sparse_step=a["decoder_sparse_step"], mlp_only_layers=a["mlp_only_layers"],
            output_router_logits=True)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    model.train()
    return model


def torch_trainer(spec, model):
    """step(ids [batch, seq + 1]) -> the loss before the update: forward, backward,
    clipping, AdamW with kiln's parameter groups and the warm-up LambdaLR."""
    import torch
    import torch.nn.functional as F
    # kiln's AdamW parameter groups, as the training-loop oracle builds them.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "oracle"))
    from gen_adamw import kiln_adamw

    t, o, s = spec["training"], spec["optimizer"], spec["lr_scheduler"]
    opt = kiln_adamw(model, o, fused=True)
    warm = max(1, s["warmup_steps"])
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: min(1.0, (i + 1) / warm))
    params = [p for p in model.parameters()]
    bf16 = spec["precision"] == "bfloat16"
    vocab = spec["model"]["vocab_size"]
    aux_coef = spec["arch"].get("router_aux_loss_coef", 0) if spec["arch"].get("n_experts") else 0
    device = torch.device(spec.get("device", "cpu"))

    def loss_of(ids):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            out = model(input_ids=ids[:, :-1])
        loss = F.cross_entropy(out.logits.float().reshape(-1, vocab), ids[:, 1:].reshape(-1))
        # Qwen3-MoE: the load-balancing loss, as kiln's (and transformers' with labels).
        return loss + aux_coef * out.aux_loss if aux_coef else loss

    # torch.compile gets the loss too, as kiln's graph trainer has it: Inductor
    # may fuse the cast and the cross-entropy instead of running them eagerly.
    forward_loss = torch.compile(loss_of) if spec.get("compile") else loss_of

    def step(ids):
        loss = forward_loss(ids)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, t["max_norm"])
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    return step


def torch_worker(spec):
    """Trains the model of `spec` for warmup + steps steps; prints one JSON line."""
    import torch
    torch.set_num_threads(spec["threads"])
    device = torch.device(spec.get("device", "cpu"))
    with device:  # the weights are drawn where they train, not on the host and then moved
        model = torch_model(spec)
    step = torch_trainer(spec, model)
    t = spec["training"]
    batch, seq, vocab = t["local_batch_size"], t["seq_len"], spec["model"]["vocab_size"]
    gen = torch.Generator().manual_seed(0)
    times, cpu = [], []
    for _ in range(spec["warmup"] + spec["steps"]):
        t0, c0 = time.perf_counter(), time.process_time()
        step(torch.randint(0, vocab, (batch, seq + 1), generator=gen).to(device))
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    print(json.dumps({"step_s": times, "cpu_s": cpu,
                      "params": sum(p.numel() for p in model.parameters())}))


# ---- JAX (bench/jax_llama.py, in a subprocess like PyTorch) --------------------------------------

def limit_xla_threads(threads):
    """XLA's CPU client sizes its thread pools from the process's CPU affinity
    (XLA_FLAGS=--xla_cpu_multi_thread_eigen=false still kept two pool threads busy
    with jaxlib 0.10.2, and XLA has no intra-op thread-count flag), so this limits
    the process to the first `threads` CPUs it may use, as `taskset` would; it must
    run before jax is imported."""
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:threads])


def import_jax_llama():
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # no probing for accelerators
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import jax_llama
    return jax_llama


def jax_worker(spec):
    """Trains the model of `spec` with JAX for warmup + steps steps; prints one JSON line."""
    limit_xla_threads(spec["threads"])
    jl = import_jax_llama()
    import jax
    import jax.numpy as jnp
    import numpy as np
    m, t = spec["model"], spec["training"]
    dtype = jnp.bfloat16 if spec["precision"] == "bfloat16" else jnp.float32
    params = jl.init_params(m)
    opt = jl.init_opt_state(params)
    step = jl.jit_train_step(m, t, spec["optimizer"], spec["lr_scheduler"],
                             spec["arch"]["rope_scaling"], dtype)
    batch, seq, vocab = t["local_batch_size"], t["seq_len"], m["vocab_size"]
    rng = np.random.default_rng(0)
    times, cpu = [], []
    for _ in range(spec["warmup"] + spec["steps"]):
        t0, c0 = time.perf_counter(), time.process_time()
        ids = rng.integers(0, vocab, (batch, seq + 1), dtype=np.int32)
        params, opt, loss = step(params, opt, ids)
        jax.block_until_ready((params, opt, loss))
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    print(json.dumps({"step_s": times, "cpu_s": cpu}))


def check_jax(recipe, cfg, threads, steps=3):
    """The JAX model against the torch rungs' model: the same parameters (names,
    shapes, count), and from the same initial weights on the same batches the same
    loss at each of `steps` training steps, in float32 (to 1e-4) and bfloat16 (to
    1e-2: the two round differently). Returns whether they agree."""
    import torch
    torch.set_num_threads(threads)
    jl = import_jax_llama()
    import jax.numpy as jnp
    m, t = cfg["model"], cfg["training"]
    spec = dict(cfg)
    model = torch_model(spec)
    initial = {n: p.detach().clone() for n, p in model.named_parameters()}
    shapes = {n: tuple(p.shape) for n, p in initial.items()}
    torch_n, jax_n = sum(p.numel() for p in initial.values()), sum(
        math.prod(x) for x in jl.param_shapes(m).values())
    kiln_n = param_count(cfg["arch"])
    ok = shapes == jl.param_shapes(m) and torch_n == jax_n == kiln_n
    print(f"{recipe}: parameters: torch {torch_n:,}, jax {jax_n:,}, kiln {kiln_n:,}"
          f"{'' if shapes == jl.param_shapes(m) else '; names or shapes differ'}")
    gen = torch.Generator().manual_seed(1)
    batches = [torch.randint(0, m["vocab_size"], (t["local_batch_size"], t["seq_len"] + 1),
                             generator=gen) for _ in range(steps)]
    for precision, tol in (("float32", 1e-4), ("bfloat16", 1e-2)):
        spec["precision"] = precision
        with torch.no_grad():
            for n, p in model.named_parameters():
                p.copy_(initial[n])
        step = torch_trainer(spec, model)
        torch_losses = [step(ids) for ids in batches]
        params = {n: jnp.asarray(p.numpy()) for n, p in initial.items()}
        opt = jl.init_opt_state(params)
        jstep = jl.jit_train_step(m, t, cfg["optimizer"], cfg["lr_scheduler"],
                                  cfg["arch"]["rope_scaling"],
                                  jnp.bfloat16 if precision == "bfloat16" else jnp.float32)
        jax_losses = []
        for ids in batches:
            params, opt, loss = jstep(params, opt, ids.numpy().astype("int32"))
            jax_losses.append(float(loss))
        diff = max(abs(a - b) for a, b in zip(torch_losses, jax_losses))
        ok = ok and diff <= tol
        print(f"  {precision}: loss at steps 1..{steps}: torch "
              f"{' '.join(f'{x:.6f}' for x in torch_losses)}, jax "
              f"{' '.join(f'{x:.6f}' for x in jax_losses)}; max difference {diff:.1e} "
              f"({'within' if diff <= tol else 'OVER'} the tolerance {tol:g})")
    return ok


def run_worker(args, recipe, key, workdir):
    """A PyTorch or JAX rung: this script's --torch-worker or --jax-worker in a subprocess."""
    label = TORCH_RUNGS.get(key) or JAX_RUNGS[key]
    row = {"rung": label, "wall_s": 0, "rss": None}
    arch = args.config["arch"]
    if key in JAX_RUNGS and arch["family"] != "llama3":
        row["note"] = f"skipped: the JAX side builds Llama models, not {arch['family']}"
        return row
    extras = [k for k in ("router_z_loss_coef", "router_bias_update_rate")
              if args.config["model"].get(k)]
    if extras:
        row["note"] = f"skipped: the {label.split()[0]} side has no {' or '.join(extras)}"
        return row
    if key in JAX_RUNGS and args.device != "cpu":
        row["note"] = "skipped: the JAX side runs on the CPU"
        return row
    spec = dict(args.config, threads=args.threads, compile=key == "torch_compile",
                device="cpu" if args.device.startswith("cpu") else args.device,
                precision=args.precision, warmup=args.warmup, steps=args.steps)
    log = os.path.join(workdir, f"{recipe}-{key}-{args.round}.log")
    worker = "--jax-worker" if key in JAX_RUNGS else "--torch-worker"
    cmd = [sys.executable, os.path.abspath(__file__), worker, json.dumps(spec)]
    env = dict(os.environ, TORCHINDUCTOR_FORCE_DISABLE_CACHES="1") if args.cold_cache else None
    rc, row["wall_s"], row["rss"] = run_measured(cmd, log, args.timeout, env)
    if rc != 0:
        row["note"] = (f"timed out after {args.timeout} s" if rc is None
                       else f"failed (exit {rc}): {last_error_line(log)}")
        return row
    with open(log) as f:
        result = json.loads(f.read().strip().splitlines()[-1])
    if "params" in result and result["params"] != param_count(arch):
        row["note"] = (f"not comparable: the PyTorch model has {result['params']:,} parameters, "
                       f"kiln's {param_count(arch):,}")
        return row
    times, cpu = result["step_s"], result["cpu_s"][args.warmup:]
    tps = [tokens_per_step(args.config) / x for x in times[args.warmup:]]
    row["tok_cpu"] = tokens_per_step(args.config) * len(cpu) / sum(cpu)
    row.update(tps=statistics.median(tps), best=max(tps),
               spread=(max(tps) - min(tps)) / statistics.median(tps),
               first_s=times[0])
    return row


# ---- report -------------------------------------------------------------------------------------

def mib(n):
    return "-" if not n else f"{n / 2**20:,.0f} MiB"


def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "n/a"


def add_mfu(rows):
    """MFU of every measured row: kiln's own (metrics' mfu), else tokens/s x kiln's
    FLOPs per token over the peak kiln divided by (the same model and shapes)."""
    ref = next((r for r in rows if r.get("peak")), None)
    for r in rows:
        if "mfu" not in r and "tps" in r and ref:
            r["mfu"] = r["tps"] * ref["flops_per_token"] / ref["peak"]


def print_table(recipe, margs, rows):
    cfg = margs.config
    m, t = cfg["model"], cfg["training"]
    print(f"\n{recipe}: {m['name']} ({cfg['arch']['family']}), "
          f"{param_count(cfg['arch']) / 1e6:.1f}M parameters (dim {m['dim']}, "
          f"{m['n_layers']} layers, {m['n_heads']}/{m['n_kv_heads']} heads, ffn {m['ffn_dim']}, "
          + (f"{m['n_experts']} experts (top {m['top_k']}, ffn {m['moe_ffn_dim']}), "
             if m.get("n_experts") else "") +
          f"vocab {m['vocab_size']}); batch {t['local_batch_size']} x seq {t['seq_len']} = "
          f"{tokens_per_step(cfg)} tokens/step; {margs.precision}; "
          f"{margs.warmup} warm-up + {margs.steps} measured steps")
    def reference(label, field):
        return next((r.get(field) for r in rows if r["rung"] == label), None)

    strict = reference(KILN_RUNGS["strict"][0], "tps")
    eager = reference(TORCH_RUNGS["torch"], "tps")
    eager_cpu = reference(TORCH_RUNGS["torch"], "tok_cpu")
    add_mfu(rows)
    head = (f"{'rung':<36} {'tokens/s':>9} {'best':>9} {'spread':>6} {'vs strict':>9} "
            f"{'vs torch':>8} {'mfu':>6} {'tok/CPU-s':>9} {'vs torch':>8} {'1st step':>9} "
            f"{'expected':>9} {'kiln alloc':>10} {'max RSS':>10}")
    print(head)
    print("-" * len(head))
    for r in rows:
        if "tps" not in r:
            print(f"{r['rung']:<36} {'-':>9} {'':>9} {'':>6} {'':>9} {'':>8} {'':>6} {'':>9} {'':>8} "
                  f"{'':>9} {'':>9} {'':>10} {mib(r['rss']):>10}  {r['note']}")
            continue
        cpu = f"{r['tok_cpu']:,.0f}" if r.get("tok_cpu") else "-"
        mfu = f"{r['mfu'] * 100:.1f}%" if r.get("mfu") else "-"
        print(f"{r['rung']:<36} {r['tps']:>9,.0f} {r['best']:>9,.0f} {r['spread'] * 100:>5.0f}% "
              f"{ratio(r['tps'], strict):>9} {ratio(r['tps'], eager):>8} {mfu:>6} {cpu:>9} "
              f"{ratio(r.get('tok_cpu'), eager_cpu):>8} {r['first_s']:>8.2f}s "
              f"{mib(r.get('expected')):>9} {mib(r.get('alloc')):>10} {mib(r['rss']):>10}")
    ref = next((r for r in rows if r.get("peak")), None)
    if ref:
        print(f"mfu: tokens/s x kiln's {ref['flops_per_token'] / 1e9:.3g} GFLOP per token over "
              f"kiln's peak, {ref['peak'] / 1e12:.3g} TFLOP/s (the `mfu:` line of a kiln run "
              "names its source), for every rung")
    print("(vs strict / vs torch: median tokens/s over kiln strict eager's / PyTorch eager's; "
          "tok/CPU-s: tokens per CPU-second of the process over the measured steps, and its "
          "ratio to PyTorch eager's; 1st step: its seconds, compilation included" +
          (", in the kept run: later rounds find kiln's compile cache warm)"
           if margs.repeat > 1 else ")"))


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def jax_versions():
    """jax's and jaxlib's versions from their metadata: importing jax takes seconds."""
    from importlib import metadata
    try:
        return f"{metadata.version('jax')} (jaxlib {metadata.version('jaxlib')})"
    except metadata.PackageNotFoundError:
        return "not installed (scripts/setup.sh installs it)"


def print_environment(args):
    import torch
    import transformers
    info = subprocess.run([args.kiln, "info"], capture_output=True, text=True).stdout
    features = next((l.split(":", 1)[1].strip() for l in info.splitlines()
                     if l.startswith("cpu features")), "?")
    kernels = next((l.split("kernels for ", 1)[1].strip() for l in info.splitlines()
                    if "kernels for " in l), "?")
    print(f"cpu: {cpu_name()}, {os.cpu_count()} logical cores; {features}; "
          f"kiln's CPU kernels for {kernels}")
    if args.device != "cpu":
        print(f"device: {args.device}; " + "; ".join(
            l.strip() for l in info.splitlines()
            if l.strip().startswith(("cuda", "mfu peak", "measured"))))
    print(f"threads: {args.threads} (kiln --runtime.num_threads, torch.set_num_threads, "
          "JAX: the CPU affinity of its process)")
    print(f"kiln: {args.kiln}, KILN_FUSED_CODEGEN={args.codegen}; torch {torch.__version__}, "
          f"transformers {transformers.__version__}; jax {jax_versions()}")
    print(f"precision: {args.precision}" + (
        " (kiln: bf16 compute, f32 master weights; torch: f32 weights, bf16 autocast; "
        "JAX: f32 weights cast to bf16 in the step)"
        if args.precision == "bfloat16" else ""))
    print("tokens/s: the median over the measured steps; best: the fastest step; "
          "spread: (max - min) / median" + (
              f"; each rung run {args.repeat} times, interleaved, the run with the highest "
              "median kept" if args.repeat > 1 else ""))
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def main():
    if len(sys.argv) == 3 and sys.argv[1] in ("--torch-worker", "--jax-worker"):
        worker = torch_worker if sys.argv[1] == "--torch-worker" else jax_worker
        try:
            worker(json.loads(sys.argv[2]))
        except Exception as e:  # reported as the rung's note
            msg = " ".join(str(e).split())[:160]
            sys.exit(f"error: {type(e).__name__}: {msg}")
        return

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kiln", default=os.environ.get("KILN_CLI", "build/kiln"),
                        help="the kiln executable (default: $KILN_CLI or build/kiln)")
    parser.add_argument("--models", default="llama3_debug,llama3_100m",
                        help="comma-separated recipes (names in recipes/ or paths)")
    parser.add_argument("--rungs", default=",".join(ALL_RUNGS),
                        help=f"comma-separated subset of {','.join(ALL_RUNGS)}")
    parser.add_argument("--steps", type=int, default=10, help="measured steps per rung")
    parser.add_argument("--warmup", type=int, default=3, help="steps skipped before measuring")
    parser.add_argument("--quick", action="store_true", help="2 warm-up + 4 measured steps")
    parser.add_argument("--precision", choices=["bfloat16", "float32"], default="bfloat16",
                        help="bfloat16: bf16 compute, f32 master weights (default)")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                        help="threads for kiln and torch (default: all cores, kiln's default)")
    parser.add_argument("--codegen", choices=["sync", "async"], default="sync",
                        help="KILN_FUSED_CODEGEN for kiln's runs (default sync: see above)")
    parser.add_argument("--cold-cache", action="store_true",
                        help="no compile caches across runs (KILN_CACHE=off, "
                             "TORCHINDUCTOR_FORCE_DISABLE_CACHES=1): 1st step then holds "
                             "every compilation")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run every rung this many times, in interleaved rounds, and keep "
                             "each rung's run with the highest median (for a loaded machine)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per run")
    parser.add_argument("--device", default="cpu",
                        help="kiln's --training.device and torch's device (cpu, cuda, cuda:N); "
                             "the JAX rung runs on the CPU only")
    parser.add_argument("--kiln-flags", default="",
                        help="more `kiln train` flags for every kiln run and the config torch "
                             "builds (e.g. '--model.n_layers 4 --data.path corpus.txt')")
    parser.add_argument("--json", metavar="FILE",
                        help="also write every recipe's rows (tokens/s, mfu, ...) here as JSON")
    parser.add_argument("--check-jax", action="store_true",
                        help="only check the JAX model against the PyTorch one for each of "
                             "--models (parameters; losses of 3 steps from the same weights, "
                             "float32 and bfloat16); exit 1 if they differ")
    parser.add_argument("--keep", metavar="DIR",
                        help="keep the runs' dump folders and logs here (default: a temp dir)")
    args = parser.parse_args()
    args.kiln_flag_list = shlex.split(args.kiln_flags)
    sys.stdout.reconfigure(line_buffering=True)  # the table and stderr's progress in order
    if args.quick:
        args.warmup, args.steps = 2, 4
    if not os.access(args.kiln, os.X_OK):
        sys.exit(f"kiln executable not found at {args.kiln}; build it or pass --kiln")
    rungs = args.rungs.split(",")
    for r in rungs:
        if r not in ALL_RUNGS:
            sys.exit(f"unknown rung '{r}'; choose from {','.join(ALL_RUNGS)}")
    if args.steps < 1 or args.warmup < 1 or args.repeat < 1:
        sys.exit("--steps, --warmup and --repeat must be at least 1 (the first step compiles)")

    if args.check_jax:
        ok = True
        for recipe in args.models.split(","):
            cfg = kiln_config(args.kiln, recipe, "float32", args.kiln_flag_list)
            if cfg["arch"]["family"] != "llama3":
                print(f"{recipe}: skipped: the JAX side builds Llama models, not "
                      f"{cfg['arch']['family']}")
                continue
            ok = check_jax(recipe, cfg, args.threads) and ok
        sys.exit(0 if ok else 1)
    print_environment(args)
    results = {}
    with tempfile.TemporaryDirectory(prefix="kiln-ladder-") as tmp:
        workdir = args.keep or tmp
        os.makedirs(workdir, exist_ok=True)
        for recipe in args.models.split(","):
            margs = copy.copy(args)
            margs.config = kiln_config(args.kiln, recipe, args.precision, args.kiln_flag_list)
            if param_count(margs.config["arch"]) < 10_000_000:
                margs.steps *= 10
                margs.warmup *= 10
            best = {}
            for margs.round in range(args.repeat):
                for key in rungs:
                    run = run_kiln if key in KILN_RUNGS else run_worker
                    row = run(margs, recipe, key, workdir)
                    if key not in best or row.get("tps", 0) > best[key].get("tps", 0):
                        best[key] = row
                    done = f"{row['tps']:,.0f} tokens/s" if "tps" in row else row["note"]
                    print(f"  [{recipe}, round {margs.round + 1}] {row['rung']}: {done} "
                          f"({row['wall_s']:.0f} s)", file=sys.stderr, flush=True)
            rows = [best[k] for k in rungs]
            print_table(recipe, margs, rows)
            results[recipe] = {k: row for k, row in zip(rungs, rows)}
    print(f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
