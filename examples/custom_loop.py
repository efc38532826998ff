"""A training loop of your own: a model from a Hugging Face folder,
kiln.value_and_grad over its parameter dict, forward and backward compiled
into one program with kiln.compile, and kiln.optim.AdamW.

    python examples/custom_loop.py --hf DIR --text book.txt --steps 100

DIR holds config.json, the safetensors weights and tokenizer.json. --test:
a small random model saved to a temporary folder and fine-tuned to repeat a
short text (how the test suite runs this example).
"""
import argparse
import os
import shutil
import tempfile

import numpy as np

import kiln


def batches(ids, batch, seq, rng):
    """Random windows of the token stream: (inputs, next tokens)."""
    ids = np.asarray(ids, dtype=np.int64)
    while True:
        starts = rng.integers(0, len(ids) - seq - 1, batch)
        x = np.stack([ids[s:s + seq] for s in starts])
        y = np.stack([ids[s + 1:s + seq + 1] for s in starts])
        yield kiln.from_numpy(x), kiln.from_numpy(y)


def train(model, data, steps, lr):
    params = model.state_dict()
    opt = kiln.optim.AdamW(params, lr=lr, weight_decay=0.0)
    grad_fn = kiln.value_and_grad(lambda p, x, y: model.loss(x, y, params=p), argnums=0)

    # Forward and backward as one program, compiled at the first step.
    step = kiln.compile(grad_fn)

    losses = []
    for i in range(steps):
        x, y = next(data)
        loss, grads = step(params, x, y)
        params = opt.step(params, grads)
        losses.append(loss.item())
        if i % 10 == 0 or i == steps - 1:
            print(f"step {i:4d}  loss {losses[-1]:.4f}")
    model.load_state_dict(params)
    return losses


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hf", help="a Hugging Face model folder")
    p.add_argument("--text", help="a UTF-8 text file to fine-tune on")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--test", action="store_true")
    args = p.parse_args()
    rng = np.random.default_rng(0)

    if args.test:
        with tempfile.TemporaryDirectory() as d:
            kiln.models.build("llama3_debug", dim=64, n_layers=2, n_heads=4, n_kv_heads=2,
                              head_dim=16, ffn_dim=128, vocab_size=64).save_hf(d + "/model")
            model = kiln.models.from_hf(d + "/model")
        ids = rng.integers(0, 64, 40).tolist() * 8  # a text of 40 tokens, repeated
        losses = train(model, batches(ids, 4, 32, rng), steps=40, lr=1e-2)
        assert losses[-1] < 0.5 * losses[0], f"the loss did not fall: {losses}"
        return
    if not (args.hf and args.text):
        p.error("--hf and --text are required (or --test)")
    model = kiln.models.from_hf(args.hf)
    tokenizer = kiln.Tokenizer.load(args.hf)
    with open(args.text, encoding="utf-8") as f:
        ids = tokenizer.encode(f.read())
    train(model, batches(ids, args.batch, args.seq, rng), args.steps, args.lr)
    tuned = args.hf.rstrip("/") + "-tuned"
    model.save_hf(tuned, overwrite=True)
    # The weights alone: the tokenizer's files and generation_config.json
    # make the folder one that `kiln generate --hf` and transformers read.
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                 "generation_config.json"):
        if os.path.isfile(os.path.join(args.hf, name)):
            shutil.copy(os.path.join(args.hf, name), tuned)
    print(f"wrote {tuned}")


if __name__ == "__main__":
    main()
