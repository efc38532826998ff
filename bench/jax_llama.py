"""kiln's Llama recipe in plain jax.numpy, for bench/ladder_vs_torch.py's jax rung.

The model is transformers' LlamaForCausalLM (the torch rungs' model): parameters
are a dict keyed by its state_dict names, with its shapes (a Linear's weight is
[out, in]), so torch weights load as they are and the AdamW parameter groups use
the same rule (tests/oracle/gen_adamw.py kiln_adamw). The training step is
forward, backward, gradient clipping to max_norm, the warm-up learning rate and
AdamW (torch.optim.AdamW's update), as one function for jax.jit.

`m`, `t`, `o`, `s` are the [model], [training], [optimizer] and [lr_scheduler]
sections of kiln's effective config (`kiln train --print-config`); `rope` the
Llama 3.1 RoPE scaling (factor, low/high_freq_factor,
original_max_position_embeddings), which that config does not print.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np


def param_shapes(m):
    """name -> shape, in LlamaForCausalLM's named_parameters() order."""
    d, hd = m["dim"], m["head_dim"]
    q, kv = m["n_heads"] * hd, m["n_kv_heads"] * hd
    shapes = {"model.embed_tokens.weight": (m["vocab_size"], d)}
    for i in range(m["n_layers"]):
        p = f"model.layers.{i}."
        shapes.update({
            p + "self_attn.q_proj.weight": (q, d), p + "self_attn.k_proj.weight": (kv, d),
            p + "self_attn.v_proj.weight": (kv, d), p + "self_attn.o_proj.weight": (d, q),
            p + "mlp.gate_proj.weight": (m["ffn_dim"], d), p + "mlp.up_proj.weight": (m["ffn_dim"], d),
            p + "mlp.down_proj.weight": (d, m["ffn_dim"]),
            p + "input_layernorm.weight": (d,), p + "post_attention_layernorm.weight": (d,)})
    shapes["model.norm.weight"] = (d,)
    if not m["tie_embeddings"]:
        shapes["lm_head.weight"] = (m["vocab_size"], d)
    return shapes


def init_params(m, seed=0):
    """Normal(0, init_std) matrices and unit norms, as LlamaForCausalLM initialises them."""
    key = jax.random.PRNGKey(seed)
    params = {}
    for i, (name, shape) in enumerate(param_shapes(m).items()):
        if len(shape) == 1:
            params[name] = jnp.ones(shape, jnp.float32)
        else:
            params[name] = m["init_std"] * jax.random.normal(jax.random.fold_in(key, i), shape,
                                                             jnp.float32)
    return params


def decays(name, shape, o):
    """kiln's default parameter groups: no weight decay on parameters of fewer than
    2 dims and on the token embedding, unless decay_norms_and_embeddings."""
    return o["decay_norms_and_embeddings"] or not (
        len(shape) < 2 or name.endswith("embed_tokens.weight"))


