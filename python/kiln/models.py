"""Models: ``kiln.models.build(name, **overrides)`` (a registered config,
e.g. "llama3_debug", with model settings changed) and
``kiln.models.from_hf(dir)`` (a Hugging Face folder), both kiln.models.CausalLM."""
from . import _kiln
from ._kiln import CausalLM, Tokenizer, model_names


def build(name, *, dtype=None, seed=0, **overrides):
    """The registered config `name` with `overrides` (model settings such as
    dim=64, n_layers=2, attention_impl="flash"), parameters drawn with
    `seed` as kiln's trainer draws them."""
    return _kiln.build_model(name, dtype, seed, overrides)


def from_hf(dir, *, dtype=None):
    """The model a Hugging Face folder holds (config.json and safetensors
    weights, sharded or not), in `dtype` (default float32)."""
    return _kiln.load_hf_model(str(dir), dtype)


def generate(model, prompts, *, max_new_tokens=100, temperature=1.0, top_k=0, top_p=1.0,
             eos_ids=(), seed=0, max_length=0):
    """Continues each prompt (a list of token ids, or a list of them) with
    the KV cache, drawing by temperature / top-k / top-p (temperature 0:
    greedy). Returns one dict per prompt: ids (without the end-of-sequence
    id), logprobs, finish_reason ("eos" or "length"). Row b draws with
    seed + b. max_length: the cache's length (0: the model's seq_len)."""
    single = bool(prompts) and isinstance(prompts[0], int)
    rows = [list(prompts)] if single else [list(p) for p in prompts]
    out = _kiln.generate(model, rows, max_new_tokens, temperature, top_k, top_p,
                         list(eos_ids), seed, max_length)
    return out[0] if single else out


__all__ = ["CausalLM", "Tokenizer", "build", "from_hf", "generate", "model_names"]