def rope_tables(m, rope, seq):
    """cos, sin [seq, head_dim] of Llama 3.1 scaled RoPE (transformers'
    _compute_llama3_parameters, in float32 like it)."""
    hd = m["head_dim"]
    inv = 1.0 / (m["rope_theta"] ** (np.arange(0, hd, 2, dtype=np.int64).astype(np.float32) / hd))
    factor, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
    orig = rope["original_max_position_embeddings"]
    low_wavelen, high_wavelen = orig / low, orig / high
    wavelen = 2 * math.pi / inv
    scaled = np.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (orig / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    inv = np.where(medium, smoothed, scaled).astype(np.float32)
    freqs = np.arange(seq, dtype=np.float32)[:, None] * inv[None, :]
    emb = np.concatenate([freqs, freqs], axis=-1)
    return jnp.asarray(np.cos(emb)), jnp.asarray(np.sin(emb))


def rms_norm(x, w, eps, dtype):
    """In float32, like LlamaRMSNorm; the result in the compute dtype."""
    x32 = x.astype(jnp.float32)
    x32 = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return w.astype(dtype) * x32.astype(dtype)


def rotate(x, cos, sin):
    """RoPE in transformers' rotate_half layout; x [B, S, heads, hd]."""
    half = x.shape[-1] // 2
    rotated = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos[None, :, None, :] + rotated * sin[None, :, None, :]


def linear(x, w):
    return jnp.einsum("...i,oi->...o", x, w)


def forward(params, ids, m, rope, dtype):
    """Logits [B, S, vocab] (in `dtype`) of input ids [B, S]; `params` already in `dtype`."""
    b, s = ids.shape
    hd, nh, nkv = m["head_dim"], m["n_heads"], m["n_kv_heads"]
    cos, sin = (t.astype(dtype) for t in rope_tables(m, rope, s))
    causal = jnp.tril(jnp.ones((s, s), bool))
    h = params["model.embed_tokens.weight"][ids]
    for i in range(m["n_layers"]):
        p = lambda n: params[f"model.layers.{i}.{n}.weight"]
        x = rms_norm(h, p("input_layernorm"), m["norm_eps"], dtype)
        q = rotate(linear(x, p("self_attn.q_proj")).reshape(b, s, nh, hd), cos, sin)
        k = rotate(linear(x, p("self_attn.k_proj")).reshape(b, s, nkv, hd), cos, sin)
        v = linear(x, p("self_attn.v_proj")).reshape(b, s, nkv, hd)
        # Grouped-query attention: query head h reads kv head h // (nh / nkv).
        q = q.reshape(b, s, nkv, nh // nkv, hd)
        scores = jnp.einsum("bqkgd,bskd->bkgqs", q, k).astype(jnp.float32) / math.sqrt(hd)
        scores = jnp.where(causal, scores, -jnp.inf)
        probs = jax.nn.softmax(scores, axis=-1).astype(dtype)
        attn = jnp.einsum("bkgqs,bskd->bqkgd", probs, v).reshape(b, s, nh * hd)
        h = h + linear(attn, p("self_attn.o_proj"))
        x = rms_norm(h, p("post_attention_layernorm"), m["norm_eps"], dtype)
        h = h + linear(jax.nn.silu(linear(x, p("mlp.gate_proj"))) * linear(x, p("mlp.up_proj")),
                       p("mlp.down_proj"))
    h = rms_norm(h, params["model.norm.weight"], m["norm_eps"], dtype)
    head = params["model.embed_tokens.weight" if m["tie_embeddings"] else "lm_head.weight"]
    return linear(h, head)


def loss_fn(params, ids, m, rope, dtype):
    """Mean next-token cross-entropy of ids [B, S + 1], in float32. The float32
    master weights are cast to `dtype` here, so their gradients come back float32."""
    compute = jax.tree.map(lambda w: w.astype(dtype), params)
    logits = forward(compute, ids[:, :-1], m, rope, dtype).astype(jnp.float32)
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, ids[:, 1:, None], axis=-1))


def init_opt_state(params):
    zeros = lambda: jax.tree.map(jnp.zeros_like, params)
    return {"step": jnp.zeros((), jnp.int32), "m": zeros(), "v": zeros()}


def train_step(params, opt, ids, m, t, o, s, rope, dtype):
    """One step: (new params, new optimizer state, loss). Clipping is
    torch.nn.utils.clip_grad_norm_'s (coefficient max_norm / (norm + 1e-6), at
    most 1); the learning rate is lr * min(1, step / max(1, warmup_steps)) at the
    1-based step, as the torch rung's LambdaLR; AdamW is torch.optim.AdamW's."""
    loss, grads = jax.value_and_grad(loss_fn)(params, ids, m, rope, dtype)
    norm = jnp.sqrt(sum(jnp.sum(g * g) for g in jax.tree.leaves(grads)))
    coef = jnp.minimum(1.0, t["max_norm"] / (norm + 1e-6))
    step = opt["step"] + 1
    stepf = step.astype(jnp.float32)
    lr = o["lr"] * jnp.minimum(1.0, stepf / max(1, s["warmup_steps"]))
    b1, b2 = o["beta1"], o["beta2"]
    bc1, bc2 = 1 - b1 ** stepf, 1 - b2 ** stepf
    new_p, new_m, new_v = {}, {}, {}
    for name, p in params.items():
        g = grads[name] * coef
        mom = b1 * opt["m"][name] + (1 - b1) * g
        var = b2 * opt["v"][name] + (1 - b2) * g * g
        wd = o["weight_decay"] if decays(name, p.shape, o) else 0.0
        p = p * (1 - lr * wd)
        new_p[name] = p - (lr / bc1) * mom / (jnp.sqrt(var) / jnp.sqrt(bc2) + o["eps"])
        new_m[name], new_v[name] = mom, var
    return new_p, {"step": step, "m": new_m, "v": new_v}, loss


def jit_train_step(m, t, o, s, rope, dtype):
    """train_step(params, opt, ids) under one jax.jit, params and optimizer state donated."""
    return jax.jit(lambda params, opt, ids: train_step(params, opt, ids, m, t, o, s, rope, dtype),
                   donate_argnums=(0, 1))
